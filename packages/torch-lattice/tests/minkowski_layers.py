"""Layer classes with MinkowskiEngine 0.5's names, constructor arguments and parameters.

MinkowskiEngine does not install here.  ``torch_lattice.port.from_minkowski``
matches layers by type, so a model built from these classes is, to the port,
an ME model only because the tests declare them with ``types=TYPES``: the port
reads their attributes and parameters as ME's (``kernel`` ``(K, C_in, C_out)``
in ME's x-fastest row order, ``(C_in, C_out)`` for a 1x1x1 kernel; ``bias``
``(1, C_out)``; the geometry in ``kernel_generator``; ``MinkowskiBatchNorm``
wrapping a ``BatchNorm1d`` as ``bn``; ``BasicBlock`` as
``MinkowskiEngine.modules.resnet_block`` lays it out).  They have no forward:
the oracle that computes what ME would is ``framework_reference``.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch


def _triple(v: int | tuple[int, int, int]) -> tuple[int, int, int]:
    return (v, v, v) if isinstance(v, int) else (v[0], v[1], v[2])


class MinkowskiConvolution(torch.nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any = -1,
        stride: Any = 1,
        dilation: Any = 1,
        bias: bool = False,
        dimension: int = 3,
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.dimension = in_channels, out_channels, dimension
        self.kernel_generator = SimpleNamespace(
            kernel_size=_triple(kernel_size),
            kernel_stride=_triple(stride),
            kernel_dilation=_triple(dilation),
        )
        volume = math.prod(_triple(kernel_size))
        shape = (volume, in_channels, out_channels) if volume > 1 else (in_channels, out_channels)
        self.kernel = torch.nn.Parameter(torch.randn(shape) / math.sqrt(in_channels * volume))
        self.bias = torch.nn.Parameter(torch.randn(1, out_channels) * 0.1) if bias else None


class MinkowskiConvolutionTranspose(MinkowskiConvolution):
    pass


class MinkowskiGenerativeConvolutionTranspose(MinkowskiConvolution):
    pass


class MinkowskiBatchNorm(torch.nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(num_features, eps=eps, momentum=momentum)


class MinkowskiReLU(torch.nn.Module):
    pass


class BasicBlock(torch.nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: Any = None) -> None:
        super().__init__()
        self.conv1 = MinkowskiConvolution(inplanes, planes, 3, stride=stride)
        self.norm1 = MinkowskiBatchNorm(planes)
        self.conv2 = MinkowskiConvolution(planes, planes, 3)
        self.norm2 = MinkowskiBatchNorm(planes)
        self.relu = MinkowskiReLU()
        self.downsample = downsample


TYPES: dict[type, str] = {
    MinkowskiConvolution: "MinkowskiConvolution",
    MinkowskiConvolutionTranspose: "MinkowskiConvolutionTranspose",
    MinkowskiGenerativeConvolutionTranspose: "MinkowskiGenerativeConvolutionTranspose",
    MinkowskiBatchNorm: "MinkowskiBatchNorm",
    MinkowskiReLU: "MinkowskiReLU",
    BasicBlock: "BasicBlock",
}
"""What each stand-in class is, for ``from_minkowski(..., types=TYPES)``."""


class MinkUNet14(torch.nn.Module):
    """ME's ``examples/minkunet.py`` ``MinkUNet14``: BasicBlock, one block per stage.

    ``PLANES = (32, 64, 128, 256, 256, 128, 96, 96)``, ``INIT_DIM = 32``, a 5-wide
    stem, k2s2 down and transposed convs, ``ME.cat(up, skip)`` at each decoder
    stage, a 1x1x1 classifier with bias; ``width`` scales every plane count.
    """

    PLANES = (32, 64, 128, 256, 256, 128, 96, 96)
    INIT_DIM = 32

    def __init__(self, in_channels: int, out_channels: int, width: float = 1.0) -> None:
        super().__init__()
        p = [max(1, int(width * c)) for c in self.PLANES]
        init = max(1, int(width * self.INIT_DIM))
        self.inplanes = init
        self.conv0p1s1 = MinkowskiConvolution(in_channels, init, kernel_size=5)
        self.bn0 = MinkowskiBatchNorm(init)
        for i, (name, planes) in enumerate(zip(("1", "2", "3", "4"), p[:4], strict=True)):
            setattr(
                self,
                f"conv{name}p{2**i}s2",
                MinkowskiConvolution(self.inplanes, self.inplanes, 2, 2),
            )
            setattr(self, f"bn{name}", MinkowskiBatchNorm(self.inplanes))
            setattr(self, f"block{name}", self._make_layer(planes))
        skips = [p[2], p[1], p[0], init]
        for j, (name, planes) in enumerate(zip(("4", "5", "6", "7"), p[4:], strict=True)):
            setattr(
                self,
                f"convtr{name}p{2 ** (4 - j)}s2",
                MinkowskiConvolutionTranspose(self.inplanes, planes, 2, 2),
            )
            setattr(self, f"bntr{name}", MinkowskiBatchNorm(planes))
            self.inplanes = planes + skips[j]
            setattr(self, f"block{int(name) + 1}", self._make_layer(planes))
        self.final = MinkowskiConvolution(p[7], out_channels, kernel_size=1, bias=True)
        self.relu = MinkowskiReLU()

    def _make_layer(self, planes: int) -> torch.nn.Sequential:
        down = None
        if self.inplanes != planes:
            down = torch.nn.Sequential(
                MinkowskiConvolution(self.inplanes, planes, 1), MinkowskiBatchNorm(planes)
            )
        block = BasicBlock(self.inplanes, planes, downsample=down)
        self.inplanes = planes
        return torch.nn.Sequential(block)


TYPES[MinkUNet14] = "MinkUNet"

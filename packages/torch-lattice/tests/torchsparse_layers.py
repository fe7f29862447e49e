"""Layer classes with TorchSparse 2.1's names, constructor arguments and parameter shapes.

TorchSparse does not install here.  ``torch_lattice.port`` matches layers by
type and reads only their attributes and parameters, so a model built from
these classes and declared with ``types=TYPES`` is, to the port, a TorchSparse
model: ``Conv3d`` holds
``kernel`` as ``(K, C_in, C_out)`` (a stride-1 ``1x1x1`` kernel as ``(C_in,
C_out)``), ``kernel_size``/``stride``/``dilation`` triples and the
``transposed``/``generative`` flags; ``BatchNorm`` and ``ReLU`` are torch's;
the backbone blocks compose them the way ``torchsparse.backbones`` does
(``SparseResBlock``: two 3-wide convs with a 1x1x1 projection shortcut when
the width changes; ``SparseResUNet42``: a two-conv stem, four k2s2 encoder
stages and four k2s2 transposed decoder stages with skip concatenations,
widths 32-32-64-128-256 / 256-128-96-96).

They have no ``forward``: TorchSparse computes, these only describe.  The
oracle that computes what TorchSparse would is ``framework_reference``.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import torch


def _triple(v: int | tuple[int, int, int]) -> tuple[int, int, int]:
    return (v, v, v) if isinstance(v, int) else (v[0], v[1], v[2])


class Conv3d(torch.nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int, int] = 3,
        stride: int | tuple[int, int, int] = 1,
        dilation: int = 1,
        bias: bool = False,
        transposed: bool = False,
        generative: bool = False,
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _triple(kernel_size), _triple(stride)
        self.dilation = dilation
        self.transposed, self.generative = transposed, generative
        volume = math.prod(self.kernel_size)
        scale = 1.0 / math.sqrt(in_channels * volume)
        shape: tuple[int, ...] = (in_channels, out_channels)
        if volume > 1 or self.stride != (1, 1, 1):
            shape = (volume, in_channels, out_channels)
        self.kernel = torch.nn.Parameter(torch.randn(shape) * scale)
        self.bias = torch.nn.Parameter(torch.randn(out_channels) * 0.1) if bias else None


class BatchNorm(torch.nn.BatchNorm1d):
    pass


class ReLU(torch.nn.ReLU):
    pass


class SparseConvBlock(torch.nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel_size: Any, stride: Any = 1) -> None:
        super().__init__(Conv3d(c_in, c_out, kernel_size, stride), BatchNorm(c_out), ReLU(True))


class SparseConvTransposeBlock(torch.nn.Sequential):
    def __init__(self, c_in: int, c_out: int, kernel_size: Any, stride: Any = 1) -> None:
        super().__init__(
            Conv3d(c_in, c_out, kernel_size, stride, transposed=True), BatchNorm(c_out), ReLU(True)
        )


class SparseResBlock(torch.nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel_size: Any) -> None:
        super().__init__()
        self.main = torch.nn.Sequential(
            Conv3d(c_in, c_out, kernel_size),
            BatchNorm(c_out),
            ReLU(True),
            Conv3d(c_out, c_out, kernel_size),
            BatchNorm(c_out),
        )
        self.shortcut: torch.nn.Module = (
            torch.nn.Sequential(Conv3d(c_in, c_out, 1), BatchNorm(c_out))
            if c_in != c_out
            else torch.nn.Identity()
        )
        self.relu = ReLU(True)


class SparseResUNet(torch.nn.Module):
    def __init__(self, stem: int, encoder: list[int], decoder: list[int], *, in_channels: int = 4):
        super().__init__()
        c = [stem, *encoder, *decoder]
        self.stem = torch.nn.Sequential(
            Conv3d(in_channels, c[0], 3),
            BatchNorm(c[0]),
            ReLU(True),
            Conv3d(c[0], c[0], 3),
            BatchNorm(c[0]),
            ReLU(True),
        )
        self.encoders = torch.nn.ModuleList(
            torch.nn.Sequential(
                SparseConvBlock(c[k], c[k], 2, stride=2),
                SparseResBlock(c[k], c[k + 1], 3),
                SparseResBlock(c[k + 1], c[k + 1], 3),
            )
            for k in range(4)
        )
        self.decoders = torch.nn.ModuleList(
            torch.nn.ModuleDict(
                {
                    "upsample": SparseConvTransposeBlock(c[k + 4], c[k + 5], 2, stride=2),
                    "fuse": torch.nn.Sequential(
                        SparseResBlock(c[k + 5] + c[3 - k], c[k + 5], 3),
                        SparseResBlock(c[k + 5], c[k + 5], 3),
                    ),
                }
            )
            for k in range(4)
        )


class SparseResUNet42(SparseResUNet):
    def __init__(self, *, width: float = 1.0, in_channels: int = 4) -> None:
        w = [max(1, int(width * c)) for c in (32, 32, 64, 128, 256, 256, 128, 96, 96)]
        super().__init__(w[0], w[1:5], w[5:], in_channels=in_channels)


ModuleT = TypeVar("ModuleT", bound=torch.nn.Module)


def randomise(model: ModuleT, seed: int) -> ModuleT:
    """Non-trivial BatchNorm statistics, so that the port's copy of them matters."""
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm1d):
            n = m.num_features
            assert m.running_mean is not None and m.running_var is not None  # track_running_stats
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)
    return model.eval()


TYPES: dict[type, str] = {
    Conv3d: "Conv3d",
    SparseResBlock: "SparseResBlock",
    SparseResUNet: "SparseResUNet",
    SparseResUNet42: "SparseResUNet42",
}
"""What each stand-in class is, for ``from_torchsparse(..., types=TYPES)``."""

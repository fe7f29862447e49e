"""Weight-normalised sparse convolution modules on MLX (mirrors of ``torch_lattice.nn``).

Parameters and state-dict keys are the plain conv modules' (``weight``
(C_out, Kx, Ky, Kz, C_in), optional ``bias``); ``eps`` is the normaliser's
floor.  ``quantize()`` is refused: the normaliser needs the dense weight, and
the contract forbids packed weights on these ops.  The layers themselves are
declared once for both runtimes in :mod:`lattice_contract.nn_convs`.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract import nn_convs
from lattice_contract.op_rules import NORMALIZED_EPS

from mlx_lattice.nn.conv import _Conv
from mlx_lattice.ops.conv import IntOrTriple


class _Normalized(nn_convs.NormalizedLayer, _Conv):
    """An MLX conv module whose weight must stay dense."""

    def quantize(
        self, bits: int = 4, group_size: int = 32, scale_dtype: mx.Dtype | None = None
    ) -> None:
        """Refused: normalised convolutions need their dense weight."""
        raise TypeError(
            f"{type(self).__name__} cannot be quantized: its normaliser needs the dense "
            "weight (packed weights are not allowed on normalised convolutions)"
        )


class NormalizedSubmConv3d(nn_convs.NormalizedSubmConv3d, _Normalized):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        dilation: IntOrTriple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation, bias=bias)
        self._set_eps(eps)


class NormalizedConvTranspose3d(nn_convs.NormalizedConvTranspose3d, _Normalized):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, bias)
        self._set_eps(eps)


class TargetNormalizedConvTranspose3d(
    nn_convs.TargetNormalizedConvTranspose3d, NormalizedConvTranspose3d
): ...


class NormalizedGenerativeConvTranspose3d(
    nn_convs.NormalizedGenerativeConvTranspose3d, _Normalized
):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, bias=bias)
        self._set_eps(eps)

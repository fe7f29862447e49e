"""Weight-normalised sparse convolution modules on MLX (mirrors of ``torch_lattice.nn``).

Parameters and state-dict keys are the plain conv modules' (``weight``
(C_out, Kx, Ky, Kz, C_in), optional ``bias``); ``eps`` is the normaliser's
floor.  ``quantize()`` is refused: the normaliser needs the dense weight, and
the contract forbids packed weights on these ops.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.op_rules import NORMALIZED_EPS
from lattice_contract.options import positive_float

from mlx_lattice.nn.conv import _Conv
from mlx_lattice.ops.conv import IntOrTriple
from mlx_lattice.ops.normalized import (
    normalized_conv_transpose3d,
    normalized_generative_conv_transpose3d,
    normalized_subm_conv3d,
)
from mlx_lattice.sparse import SparseTensor

__all__ = [
    "NormalizedConvTranspose3d",
    "NormalizedGenerativeConvTranspose3d",
    "NormalizedSubmConv3d",
    "TargetNormalizedConvTranspose3d",
]


class _Normalized(_Conv):
    """A conv module with a support-dependent weight normaliser and its ``eps``."""

    eps: float

    def _set_eps(self, eps: float) -> None:
        self.eps = positive_float(eps, "eps", type(self).__name__)

    def quantize(
        self, bits: int = 4, group_size: int = 32, scale_dtype: mx.Dtype | None = None
    ) -> None:
        """Refused: normalised convolutions need their dense weight."""
        raise TypeError(
            f"{type(self).__name__} cannot be quantized: its normaliser needs the dense "
            "weight (packed weights are not allowed on normalised convolutions)"
        )

    def _extra_repr(self) -> str:
        return f"{super()._extra_repr()}, eps={self.eps}"


class NormalizedSubmConv3d(_Normalized):
    """Weight-normalised submanifold conv (``lattice.normalized_subm_conv3d``)."""

    _geometry_keys = ("kernel_size", "dilation")

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

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(normalized_subm_conv3d, x, eps=self.eps)


class NormalizedConvTranspose3d(_Normalized):
    """Weight-normalised transposed conv over its derived support."""

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

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(normalized_conv_transpose3d, x, eps=self.eps)


class TargetNormalizedConvTranspose3d(NormalizedConvTranspose3d):
    """Weight-normalised transposed conv at a target's rows; call ``m(x, target)``."""

    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:  # type: ignore[override]
        return self._apply(normalized_conv_transpose3d, x, eps=self.eps, coordinates=target)


class NormalizedGenerativeConvTranspose3d(_Normalized):
    """Weight-normalised support expansion ``o = c*s + k``."""

    _geometry_keys = ("kernel_size", "stride")

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

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(normalized_generative_conv_transpose3d, x, eps=self.eps)

"""Weight-normalised sparse convolution modules (the reference system's ``Normalized*`` layers).

Parameters are those of the plain conv modules (``weight`` (C_out, Kx, Ky,
Kz, C_in), optional ``bias``), so state_dict keys are artifact storage keys;
``eps`` is the normaliser's floor (default 1e-8, upstream's).  Each output
row is divided by the root of the squared weight mass its own support reaches
(see :mod:`torch_lattice.ops.normalized`); a 1x1x1 ``NormalizedSubmConv3d``
is an ordinary pointwise conv, as upstream.  These layers cannot be exported
with packed weights: the normaliser needs the dense values.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.op_rules import NORMALIZED_EPS
from lattice_contract.options import positive_float

from torch_lattice import ops
from torch_lattice.nn.conv import _ConvBase
from torch_lattice.sparse import SparseTensor

__all__ = [
    "NormalizedConvTranspose3d",
    "NormalizedGenerativeConvTranspose3d",
    "NormalizedSubmConv3d",
    "TargetNormalizedConvTranspose3d",
]

Triple = tuple[int, int, int]


class _Normalized(_ConvBase):
    """A conv module with an ``eps`` for its support-dependent weight normaliser."""

    eps: float

    def _set_eps(self, eps: float, op: str) -> None:
        self.eps = positive_float(eps, "eps", op)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, eps={self.eps}"


class NormalizedSubmConv3d(_Normalized):
    """Weight-normalised submanifold conv (``lattice.normalized_subm_conv3d``)."""

    _geometry_keys = ("kernel_size", "dilation")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        dilation: int | Triple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            dilation=dilation,
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self._set_eps(eps, "NormalizedSubmConv3d")

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.normalized_subm_conv3d, x, eps=self.eps)


class NormalizedConvTranspose3d(_Normalized):
    """Weight-normalised transposed conv over its derived support."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        stride: int | Triple = 1,
        padding: int | Triple = 0,
        dilation: int | Triple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self._set_eps(eps, type(self).__name__)

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.normalized_conv_transpose3d, x, eps=self.eps)


class TargetNormalizedConvTranspose3d(NormalizedConvTranspose3d):
    """Weight-normalised transposed conv at a target's rows: ``forward(x, target)``."""

    def forward(  # type: ignore[override]
        self, x: SparseTensor, target: SparseTensor
    ) -> SparseTensor:
        return self._apply_op(ops.normalized_conv_transpose3d, x, eps=self.eps, coordinates=target)


class NormalizedGenerativeConvTranspose3d(_Normalized):
    """Weight-normalised support expansion ``o = c*s + k``."""

    _geometry_keys = ("kernel_size", "stride")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        stride: int | Triple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self._set_eps(eps, "NormalizedGenerativeConvTranspose3d")

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.normalized_generative_conv_transpose3d, x, eps=self.eps)

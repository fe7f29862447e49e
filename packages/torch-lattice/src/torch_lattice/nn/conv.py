"""Convolution modules: parameters ``weight`` (C_out, Kx, Ky, Kz, C_in) and optional ``bias``.

The parameter names are the artifact's storage keys (``<module path>.weight``,
``<module path>.bias``), so a state_dict maps one-to-one onto
``weights.safetensors`` and onto the ``mlx_lattice.nn`` mirror.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from lattice_contract.shared_nn import conv_params, conv_repr

from torch_lattice import ops
from torch_lattice.nn._amp import run_autocast
from torch_lattice.sparse import SparseTensor

__all__ = [
    "Conv3d",
    "ConvTranspose3d",
    "FullConv3d",
    "GenerativeConvTranspose3d",
    "SubmConv3d",
    "TargetConv3d",
    "TargetConvTranspose3d",
]

Triple = tuple[int, int, int]


class _ConvBase(torch.nn.Module):
    """Shared parameters, initialisation (torch's kaiming-uniform default) and call.

    ``kernel_size, stride, padding, dilation`` are positional in that order, as
    in ``torch.nn.Conv3d`` (``Conv3d(4, 8, 2, 2)`` is a 2x2x2 stride-2 conv), so
    code written for torch, spconv or TorchSparse reads the same here.
    ``SubmConv3d`` keeps ``dilation`` keyword-only: it has no stride or
    padding, and a fourth positional argument there would mean stride to a
    torch reader.
    """

    _geometry_keys: ClassVar[tuple[str, ...]] = ("kernel_size", "stride", "padding", "dilation")
    """The geometry attributes the functional op takes (and the repr shows)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        stride: int | Triple = 1,
        padding: int | Triple = 0,
        dilation: int | Triple = 1,
        *,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        params = conv_params(in_channels, out_channels, kernel_size, stride, padding, dilation)
        self.in_channels, self.out_channels = params.in_channels, params.out_channels
        self.kernel_size, self.stride, self.padding, self.dilation = params[2:6]
        self._init_bound = params.init_bound
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(
            torch.empty(out_channels, *self.kernel_size, in_channels, **factory)
        )
        self.bias: torch.nn.Parameter | None
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_channels, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ``±1/sqrt(fan_in)`` with fan_in = C_in * kernel volume (torch's default)."""
        bound = self._init_bound
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        geometry = {name: getattr(self, name) for name in self._geometry_keys}
        return conv_repr(self.in_channels, self.out_channels, geometry, self.bias is not None)

    def _apply_op(
        self, op: Callable[..., SparseTensor], x: SparseTensor, **extra: Any
    ) -> SparseTensor:
        """Call the functional ``op`` with this module's weight, bias and geometry.

        Under ``torch.autocast`` the call runs in the autocast dtype, as
        ``torch.nn.Conv3d`` does (see :mod:`torch_lattice.nn._amp`); a target
        value only lends its rows, so its features are left alone.
        """
        geometry = {name: getattr(self, name) for name in self._geometry_keys}
        return run_autocast(
            x, self.weight, self.bias, lambda v, w, b: op(v, w, b, **geometry, **extra)
        )


class Conv3d(_ConvBase):
    """Sparse conv on the coarsened support (``lattice.conv3d``; upstream's and ME's conv).

    Output rows are every ``floor(c / s)`` of an input row (at stride 1 the
    input rows); odd kernels are centred on the output.  For spconv's
    SparseConv3d, whose support grows, use :class:`FullConv3d`.
    """

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.conv3d, x)


class FullConv3d(_ConvBase):
    """spconv's regular sparse conv (``lattice.full_conv3d``): every o an input reaches.

    Input c reaches o through tap k when ``c = o*s - p + k*d``; the support
    grows even at stride 1.
    """

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.full_conv3d, x)


class TargetConv3d(_ConvBase):
    """Sparse conv at a target's rows (``lattice.target_conv3d``): ``forward(x, target)``."""

    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.conv3d, x, coordinates=target)


class SubmConv3d(_ConvBase):
    """Submanifold conv (``lattice.subm_conv3d``): output rows are the input rows."""

    _geometry_keys = ("kernel_size", "dilation")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        dilation: int | Triple = 1,
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

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.subm_conv3d, x)


class ConvTranspose3d(_ConvBase):
    """Transposed sparse conv over its derived support (``lattice.conv_transpose3d``)."""

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.conv_transpose3d, x)


class TargetConvTranspose3d(_ConvBase):
    """Transposed conv at a target's rows (``lattice.target_conv_transpose3d``).

    Call as ``forward(x, target)``.

    With the target being the input of the paired strided conv this is
    spconv's SparseInverseConv3d, the usual U-Net decoder step.
    """

    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.conv_transpose3d, x, coordinates=target)


class GenerativeConvTranspose3d(_ConvBase):
    """Support expansion ``o = c*s + k`` (``lattice.generative_conv_transpose3d``)."""

    _geometry_keys = ("kernel_size", "stride")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        stride: int | Triple = 1,
        *,
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

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self._apply_op(ops.generative_conv_transpose3d, x)

"""Sparse convolution and pooling modules over :mod:`mlx_lattice.ops`.

Each conv module owns ``weight`` ``(C_out, Kx, Ky, Kz, C_in)`` (layout
``conv3d_o_xyz_i``, the same for transposed convs) and an optional ``bias``
``(C_out,)``.  ``quantize()`` (from
:class:`~mlx_lattice.nn.module.WeightedModule`) swaps the dense weight for MLX's
packed affine form, stored as ``weight`` (uint32), ``scales`` and ``biases`` -- the
three safetensors entries of a packed artifact weight -- and the forward pass
then runs the quantized matmul tap by tap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import mlx.core as mx
from lattice_contract.options import as_enum, resolve_batch_size, window
from lattice_contract.schema import PoolMode
from lattice_contract.shared_nn import conv_params, conv_repr

from mlx_lattice.nn.module import LatticeModule, WeightedModule
from mlx_lattice.ops.conv import (
    IntOrTriple,
    conv3d,
    conv_transpose3d,
    full_conv3d,
    generative_conv_transpose3d,
    subm_conv3d,
)
from mlx_lattice.ops.pool import full_pool3d, global_pool, pool3d
from mlx_lattice.sparse import SparseTensor

__all__ = [
    "AvgPool3d",
    "Conv3d",
    "ConvTranspose3d",
    "FullAvgPool3d",
    "FullConv3d",
    "FullMaxPool3d",
    "FullSumPool3d",
    "GenerativeConvTranspose3d",
    "GlobalPool",
    "MaxPool3d",
    "SubmConv3d",
    "SumPool3d",
    "TargetConv3d",
    "TargetConvTranspose3d",
]


class _Conv(WeightedModule):
    """Shared parameters of every sparse conv: weight, optional bias, geometry."""

    _geometry_keys: ClassVar[tuple[str, ...]] = ("kernel_size", "stride", "padding", "dilation")
    """The geometry attributes the functional op takes (and the repr shows)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
        bias: bool = True,
    ) -> None:
        super().__init__()
        params = conv_params(in_channels, out_channels, kernel_size, stride, padding, dilation)
        c_in, c_out, bound = params.in_channels, params.out_channels, params.init_bound
        self.in_channels, self.out_channels = c_in, c_out
        self.kernel_size, self.stride, self.padding, self.dilation = params[2:6]
        # torch's default conv init: uniform in +-1/sqrt(fan_in).
        self.weight = mx.random.uniform(-bound, bound, (c_out, *self.kernel_size, c_in))
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (c_out,))

    def _extra_repr(self) -> str:
        geometry = {name: getattr(self, name) for name in self._geometry_keys}
        text = conv_repr(self.in_channels, self.out_channels, geometry, "bias" in self)
        if self.quantized:
            text += f", bits={self.bits}, group_size={self.group_size}"
        return text

    def _apply(
        self, op: Callable[..., SparseTensor], x: SparseTensor, **extra: Any
    ) -> SparseTensor:
        """Call the functional ``op`` with this module's weight, bias and geometry."""
        geometry = {name: getattr(self, name) for name in self._geometry_keys}
        return op(x, self.weight_operand(), self.bias_operand(), **geometry, **extra)


class Conv3d(_Conv):
    """Sparse conv on the coarsened support, centred taps (``lattice.conv3d``); stride ``t * s``.

    For spconv's SparseConv3d, whose support grows, use :class:`FullConv3d`.
    """

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(conv3d, x)


class FullConv3d(_Conv):
    """spconv's regular sparse conv (``lattice.full_conv3d``): every o an input reaches."""

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(full_conv3d, x)


class TargetConv3d(_Conv):
    """Convolution at a target's rows (``lattice.target_conv3d``); call ``m(x, target)``."""

    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        return self._apply(conv3d, x, coordinates=target)


class SubmConv3d(_Conv):
    """Submanifold convolution (``lattice.subm_conv3d``): output rows are the input rows."""

    _geometry_keys = ("kernel_size", "dilation")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        dilation: IntOrTriple = 1,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation, bias=bias)

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(subm_conv3d, x)


class ConvTranspose3d(_Conv):
    """Transposed sparse convolution over derived support (``lattice.conv_transpose3d``)."""

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(conv_transpose3d, x)


class TargetConvTranspose3d(_Conv):
    """Transposed convolution at a target's rows (stride ``t / s``); call ``m(x, target)``.

    With the input of the paired strided conv as target, this is spconv's
    SparseInverseConv3d.
    """

    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        return self._apply(conv_transpose3d, x, coordinates=target)


class GenerativeConvTranspose3d(_Conv):
    """Support expansion: every tap of every input row (padding 0, dilation 1)."""

    _geometry_keys = ("kernel_size", "stride")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, bias=bias)

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return self._apply(generative_conv_transpose3d, x)


class _Pool(LatticeModule):
    """Local sparse pooling; ``stride`` defaults to ``kernel_size`` as in torch.nn pools."""

    mode: PoolMode
    _op: ClassVar[Callable[..., SparseTensor]] = staticmethod(pool3d)

    def __init__(
        self,
        kernel_size: IntOrTriple,
        stride: IntOrTriple | None = None,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
    ) -> None:
        super().__init__()
        geometry = window(kernel_size, stride, padding, dilation)
        self.kernel_size, self.stride, self.padding, self.dilation = geometry

    def __call__(self, x: SparseTensor) -> SparseTensor:
        return type(self)._op(
            x,
            mode=self.mode,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )

    def _extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}"
        )


class MaxPool3d(_Pool):
    """Max over the active inputs of each window."""

    mode = PoolMode.max


class AvgPool3d(_Pool):
    """Mean over the active inputs of each window (divided by their count)."""

    mode = PoolMode.avg


class SumPool3d(_Pool):
    """Sum over the active inputs of each window."""

    mode = PoolMode.sum


class FullMaxPool3d(MaxPool3d):
    """spconv's max pool (``lattice.full_pool3d``): the indexed relation, growing support."""

    _op = staticmethod(full_pool3d)


class FullAvgPool3d(AvgPool3d):
    """spconv-style mean pool (``lattice.full_pool3d``)."""

    _op = staticmethod(full_pool3d)


class FullSumPool3d(SumPool3d):
    """spconv-style sum pool (``lattice.full_pool3d``)."""

    _op = staticmethod(full_pool3d)


class GlobalPool(LatticeModule):
    """Per-batch-item reduction to a dense ``(B, C)`` array.

    ``batch_size=-1`` (the default; None means the same) infers B as the
    largest batch index + 1 per call; a positive value fixes B, 0 gives an
    empty result.  A call may override it with its own ``batch_size``.
    """

    def __init__(self, mode: PoolMode | str = PoolMode.avg, batch_size: int | None = -1):
        super().__init__()
        self.mode = as_enum(mode, PoolMode, "mode")
        self.batch_size = -1 if batch_size is None else batch_size
        resolve_batch_size(self.batch_size, None, "GlobalPool")

    def __call__(self, x: SparseTensor, batch_size: int | None = None) -> mx.array:
        size = batch_size if batch_size is not None else self.batch_size
        return global_pool(x, mode=self.mode, batch_size=size)

    def _extra_repr(self) -> str:
        return f"mode={self.mode.value}, batch_size={self.batch_size}"

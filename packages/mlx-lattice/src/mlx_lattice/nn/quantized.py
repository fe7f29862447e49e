"""mlx-lattice 0.6's quantized modules: a conv or linear layer born with a packed weight.

Lattice packs a layer in place (``layer.quantize(bits, group_size)``);
mlx-lattice 0.6 had classes for the packed layers.  These are those classes:
the same modules, same parameters and storage keys (``weight`` words,
``scales``, ``biases``), already packed, so their ``__call__`` runs the
quantized matmul through :func:`mlx_lattice.ops.conv3d` / :func:`~mlx_lattice.ops.linear`
exactly as a quantized :class:`~mlx_lattice.nn.Conv3d` / :class:`~mlx_lattice.nn.Linear`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from mlx_lattice import ops
from mlx_lattice.nn.conv import Conv3d
from mlx_lattice.nn.feature import Linear
from mlx_lattice.nn.module import Features, map_features
from mlx_lattice.sparse import SparseTensor

__all__ = ["QuantizedConv3d", "QuantizedLinear"]

IntOrTriple = int | Sequence[int]


class QuantizedConv3d(Conv3d):
    """A :class:`~mlx_lattice.nn.Conv3d` whose weight is packed affine int4/int8.

    ``from_conv`` packs a trained dense conv's weight (its bias stays
    dense); the constructor packs a freshly initialised one.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
        *,
        bias: bool = True,
        bits: int = 4,
        group_size: int = 32,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, bias=bias
        )
        self.quantize(bits=bits, group_size=group_size)

    @classmethod
    def from_conv(cls, conv: Conv3d, bits: int = 4, group_size: int = 32) -> Self:
        """Pack ``conv``'s weight (which is left unchanged) into a new quantized module."""
        if not isinstance(conv, Conv3d) or conv.quantized:
            raise TypeError(
                f"QuantizedConv3d.from_conv takes a dense mlx_lattice.nn.Conv3d, got "
                f"{'a quantized one' if isinstance(conv, Conv3d) else type(conv).__name__}"
            )
        out = cls.__new__(cls)
        Conv3d.__init__(
            out,
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            conv.dilation,
            bias="bias" in conv,
        )
        out.weight = conv.weight
        if "bias" in conv:
            out.bias = conv.bias
        out.quantize(bits=bits, group_size=group_size)
        return out

    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Convolve ``x`` with the packed weight (``ops.conv3d``)."""
        return ops.conv3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )


class QuantizedLinear(Linear):
    """A :class:`~mlx_lattice.nn.Linear` whose weight is packed affine int4/int8."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        bits: int = 4,
        group_size: int = 32,
    ) -> None:
        super().__init__(in_features, out_features, bias)
        self.quantize(bits=bits, group_size=group_size)

    @classmethod
    def from_linear(cls, linear: Linear, bits: int = 4, group_size: int = 32) -> Self:
        """Pack ``linear``'s weight (which is left unchanged) into a new quantized module."""
        if not isinstance(linear, Linear) or linear.quantized:
            raise TypeError("QuantizedLinear.from_linear takes a dense mlx_lattice.nn.Linear")
        out = cls.__new__(cls)
        Linear.__init__(out, linear.in_features, linear.out_features, "bias" in linear)
        out.weight = linear.weight
        if "bias" in linear:
            out.bias = linear.bias
        out.quantize(bits=bits, group_size=group_size)
        return out

    def __call__(self, x: Features) -> Features:
        """Project rows (dense or a sparse value's features) with the packed weight."""
        return map_features(x, lambda f: ops.linear(f, self.weight_operand(), self.bias_operand()))

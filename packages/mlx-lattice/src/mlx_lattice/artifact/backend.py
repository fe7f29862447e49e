"""The MLX side of :class:`lattice_contract.lowering.RuntimeBackend`.

The shared plan, weight-resolution and call-binding code asks a runtime only
a few questions about its values (shapes, element types, whether a value is a
SparseTensor); this module answers them for MLX arrays.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from mlx_lattice.ops.quant import QuantizedWeight
from mlx_lattice.sparse import SparseTensor

__all__ = ["MLX_BACKEND", "MLXBackend", "dtype_name"]

_DTYPE_NAMES: dict[Any, str] = {
    mx.float16: "f16",
    mx.bfloat16: "bf16",
    mx.float32: "f32",
    mx.float64: "f64",
    mx.int8: "i8",
    mx.int16: "i16",
    mx.int32: "i32",
    mx.int64: "i64",
    mx.uint8: "u8",
    mx.uint16: "u16",
    mx.uint32: "u32",
    mx.uint64: "u64",
    mx.bool_: "i1",
}


def dtype_name(dtype: mx.Dtype) -> str:
    """MLIR-style element name (``f16``, ``u32``...) of an MLX dtype."""
    return _DTYPE_NAMES.get(dtype, str(dtype))


class MLXBackend:
    """Answers the contract's questions about MLX values."""

    name = "mlx"
    sparse_type_name = "mlx_lattice.SparseTensor"
    array_type_name = "mlx.core.array"

    def shape(self, array: Any) -> tuple[int, ...]:
        """Shape of an ``mx.array``."""
        return tuple(int(d) for d in array.shape)

    def dtype_name(self, array: Any) -> str:
        """Element type of an ``mx.array`` as an MLIR-style name."""
        return dtype_name(array.dtype)

    def make_packed(
        self, weight: Any, scales: Any, biases: Any, bits: int, group_size: int
    ) -> QuantizedWeight:
        """The packed triplet as a :class:`~mlx_lattice.ops.quant.QuantizedWeight`."""
        return QuantizedWeight(weight, scales, biases, bits, group_size)

    def is_sparse(self, value: Any) -> bool:
        """Whether ``value`` is an ``mlx_lattice.SparseTensor``."""
        return isinstance(value, SparseTensor)

    def is_array(self, value: Any) -> bool:
        """Whether ``value`` is an ``mx.array``."""
        return isinstance(value, mx.array)

    def decompose(self, value: Any) -> tuple[Any, Any, Any]:
        """``(coords, feats, active_rows)`` of a SparseTensor."""
        return value.coords, value.feats, value.active_rows

    def stride(self, value: Any) -> tuple[int, int, int]:
        """The stride of a SparseTensor."""
        x, y, z = value.stride
        return (int(x), int(y), int(z))

    def channels(self, value: Any) -> int:
        """Channel count of a SparseTensor or a feature array."""
        if isinstance(value, SparseTensor):
            return int(value.num_channels)
        return int(value.shape[-1])


MLX_BACKEND = MLXBackend()
"""The one backend instance the MLX artifact runtime uses."""

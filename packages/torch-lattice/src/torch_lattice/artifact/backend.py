"""The torch side of :class:`lattice_contract.lowering.RuntimeBackend`.

The shared plan, weight-resolution and call-binding code of ``lattice_contract``
asks a runtime only a few questions about its values (shapes, element types,
whether a value is a SparseTensor); this module answers them for torch tensors.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_lattice.ops.quant import QuantizedWeight
from torch_lattice.sparse import SparseTensor

__all__ = ["TORCH_BACKEND", "TorchBackend", "dtype_name", "torch_dtype"]

_DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.uint16: "u16",
    torch.uint32: "u32",
    torch.uint64: "u64",
    torch.bool: "i1",
}
_TORCH_DTYPES: dict[str, torch.dtype] = {v: k for k, v in _DTYPE_NAMES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """MLIR-style element name (``f16``, ``u32``...) of a torch dtype."""
    return _DTYPE_NAMES.get(dtype, str(dtype))


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of an MLIR-style element name; KeyError names unknown ones."""
    try:
        return _TORCH_DTYPES[name]
    except KeyError:
        raise KeyError(f"no torch dtype for element type {name!r}") from None


class TorchBackend:
    """Answers the contract's questions about torch values."""

    name = "torch"
    sparse_type_name = "torch_lattice.SparseTensor"
    array_type_name = "torch.Tensor"

    def shape(self, array: Any) -> tuple[int, ...]:
        """Shape of a tensor as ints."""
        return tuple(int(d) for d in array.shape)

    def dtype_name(self, array: Any) -> str:
        """Element type of a tensor as an MLIR-style name."""
        return dtype_name(array.dtype)

    def make_packed(
        self, weight: Any, scales: Any, biases: Any, bits: int, group_size: int
    ) -> QuantizedWeight:
        """The packed triplet as a :class:`~torch_lattice.ops.quant.QuantizedWeight`."""
        return QuantizedWeight(weight, scales, biases, bits, group_size)

    def is_sparse(self, value: Any) -> bool:
        """Whether ``value`` is a ``torch_lattice.SparseTensor``."""
        return isinstance(value, SparseTensor)

    def is_array(self, value: Any) -> bool:
        """Whether ``value`` is a ``torch.Tensor``."""
        return isinstance(value, torch.Tensor)

    def decompose(self, value: Any) -> tuple[Any, Any, Any]:
        """``(coords, feats, active_rows)`` of a SparseTensor."""
        return value.coords, value.feats, value.active_rows

    def stride(self, value: Any) -> tuple[int, int, int]:
        """The stride of a SparseTensor."""
        x, y, z = value.stride
        return (int(x), int(y), int(z))

    def channels(self, value: Any) -> int:
        """Channel count of a SparseTensor or a feature tensor."""
        if isinstance(value, SparseTensor):
            return int(value.num_channels)
        return int(value.shape[-1])


TORCH_BACKEND = TorchBackend()
"""The one backend instance the torch artifact runtime uses."""

"""Argument checking shared by the functional ops (private)."""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import as_enum
from lattice_contract.dialect import int_triple as triple
from lattice_contract.frontend import op_errors

from torch_lattice.sparse import FLOAT_DTYPES, SparseTensor

__all__ = [
    "as_enum",
    "channel_vector",
    "compute_dtype",
    "require_features",
    "require_sparse",
    "triple",
]


def require_sparse(value: Any, op: str, name: str = "input") -> SparseTensor:
    """The argument as a SparseTensor, or a TypeError naming the op."""
    if not isinstance(value, SparseTensor):
        raise TypeError(
            f"{op}: {name} must be a torch_lattice.SparseTensor, got {type(value).__name__}"
        )
    return value


def require_features(value: Any, op: str, name: str = "x") -> torch.Tensor:
    """A rank-2 float tensor of features, or a clear error."""
    if isinstance(value, SparseTensor):
        raise op_errors.dense_op_on_sparse(op)
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if value.ndim != 2:
        raise ValueError(f"{op}: {name} must have shape (N, C), got {tuple(value.shape)}")
    if value.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: {name} must be float16, bfloat16 or float32, got {value.dtype}")
    return value


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation type: f32 for f16/bf16/f32 storage (canonical_f32), f64 stays f64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def channel_vector(value: Any, channels: int, op: str, name: str) -> torch.Tensor:
    """A (C,) float vector matching the feature channels."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if tuple(value.shape) != (channels,):
        raise op_errors.channel_vector_shape(op, name, value.shape, channels)
    if not value.is_floating_point():
        raise TypeError(f"{op}: {name} must be floating point, got {value.dtype}")
    return value

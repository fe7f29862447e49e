"""The MLX adapter of the shared artifact runtime (:mod:`lattice_contract.runtime.ops`).

Everything an artifact needs that is not MLX-specific -- the lowerings, bundle
rules, verification, call binding -- lives in the contract.  This module
holds only what MLX does its own way: its dtypes, how ``mx.load`` and
``mx.save_safetensors`` read and write weights (MLX dimensions are 32-bit),
and the two array calls of the ``argmax`` and ``gather_rows`` primitives.
``mlx_lattice.ops`` itself is the :class:`~lattice_contract.runtime.ops.RuntimeOps`
the standard lowerings call (checked by mypy at the adapter's ``ops`` assignment).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import mlx.core as mx
import numpy as np
from lattice_contract.runtime import RuntimeAdapter

from mlx_lattice import ops as mlx_ops

__all__ = ["MLX_BACKEND", "MLXBackend", "dtype_name"]


class MLXBackend(RuntimeAdapter):
    """MLX arrays, ``mlx_lattice.SparseTensor`` and MLX's safetensors reader."""

    name = "mlx"
    array_type = mx.array
    ops = mlx_ops  # mypy checks the module against RuntimeOps here
    dtype_spellings: ClassVar[Mapping[str, str]] = {"i1": "bool_"}

    def argmax_rows(self, x: mx.array) -> mx.array:
        """``mx.argmax`` over channels, as int32."""
        return mx.argmax(x, axis=1).astype(mx.int32)

    def index_span(self, index: mx.array) -> tuple[int, int] | None:
        """Smallest and largest index (one host read each), None for an empty index."""
        if not index.size:
            return None
        low, high = np.asarray(mx.stack([mx.min(index), mx.max(index)])).tolist()
        return int(low), int(high)

    def take_rows(self, x: mx.array, index: mx.array) -> mx.array:
        """``mx.take`` along rows."""
        return mx.take(x, index, axis=0)

    def write_weights(
        self, path: Path, entries: Mapping[str, mx.array], metadata: Mapping[str, str] | None
    ) -> None:
        """``mx.save_safetensors`` (with ``__metadata__`` only when there is some).

        A full disk or a file-size limit surfaces from MLX as a bare
        ``RuntimeError`` ("Unable to write ... bytes"); as an ``OSError`` naming
        the file it is reported like every other failed write, as on torch
        (the atomic writer has left nothing behind by then).
        """
        try:
            if metadata:
                mx.save_safetensors(str(path), dict(entries), metadata=dict(metadata))
            else:
                mx.save_safetensors(str(path), dict(entries))
        except RuntimeError as exc:
            raise OSError(f"cannot write {path.name}: {exc}") from None

    def read_weights(self, path: str | os.PathLike[str]) -> Mapping[str, mx.array]:
        """``mx.load``, which maps the payload lazily."""
        loaded = mx.load(str(path))
        if not isinstance(loaded, dict):  # pragma: no cover - mx.load of .safetensors is a dict
            raise ValueError("it did not load as a safetensors mapping")
        return loaded

    read_errors = (RuntimeError, ValueError)

    def loaded_shape_problem(self, name: str, stored: tuple[int, ...], got: Any) -> str | None:
        """A shape MLX read differently is a dimension past its 32-bit range."""
        shape = tuple(got.shape)
        if shape != stored:
            return (
                f"has shape {list(stored)} but MLX read it as {shape}; MLX dimensions are "
                "32-bit, so this weight cannot be loaded here"
            )
        return None

    def non_finite_counts(self, arrays: Sequence[mx.array]) -> list[int]:
        """NaN and infinity counts of every array, evaluated in one pass."""
        counts: list[int] = np.asarray(mx.stack([mx.sum(~mx.isfinite(a)) for a in arrays])).tolist()
        return counts


MLX_BACKEND = MLXBackend()
"""The one adapter instance the MLX artifact runtime uses."""


def dtype_name(dtype: mx.Dtype) -> str:
    """MLIR-style element name (``f16``, ``u32``...) of an MLX dtype."""
    return MLX_BACKEND.element_name(dtype)

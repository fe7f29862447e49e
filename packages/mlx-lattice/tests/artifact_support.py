"""Helpers shared by the ``test_artifact*`` tests: inputs, bundles and comparisons."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from lattice_conformance import op_cases
from lattice_contract.builder import MLIRModuleBuilder
from mlx_lattice import SparseTensor
from mlx_lattice.artifact import LatticeProgram, load_lattice_program, save_lattice_artifact

MX = {"f16": mx.float16, "bf16": mx.bfloat16, "f32": mx.float32}
NP = {"f16": np.float16, "f32": np.float32}

_counter = itertools.count()


def random_sparse(
    rng: np.random.Generator,
    rows: int = 40,
    channels: int = 4,
    dtype: str = "f32",
    *,
    stride: int = 1,
    batches: int = 2,
    extent: int = 6,
) -> SparseTensor:
    """:func:`lattice_conformance.op_cases.random_sparse` as an MLX SparseTensor."""
    value = op_cases.random_sparse(
        rng, rows, channels, dtype, stride=stride, batches=batches, extent=extent
    )
    feats = mx.array(value.feats).astype(MX[dtype])
    return SparseTensor(mx.array(value.coords), feats, stride=stride)


def weight(rng: np.random.Generator, *shape: int, dtype: str = "f32") -> mx.array:
    """A random weight of ``shape`` in ``dtype`` (scaled to keep sums moderate)."""
    return mx.array(rng.standard_normal(shape).astype(np.float32) * 0.3).astype(MX[dtype])


def save_and_load(
    tmp_path: Path, builder: MLIRModuleBuilder, weights: dict[str, Any] | None = None
) -> LatticeProgram:
    """Build the module, save it as a bundle on disk and load it as a program."""
    path = tmp_path / f"model{next(_counter)}.lattice"
    save_lattice_artifact(path, builder.build(), weights or {})
    return load_lattice_program(path)


def np_of(array: mx.array) -> np.ndarray:
    """A numpy copy (f32 for floats, so bf16 compares too)."""
    if array.dtype in (mx.float16, mx.bfloat16):
        array = array.astype(mx.float32)
    return np.array(array)


def assert_same(got: Any, want: Any) -> None:
    """Exact equality of sparse values (coords, feats, stride, dtype) or arrays."""
    if isinstance(want, SparseTensor):
        assert isinstance(got, SparseTensor), type(got)
        assert got.stride == want.stride
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np_of(got.coords), np_of(want.coords))
        np.testing.assert_array_equal(np_of(got.feats), np_of(want.feats))
        return
    assert isinstance(got, mx.array), type(got)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(np_of(got), np_of(want))

"""mlx-lattice 0.6's names and keywords on Lattice: each one means what the Lattice op means.

Every 0.6 spelling is checked against the Lattice op it stands for (same
numbers, not just "it runs"), and every place where 0.6's lattice-unit
coordinates would compute something else is checked to fail loudly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx_lattice
import numpy as np
import pytest
import torch
import torch_lattice.ops as tops
from artifact_support import np_of, random_sparse
from lattice_contract.dialect import Rounding
from mlx_lattice import SparseTensor, core, nn, ops
from mlx_lattice.ops import QuantizedWeight

RNG_SEED = 27


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def _coords(rows: list[list[int]]) -> mx.array:
    return mx.array(rows, dtype=mx.int32)


# -- SparseTensor ------------------------------------------------------------------


def test_batch_counts_keyword_is_checked_against_the_batch_column() -> None:
    coords = _coords([[0, 0, 0, 0], [1, 1, 0, 0], [1, 2, 0, 0], [0, 3, 3, 3]])
    feats = mx.ones((4, 2))
    x = SparseTensor(coords, feats, batch_counts=(2, 2))
    assert x.batch_counts().tolist() == [2, 2]
    with pytest.raises(ValueError, match=r"does not match the batch column.*\[2, 2\]"):
        SparseTensor(coords, feats, batch_counts=(3, 1))
    with pytest.raises(ValueError, match="names 1 batch items but the coordinates use batch"):
        SparseTensor(coords, feats, batch_counts=(4,))
    # a trailing empty batch item is a legitimate statement
    assert SparseTensor(coords, feats, batch_counts=[2, 2, 0]).num_rows == 4
    empty = SparseTensor(mx.zeros((0, 4), mx.int32), mx.zeros((0, 2)), batch_counts=())
    assert empty.num_rows == 0


def test_channels_and_replace_are_num_channels_and_with_feats(rng: np.random.Generator) -> None:
    x = random_sparse(rng, rows=30, channels=5)
    assert x.channels == x.num_channels == 5
    new = mx.zeros((x.num_rows, 3))
    y = x.replace(feats=new)
    assert y.channels == 3 and y.cache is x.cache
    assert np.array_equal(np.asarray(y.coords), np.asarray(x.coords))
    assert x.replace(features=new).channels == 3
    with pytest.raises(ValueError):
        x.replace(feats=mx.zeros((x.num_rows + 1, 3)))


# -- per-purpose ops ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "attrs"),
    [
        ("relu", "relu", {}),
        ("gelu", "gelu", {}),
        ("silu", "silu", {}),
        ("sigmoid", "sigmoid", {}),
        ("tanh", "tanh", {}),
        ("hardswish", "hardswish", {}),
        ("leaky_relu", "leaky_relu", {"alpha": 0.01}),
        ("elu", "elu", {"alpha": 1.0}),
        ("softplus", "softplus", {}),
    ],
)
def test_activation_names_are_activation(
    rng: np.random.Generator, name: str, kind: str, attrs: dict[str, Any]
) -> None:
    x = random_sparse(rng, rows=50, channels=6)
    want = np_of(ops.activation(x.feats, kind=kind, **attrs))
    dense = getattr(ops, name)(x.feats)
    assert np.array_equal(np_of(dense), want)
    sparse = getattr(ops, name)(x)  # a sparse value: its features mapped, support kept
    assert isinstance(sparse, SparseTensor) and sparse.cache is x.cache
    assert np.array_equal(np_of(sparse.feats), want)


@pytest.mark.parametrize("mode", ["max", "avg", "sum"])
def test_pool_names_are_pool3d(rng: np.random.Generator, mode: str) -> None:
    x = random_sparse(rng, rows=80, channels=4, batches=3, extent=9)
    got = getattr(ops, f"{mode}_pool3d")(x, kernel_size=2, stride=2)
    want = ops.pool3d(x, kernel_size=2, stride=2, mode=mode)
    assert np.array_equal(np.asarray(got.coords), np.asarray(want.coords))
    assert np.array_equal(np_of(got.feats), np_of(want.feats))
    glob = getattr(ops, f"global_{mode}_pool")(x)
    assert glob.shape == (3, 4)
    assert np.array_equal(np_of(glob), np_of(ops.global_pool(x, mode=mode)))


def test_algebra_names_are_sparse_binary_and_cat(rng: np.random.Generator) -> None:
    a = random_sparse(rng, rows=40, channels=3)
    b = random_sparse(rng, rows=40, channels=3)
    for name, op in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("maximum", "maximum")]:
        got = getattr(ops, f"sparse_{name}")(a, b, join="outer")
        want = ops.sparse_binary(a, b, op=op, join="outer")
        assert np.array_equal(np_of(got.feats), np_of(want.feats))
    cat = ops.sparse_cat_aligned(a, b, join="inner")
    assert np.array_equal(np_of(cat.feats), np_of(ops.sparse_cat(a, b, join="inner").feats))


def test_torch_has_the_same_names() -> None:
    assert set(ops.EXTRA_NAMES) <= set(vars(tops)["__all__"])
    x = torch.linspace(-2, 2, 12).reshape(4, 3)
    assert torch.equal(tops.relu(x), tops.activation(x, kind="relu"))
    points = torch.rand(50, 3)
    got = tops.voxelize(points, torch.ones(50, 2), voxel_size=0.25)
    zeros = torch.zeros(50, dtype=torch.int32)
    want = tops.voxelize(points, torch.ones(50, 2), zeros, voxel_size=0.25)
    assert torch.equal(got.coords, want.coords) and torch.equal(got.feats, want.feats)


# -- points: an inferred single batch ----------------------------------------------


def test_voxelize_without_batch_indices_is_batch_zero(rng: np.random.Generator) -> None:
    points = mx.array(rng.uniform(-1, 1, (200, 3)).astype(np.float32))
    feats = mx.array(rng.standard_normal((200, 4)).astype(np.float32))
    zeros = mx.zeros((200,), mx.int32)
    got = ops.voxelize(points, feats, voxel_size=0.25)
    want = ops.voxelize(points, feats, zeros, voxel_size=0.25)
    assert np.array_equal(np.asarray(got.coords), np.asarray(want.coords))
    assert np.array_equal(np_of(got.feats), np_of(want.feats))
    back = ops.devoxelize(points, got, voxel_size=0.25)
    assert np.array_equal(np_of(back), np_of(ops.devoxelize(points, got, zeros, voxel_size=0.25)))


def test_devoxelize_without_batch_indices_refuses_several_batch_items(
    rng: np.random.Generator,
) -> None:
    voxels = random_sparse(rng, rows=20, channels=2, batches=2)
    points = mx.zeros((5, 3), mx.float32)
    with pytest.raises(ValueError, match="voxels hold 2 batch items; pass batch_indices"):
        ops.devoxelize(points, voxels, voxel_size=1.0)
    with pytest.raises(ValueError, match=r"points must have shape \(P, 3\)"):
        ops.voxelize(mx.zeros((5, 4), mx.float32), mx.zeros((5, 2)), voxel_size=1.0)


# -- conv targets as bare coordinates ----------------------------------------------


def test_bare_target_coordinates_at_stride_one(rng: np.random.Generator) -> None:
    x = random_sparse(rng, rows=60, channels=4)
    w = mx.array(rng.standard_normal((5, 3, 3, 3, 4)).astype(np.float32))
    target = SparseTensor(x.coords[:17], mx.zeros((17, 1)))
    # upstream's spelling, a bare coordinate array (MLX accepts it at stride 1 only)
    got = ops.conv3d(x, w, kernel_size=3, coordinates=x.coords[:17])  # type: ignore[arg-type]
    want = ops.conv3d(x, w, kernel_size=3, coordinates=target)
    assert np.array_equal(np_of(got.feats), np_of(want.feats))


def test_bare_target_coordinates_at_stride_two_say_why_they_are_refused(
    rng: np.random.Generator,
) -> None:
    x = random_sparse(rng, rows=60, channels=4)
    w = mx.zeros((5, 2, 2, 2, 4))
    lattice_units = _coords([[0, 1, 1, 1], [1, 2, 0, 1]])
    with pytest.raises(ValueError, match=r"Lattice coordinates are physical.*lattice units"):
        ops.conv3d(x, w, kernel_size=2, stride=2, coordinates=lattice_units)  # type: ignore[arg-type]


# -- quantized modules and top-level names -----------------------------------------


def test_quantized_conv_from_conv_is_the_conv_quantized(rng: np.random.Generator) -> None:
    x = random_sparse(rng, rows=60, channels=32)
    dense = nn.Conv3d(32, 16, kernel_size=3)
    q = nn.QuantizedConv3d.from_conv(dense, bits=4, group_size=32)
    assert not dense.quantized and q.quantized and (q.bits, q.group_size) == (4, 32)
    dense.quantize(bits=4, group_size=32)
    assert np.array_equal(np_of(q(x).feats), np_of(dense(x).feats))
    with pytest.raises(TypeError, match=r"dense mlx_lattice\.nn\.Conv3d"):
        nn.QuantizedConv3d.from_conv(dense)


def test_quantized_linear(rng: np.random.Generator) -> None:
    x = random_sparse(rng, rows=30, channels=64)
    layer = nn.QuantizedLinear(64, 32, bits=8, group_size=32)
    assert layer.quantized and layer.bits == 8
    y = layer(x)
    assert isinstance(y, SparseTensor) and y.channels == 32
    dense = nn.Linear(64, 32)
    q = nn.QuantizedLinear.from_linear(dense, bits=4)
    dense.quantize(bits=4)
    got, want = q(x.feats), dense(x.feats)
    assert isinstance(got, mx.array) and isinstance(want, mx.array)
    assert np.array_equal(np_of(got), np_of(want))


def test_top_level_names() -> None:
    assert mlx_lattice.quantize_weight is ops.quantize_weight
    packed = mlx_lattice.quantize_weight(mx.zeros((32, 3, 3, 3, 32)), bits=4, group_size=32)
    assert isinstance(packed, QuantizedWeight)
    assert mlx_lattice.artifact.load_lattice_program is not None  # reachable as an attribute
    assert mlx_lattice.core.KernelSpec.of(3).volume == 27


def test_cast_takes_nearest_and_defaults_to_it() -> None:
    assert Rounding("nearest") is Rounding.nearest_even
    x = mx.array([[1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11]], dtype=mx.float32)  # two f16 ties
    want = ops.cast(x, dtype="f16", rounding="nearest_even")
    assert np.array_equal(np_of(ops.cast(x, dtype="f16", rounding="nearest")), np_of(want))
    assert np.array_equal(np_of(ops.cast(x, dtype="f16")), np_of(want))


# -- mlx_lattice.core ----------------------------------------------------------------


def test_core_coordinate_utilities() -> None:
    a = _coords([[0, 0, 0, 0], [0, 1, 0, 0], [1, 2, 2, 2]])
    b = _coords([[0, 1, 0, 0], [0, 5, 5, 5], [2, 0, 0, 0]])
    assert core.coordinate_lookup(a, b).tolist() == [1, -1, -1]
    assert core.coordinate_union(a, b).tolist() == [
        [0, 0, 0, 0],
        [0, 1, 0, 0],
        [1, 2, 2, 2],
        [0, 5, 5, 5],
        [2, 0, 0, 0],
    ]
    assert core.coordinate_intersection(a, b).tolist() == [[0, 1, 0, 0]]
    assert core.coordinate_lookup(a, mx.zeros((0, 4), mx.int32)).tolist() == []
    points = mx.array([[0.05, 0.05, 0.05], [0.31, 0.0, 0.0], [0.01, 0.02, 0.03]])
    coords, inverse = core.sparse_quantize(points, 0.1)
    assert coords.tolist() == [[0, 0, 0, 0], [0, 3, 0, 0]]
    assert inverse.tolist() == [0, 1, 0]
    spec = core.KernelSpec.of(3, stride=2)
    assert spec.stride == (2, 2, 2) and len(spec.offsets()) == 27


def test_the_docs_example_for_mlx_lattice_06_code_runs() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "upstream.md"
    text = docs.read_text(encoding="utf-8")
    section = text.split("## Python code from mlx-lattice 0.6", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "docs/upstream.md lost its runnable example"
    for block in blocks:
        exec(compile(block, str(docs), "exec"), {})

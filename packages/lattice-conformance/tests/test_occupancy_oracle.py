"""Both runtimes' occupancy utilities against one brute-force oracle, and against each other.

The oracle is written from the definitions with Python integers and loops
(loops live here only): a parent is ``floor(c / 2)`` per axis, the child at
offset ``(dx, dy, dz)`` inside it is code bit ``dx + 2 dy + 4 dz`` (x fastest,
upstream's order), and parents come in canonical order (batch, then the
Morton code of ``x + 2^31, y + 2^31, z + 2^31`` interleaved from the top bit as
x, y, z).  Each runtime's ``downsample_occupancy`` and ``expand_occupancy``
must reproduce it exactly.  The cases below the oracle's run unchanged on both
runtimes: the bit order, the candidates' tap order, empty levels, and every
bad input, whose error type and words must be the same on both.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx_lattice.occupancy as mo
import mlx_lattice.sparse as mlx_sparse
import numpy as np
import pytest
import torch
import torch_lattice.occupancy as to
import torch_lattice.sparse as torch_sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.dialect import kernel_taps
from mlx_lattice import ops as mlx_ops
from torch_lattice import ops as torch_ops

Row = tuple[int, int, int, int]
RUNTIMES = ["mlx", "torch"]


def morton_key(row: Row) -> tuple[int, int]:
    """(batch, Morton code) written bit by bit from the definition."""
    b, *xyz = row
    u = [v + (1 << 31) for v in xyz]
    key = 0
    for bit in range(31, -1, -1):
        for axis in range(3):
            key = (key << 1) | ((u[axis] >> bit) & 1)
    return (b, key)


def brute_downsample(rows: list[Row]) -> list[tuple[Row, int]]:
    codes: dict[Row, int] = {}
    for b, x, y, z in set(rows):
        parent = (b, x // 2, y // 2, z // 2)  # Python's // is floor division
        dx, dy, dz = x - 2 * parent[1], y - 2 * parent[2], z - 2 * parent[3]
        codes[parent] = codes.get(parent, 0) | (1 << (dx + 2 * dy + 4 * dz))
    return sorted(codes.items(), key=lambda item: morton_key(item[0]))


def brute_expand(parents: list[Row], codes: list[int]) -> list[Row]:
    out = []
    for (b, x, y, z), code in zip(parents, codes, strict=True):
        for dx, dy, dz in kernel_taps(2):  # Morton order within a parent
            if code >> (dx + 2 * dy + 4 * dz) & 1:
                out.append((b, 2 * x + dx, 2 * y + dy, 2 * z + dz))
    return out


def _array(runtime: str, values: list[Any], dtype: str, shape: tuple[int, ...]) -> Any:
    host = np.asarray(values, dtype=dtype).reshape(shape)
    return mx.array(host) if runtime == "mlx" else torch.from_numpy(host.copy())


def _list(value: Any) -> list[Any]:
    return np.asarray(value).tolist() if isinstance(value, mx.array) else value.tolist()


def _module(runtime: str) -> Any:
    return mo if runtime == "mlx" else to


coords_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(-20, 20), st.integers(-20, 20), st.integers(-20, 20)),
    max_size=60,
)


@pytest.mark.parametrize("runtime", RUNTIMES)
@settings(max_examples=40, deadline=None)
@given(rows=coords_strategy)
def test_downsample_matches_brute_force(runtime: str, rows: list[Row]) -> None:
    parents, codes = _module(runtime).downsample_occupancy(_array(runtime, rows, "int32", (-1, 4)))
    expected = brute_downsample(rows)
    assert [tuple(r) for r in _list(parents)] == [p for p, _ in expected]
    assert str(codes.dtype).endswith("uint8")
    assert _list(codes) == [c for _, c in expected]


@pytest.mark.parametrize("runtime", RUNTIMES)
@settings(max_examples=40, deadline=None)
@given(
    parents=st.lists(
        st.tuples(st.integers(0, 1), st.integers(-9, 9), st.integers(-9, 9), st.integers(-9, 9)),
        unique=True,
        max_size=20,
    ),
    data=st.data(),
)
def test_expand_matches_brute_force(runtime: str, parents: list[Row], data: st.DataObject) -> None:
    codes = data.draw(st.lists(st.integers(0, 255), min_size=len(parents), max_size=len(parents)))
    got = _module(runtime).expand_occupancy(
        _array(runtime, parents, "int32", (-1, 4)), _array(runtime, codes, "uint8", (-1,))
    )
    assert [tuple(r) for r in _list(got)] == brute_expand(parents, codes)


def _raised(call: Any) -> tuple[type[BaseException], str]:
    try:
        call()
    except (TypeError, ValueError) as err:
        return type(err), str(err)
    raise AssertionError("the call did not raise")


BAD_CALLS: dict[str, tuple[type[BaseException], str, Any]] = {
    # name: (error type, a word the message must hold, call(runtime module, array maker))
    "int64 rows": (
        TypeError,
        "int32",
        lambda m, a: m.downsample_occupancy(a([0] * 12, "int64", (3, 4))),
    ),
    "three columns": (
        ValueError,
        "(N, 4)",
        lambda m, a: m.downsample_occupancy(a([0] * 9, "int32", (3, 3))),
    ),
    "negative batch": (
        ValueError,
        "batch",
        lambda m, a: m.downsample_occupancy(a([-1, 0, 0, 0], "int32", (1, 4))),
    ),
    "codes per parent": (
        ValueError,
        "one code per parent",
        lambda m, a: m.expand_occupancy(a([0] * 8, "int32", (2, 4)), a([0] * 3, "uint8", (3,))),
    ),
    "float codes": (
        TypeError,
        "uint8",
        lambda m, a: m.expand_occupancy(a([0] * 8, "int32", (2, 4)), a([0] * 2, "float32", (2,))),
    ),
    "levels 31": (
        ValueError,
        "levels",
        lambda m, a: m.occupancy_hierarchy(a([0] * 4, "int32", (1, 4)), 31),
    ),
    "levels 0": (
        ValueError,
        "levels",
        lambda m, a: m.occupancy_hierarchy(a([0] * 4, "int32", (1, 4)), 0),
    ),
    "float levels": (
        TypeError,
        "levels",
        lambda m, a: m.occupancy_hierarchy(a([0] * 4, "int32", (1, 4)), 2.0),
    ),
    "outside the grid": (
        ValueError,
        "outside",
        lambda m, a: m.quantize_points(a([9.0] * 6, "float64", (2, 3)), 3, fit=False),
    ),
    "infinite point": (
        ValueError,
        "NaN",
        lambda m, a: m.quantize_points(a([np.inf, 0, 0], "float64", (1, 3)), 3),
    ),
    "empty cloud": (
        ValueError,
        "empty",
        lambda m, a: m.quantize_points(a([], "float64", (0, 3)), 3),
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_inputs_name_the_problem_alike(name: str) -> None:
    """Each bad call raises the same type with the same words on both runtimes."""
    kind, word, call = BAD_CALLS[name]
    raised = {
        runtime: _raised(lambda r=runtime: call(_module(r), lambda *v, r=r: _array(r, *v)))
        for runtime in RUNTIMES
    }
    assert raised["mlx"][0] is kind and word in raised["mlx"][1]
    # The runtimes name their own array class in type errors; everything else is identical.
    assert raised["mlx"][1].replace("mlx.core.array", "torch.Tensor") == raised["torch"][1]
    assert raised["torch"][0] is kind


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_code_bits_are_upstreams_x_fastest_order(runtime: str) -> None:
    """Bit x + 2y + 4z: a lone child at (1, 0, 0) sets bit 1, (0, 1, 0) bit 2, (0, 0, 1) bit 4."""
    m = _module(runtime)
    cases = (((0, 0, 0), 1), ((1, 0, 0), 2), ((0, 1, 0), 4), ((0, 0, 1), 16), ((1, 1, 1), 128))
    for offset, code in cases:
        row = [0, 6 + offset[0], 2 + offset[1], 4 + offset[2]]
        parents, codes = m.downsample_occupancy(_array(runtime, row, "int32", (1, 4)))
        assert _list(parents) == [[0, 3, 1, 2]] and _list(codes) == [code]
        assert m.CHILD_TAPS[code.bit_length() - 1] == offset
        assert _list(m.expand_occupancy(parents, codes)) == [row]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_child_bits_and_empty_levels(runtime: str) -> None:
    m = _module(runtime)
    bits = _list(m.child_bits(_array(runtime, [0, 1, 0x80, 0xA5], "uint8", (4,))))
    assert bits == [
        [False] * 8,
        [True] + [False] * 7,
        [False] * 7 + [True],
        [True, False, True, False, False, True, False, True],
    ]
    parents, codes = m.downsample_occupancy(_array(runtime, [], "int32", (0, 4)))
    assert tuple(parents.shape) == (0, 4) and tuple(codes.shape) == (0,)
    assert tuple(m.expand_occupancy(parents, codes).shape) == (0, 4)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_candidates_are_the_generative_transposed_conv_taps(runtime: str) -> None:
    """Candidate 8i + t is the row tap t of generative_conv_transpose3d(k=2, s=2) writes."""
    m, ops = _module(runtime), (mlx_ops if runtime == "mlx" else torch_ops)
    sparse = mlx_sparse.SparseTensor if runtime == "mlx" else torch_sparse.SparseTensor
    parents = [[0, 0, 0, 0], [0, 3, -2, 5], [1, -4, 1, 0]]
    physical = [[b, 2 * x, 2 * y, 2 * z] for b, x, y, z in parents]
    x = sparse(
        _array(runtime, physical, "int32", (3, 4)), _array(runtime, [1.0] * 3, "float32", (3, 1)), 2
    )
    weight = np.zeros((1, 2, 2, 2, 1), dtype=np.float32)
    for k, (a, b, c) in enumerate(kernel_taps(2)):
        weight[0, a, b, c, 0] = k + 1  # tap k weighs k + 1
    w = _array(runtime, weight.ravel().tolist(), "float32", weight.shape)
    out = ops.generative_conv_transpose3d(x, w, kernel_size=2, stride=2)
    value = {tuple(r): f[0] for r, f in zip(_list(out.coords), _list(out.feats), strict=True)}
    candidates = _list(m.candidate_children(_array(runtime, parents, "int32", (3, 4))))
    assert len(candidates) == 24
    for i, row in enumerate(candidates):
        assert value[tuple(row)] == i % 8 + 1
        b, *xyz = parents[i // 8]
        assert row == [b] + [2 * p + d for p, d in zip(xyz, kernel_taps(2)[i % 8], strict=True)]

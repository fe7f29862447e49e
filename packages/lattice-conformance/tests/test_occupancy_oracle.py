"""Both runtimes' occupancy downsampling and expansion against one brute-force oracle.

The oracle is written from the definitions with Python integers and loops
(loops live here only): a parent is ``floor(c / 2)`` per axis, the child at
offset ``(dx, dy, dz)`` inside it is code bit ``dx + 2 dy + 4 dz`` (x fastest,
upstream's order), and parents come in canonical order (batch, then the
Morton code of ``x + 2^31, y + 2^31, z + 2^31`` interleaved from the top bit as
x, y, z).  Each runtime's ``downsample_occupancy`` and ``expand_occupancy``
must reproduce it exactly.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx_lattice.occupancy as mo
import numpy as np
import pytest
import torch
import torch_lattice.occupancy as to
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.kernel import kernel_taps

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

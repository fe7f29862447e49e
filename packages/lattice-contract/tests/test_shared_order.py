"""The contract's canonical-order reference against the definition, bit by bit.

The oracle builds each row's 96-bit Morton code with Python integers straight
from the definition (uint32 = int32 + 2^31, bits interleaved from the most
significant down as x, y, z); the reference must sort rows exactly as that
code does, including at the int32 limits and with ties kept in input order.
"""

from __future__ import annotations

import numpy as np
import pytest
from lattice_contract.frontend import canonical_order, morton_keys


def _code(row: list[int]) -> int:
    u = [v + (1 << 31) for v in row[1:]]
    code = 0
    for bit in range(31, -1, -1):
        for axis in range(3):
            code = (code << 1) | ((u[axis] >> bit) & 1)
    return code


def _rows() -> np.ndarray:
    rng = np.random.default_rng(11)
    wide = rng.integers(-(2**31), 2**31, size=(400, 4), dtype=np.int64)
    wide[:, 0] = rng.integers(0, 3, size=400)
    edges = np.array(
        [
            [0, -(2**31), -(2**31), -(2**31)],
            [0, 2**31 - 1, 2**31 - 1, 2**31 - 1],
            [1, -1, 0, 0],
            [1, 0, -1, 0],
            [1, 0, 0, -1],
            [1, 0, 0, 0],
            [1, 0, 0, 0],
        ],
        dtype=np.int64,
    )
    near = rng.integers(-4, 4, size=(100, 4))
    near[:, 0] = np.abs(near[:, 0]) % 2
    return np.concatenate([wide, edges, near]).astype(np.int32)


def test_reference_sorts_by_batch_then_morton_code_stably() -> None:
    coords = _rows()
    rows = coords.tolist()
    want = sorted(range(len(rows)), key=lambda i: (rows[i][0], _code(rows[i]), i))
    np.testing.assert_array_equal(canonical_order(coords), np.array(want))


def test_keys_are_the_two_halves_of_the_code() -> None:
    coords = _rows()
    batch, high, low = morton_keys(coords)
    codes = [(int(h) << 48) | int(lo) for h, lo in zip(high, low, strict=True)]
    assert codes == [_code(r) for r in coords.tolist()]
    np.testing.assert_array_equal(batch, coords[:, 0])


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        canonical_order(np.zeros((2, 3), np.int32))
    with pytest.raises(TypeError, match="integers"):
        morton_keys(np.zeros((2, 4), np.float64))

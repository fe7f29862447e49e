"""SparseTensor validation (SPEC §4), trusted construction and canonical ordering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_contract.dialect import CoordinateSpanError
from lattice_contract.testing import flagged_lines
from mlx_lattice import SparseTensor, canonical_order, inverse_permutation, ops

GOOD = np.array([[0, 0, 0, 0], [0, 2, 4, 6], [1, 2, 2, 2]], dtype=np.int32)


def coords(rows: Any = GOOD, dtype: Any = mx.int32) -> mx.array:
    return mx.array(np.asarray(rows)).astype(dtype)


def feats(n: int = 3, c: int = 2, dtype: Any = mx.float32) -> mx.array:
    return mx.ones((n, c), dtype=dtype)


def test_valid_tensor_attributes() -> None:
    x = SparseTensor(coords(), feats(c=5, dtype=mx.float16), stride=2)
    assert x.num_rows == 3 and x.num_channels == 5 and x.shape == (3, 5)
    assert x.stride == (2, 2, 2) and x.dtype == mx.float16 and x.dtype_name == "f16"
    assert x.active_rows.dtype == mx.int32 and x.active_rows.tolist() == [3]
    assert x.batch_size == 2 and x.batch_counts().tolist() == [2, 1]
    assert x.batch_counts(4).tolist() == [2, 1, 0, 0]
    np.testing.assert_array_equal(np.asarray(x.logical_coords), GOOD // [1, 2, 2, 2])
    np.testing.assert_array_equal(np.asarray(x.batch(1).coords), GOOD[2:])
    assert SparseTensor(coords(), feats(), stride=(1, 2, 2)).stride == (1, 2, 2)
    assert SparseTensor(GOOD, np.ones((3, 1), np.float32)).num_rows == 3  # NumPy accepted


def test_numpy_integer_stride_is_an_int_for_the_value_and_the_ops() -> None:
    """A stride read from an array is accepted by SparseTensor and by the ops alike."""
    two: Any = np.int64(2)  # deliberate: a NumPy integer where the annotations say int
    x = SparseTensor(coords(), feats(), stride=two)
    assert x.stride == (2, 2, 2) and all(type(v) is int for v in x.stride)
    y = ops.pool3d(x, mode="max", kernel_size=two, stride=two)
    assert y.stride == (4, 4, 4)


def test_active_prefix_is_kept_and_padding_never_read() -> None:
    padded = np.concatenate([GOOD, [[-5, 1, 1, 1], [0, 0, 0, 0]]]).astype(np.int32)
    x = SparseTensor(coords(padded), feats(5), stride=2, active_rows=3)
    assert x.num_rows == 3 and x.feats.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(x.coords), GOOD)
    y = SparseTensor(coords(padded), feats(5), stride=2, active_rows=mx.array([3], mx.int32))
    assert y.num_rows == 3
    assert SparseTensor(coords(padded), feats(5), stride=2, active_rows=0).num_rows == 0


BAD_INPUTS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("coords not an array", {"coords": GOOD.tolist()}, TypeError, "mlx.core.array"),
    ("coords int64", {"coords": coords(dtype=mx.int64)}, TypeError, "coords must be int32"),
    ("coords float", {"coords": coords(dtype=mx.float32)}, TypeError, "coords must be int32"),
    ("coords rank 1", {"coords": coords(GOOD[:, 0])}, ValueError, "shape (N, 4)"),
    ("coords 3 columns", {"coords": coords(GOOD[:, 1:])}, ValueError, "shape (N, 4)"),
    ("feats rank 1", {"feats": mx.ones((3,))}, ValueError, "feats must have shape (N, C)"),
    ("feats rank 3", {"feats": mx.ones((3, 2, 1))}, ValueError, "feats must have shape (N, C)"),
    ("feats integer", {"feats": mx.ones((3, 2), dtype=mx.int32)}, TypeError, "float16, bfloat16"),
    ("feats float64", {"feats": np.ones((3, 2))}, TypeError, "float64 NumPy array"),
    ("row mismatch", {"feats": feats(4)}, ValueError, "feats has 4 rows but coords has 3"),
    ("stride zero", {"stride": 0}, ValueError, "stride must be >= 1 on every axis"),
    ("stride negative", {"stride": (1, -2, 1)}, ValueError, ">= 1 on every axis, got (1, -2, 1)"),
    ("stride two values", {"stride": (1, 2)}, ValueError, "stride must be an int or three ints"),
    ("stride bool", {"stride": True}, TypeError, "stride must be an int or three ints"),
    ("stride float", {"stride": 1.5}, TypeError, "stride must be an int or three ints"),
    ("active > N", {"active_rows": 4}, ValueError, "active_rows is 4 but only 3"),
    ("active < 0", {"active_rows": -1}, ValueError, "negative"),
    ("active int64", {"active_rows": mx.array([2], mx.int64)}, TypeError, "int32"),
    ("active shape", {"active_rows": mx.array([2, 3], mx.int32)}, ValueError, "shape (1,)"),
    ("active > N array", {"active_rows": mx.array([9], mx.int32)}, ValueError, "only 3"),
    ("batch < 0", {"coords": coords(GOOD * [-1, 1, 1, 1])}, ValueError, "batch index -1"),
    ("not divisible", {"stride": 4}, ValueError, "not divisible by the stride (4, 4, 4)"),
    (
        "duplicate rows",
        {"coords": coords(np.concatenate([GOOD, GOOD[1:2]])), "feats": feats(4)},
        ValueError,
        "repeats an earlier row",
    ),
]


@pytest.mark.parametrize(
    ("changes", "error", "words"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_each_bad_input_is_named(changes: dict[str, Any], error: type, words: str) -> None:
    args: dict[str, Any] = {"coords": coords(), "feats": feats(), "stride": 2}
    args.update(changes)
    with pytest.raises(error) as info:
        SparseTensor(**args)
    assert words in str(info.value)
    assert isinstance(info.value, (ValueError, TypeError))


def test_trusted_skips_only_divisibility_and_duplicates() -> None:
    dup = coords(np.concatenate([GOOD, GOOD[1:2]]))
    x = SparseTensor.trusted(dup, feats(4), stride=4)  # neither check runs
    assert x.num_rows == 4
    with pytest.raises(ValueError, match="batch index -1"):
        SparseTensor.trusted(coords(GOOD * [-1, 1, 1, 1]), feats(), stride=2)
    with pytest.raises(TypeError, match="int32"):
        SparseTensor.trusted(coords(dtype=mx.int64), feats())
    with pytest.raises(ValueError, match="only 3"):
        SparseTensor.trusted(coords(), feats(), active_rows=5)


def test_with_feats_shares_support_and_cache() -> None:
    x = SparseTensor(coords(), feats(), stride=2)
    y = x.with_feats(mx.zeros((3, 7), dtype=mx.bfloat16))
    assert y.cache is x.cache and y.coords is x.coords and y.num_channels == 7
    with pytest.raises(ValueError, match=r"shape \(3, C\)"):
        x.with_feats(mx.zeros((2, 7)))
    with pytest.raises(TypeError, match="float16"):
        x.with_feats(mx.zeros((3, 7), dtype=mx.int32))


def test_an_unindexable_span_is_refused_at_construction() -> None:
    big = np.array([[0, -(2**30), -(2**30), 0], [0, 2**30, 2**30, 2**30], [3, 0, 0, 0]], np.int32)
    with pytest.raises(CoordinateSpanError, match="translate the coordinates"):
        SparseTensor(coords(big), feats())
    trusted = SparseTensor.trusted(coords(big), feats())  # no look at the rows: the op refuses
    with pytest.raises(CoordinateSpanError, match=r"extents \(4, 2147483649"):
        ops.subm_conv3d(trusted, mx.ones((1, 3, 3, 3, 2)), kernel_size=3)
    wide = np.array([[0, -(2**31), 0, 0], [0, 2**31 - 2, 0, 0]], np.int32)  # 2^32 cells: fine
    x = SparseTensor(coords(wide), mx.ones((2, 2)))
    assert ops.subm_conv3d(x, mx.ones((1, 3, 3, 3, 2)), kernel_size=3).num_rows == 2


def _reference_morton_key(row: list[int]) -> tuple[int, int]:
    """(batch, 96-bit Morton) by explicit bit interleaving, one row at a time."""
    b, *xyz = row
    u = [v + 2**31 for v in xyz]
    code = 0
    for bit in range(31, -1, -1):
        for value in u:  # x, y, z: z least significant within each triple
            code = (code << 1) | ((value >> bit) & 1)
    return (b, code)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**31), 2**31 - 1),
        )
        | st.tuples(st.integers(0, 2), *(st.integers(-4, 4),) * 3),
        min_size=0,
        max_size=60,
        unique=True,
    )
)
def test_canonical_order_matches_bitwise_reference(rows: list[tuple[int, ...]]) -> None:
    arr = np.asarray(rows, dtype=np.int32).reshape(-1, 4)
    perm = np.asarray(canonical_order(mx.array(arr)))
    keys = [_reference_morton_key(r) for r in arr.tolist()]
    assert [keys[i] for i in perm.tolist()] == sorted(keys)
    inv = np.asarray(inverse_permutation(mx.array(perm.astype(np.int32))))
    np.testing.assert_array_equal(perm[inv], np.arange(len(arr)))
    np.testing.assert_array_equal(inv[perm], np.arange(len(arr)))


def test_canonical_tensor_and_small_example() -> None:
    # z is least significant: (0,0,1) < (0,1,0) < (1,0,0); negatives sort first.
    c = np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, -1, 0, 0], [1, 0, 0, 0]], np.int32)
    assert np.asarray(canonical_order(c)).tolist() == [3, 2, 1, 0, 4]
    x = SparseTensor(c, np.arange(5, dtype=np.float32)[:, None]).canonical()
    assert np.asarray(x.feats)[:, 0].tolist() == [3, 2, 1, 0, 4]
    with pytest.raises(ValueError, match="one-dimensional"):
        inverse_permutation(mx.zeros((2, 2), dtype=mx.int32))


def test_mypy_requires_the_features_in_one_of_their_spellings(tmp_path: Path) -> None:
    """The constructors' overloads: feats or features= type-checks, neither is a type error.

    (torch_lattice.SparseTensor has the same overloads; checking it would
    type-check all of torch, which takes far longer.)
    """
    flagged, report = flagged_lines(
        tmp_path,
        "import mlx.core as mx\n"
        "from mlx_lattice import SparseTensor\n"
        "c, f = mx.zeros((1, 4), dtype=mx.int32), mx.zeros((1, 2))\n"
        "a = SparseTensor(c, f, 2)\n"
        "b = SparseTensor(c, feats=f, stride=2)\n"
        "d = SparseTensor.trusted(c, features=f, active_rows=1)\n"
        "e = SparseTensor(c)\n"
        "g = SparseTensor.trusted(c, stride=2)\n",
    )
    assert flagged == {7, 8} and report.count("[call-overload]") == 2, report

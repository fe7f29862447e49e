"""CPU kernel maps through a dense box index (``torch_lattice._cpu_lookup``) against the table.

The dense index must change nothing but speed: for every input it takes, its
lookups give the sorted table's pairs (``CoordinateTable.lookup_offsets``) in
the table's order, its deduplication gives ``torch.unique``'s keys and
inverse, and every map built with it equals, field by field and pair by pair,
the map built with the index switched off (``dense_fits`` answering no, which
sends every builder down the table and sort path).  Inputs reach the edges:
no rows, one row, rows on every face of a box, several batch items, negative
coordinates, rows out of key order, coordinates at the int32 limits, a box too
sparse for a dense index, offsets beyond the table's padding (whose pairs come
in row order, not key order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from lattice_contract.dialect import CoordinateSpanError, Int32CoordinateError
from torch_lattice import _cpu_lookup
from torch_lattice import kernel_map as km
from torch_lattice.coords import CoordinateTable, Packing
from torch_lattice.sparse import Support

Triple = tuple[int, int, int]

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def _faces(batches: int = 3, shape: Triple = (40, 30, 20)) -> np.ndarray:
    """Every voxel on the faces of a box, in several batch items, the box at negative x."""
    grid = np.indices(shape).reshape(3, -1).T
    on_face = ((grid == 0) | (grid == np.array(shape) - 1)).any(axis=1)
    pts = grid[on_face] + np.array([-25, 3, -7])
    return np.concatenate(
        [np.concatenate([np.full((len(pts), 1), b), pts], axis=1) for b in range(batches)]
    )


def _shuffled(rows: np.ndarray, seed: int = 5) -> np.ndarray:
    return rows[np.random.default_rng(seed).permutation(len(rows))]


def _random(seed: int, n: int, span: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pts = rng.integers(-span, span, size=(2 * n, 4))
    pts[:, 0] = rng.integers(0, 3, size=2 * n)
    return _shuffled(np.unique(pts, axis=0)[:n], seed)


def _near_int32(upper: bool) -> np.ndarray:
    """A small cluster of voxels whose x sits at (or next to) an int32 limit, two batch items."""
    corner = I32_MAX - 3 if upper else I32_MIN
    grid = np.indices((4, 3, 2)).reshape(3, -1).T + np.array([corner, -1, 5])
    rows = [np.concatenate([np.full((len(grid), 1), b), grid], axis=1) for b in (0, 2)]
    return np.concatenate(rows)


def _sparse_box() -> np.ndarray:
    """Twenty voxels spread over a 10^6-wide box: far too many cells a row for a dense index."""
    rng = np.random.default_rng(11)
    pts = rng.integers(-500_000, 500_000, size=(20, 3))
    pts[10:] = pts[:10] + np.array([0, 0, 1])  # some neighbours, so maps are not empty
    return np.concatenate([np.zeros((20, 1), dtype=np.int64), pts], axis=1)


CASES: dict[str, Callable[[], np.ndarray]] = {
    "empty": lambda: np.zeros((0, 4), dtype=np.int64),
    "one_row": lambda: np.array([[1, -4, 9, -2]]),
    "faces": _faces,
    "faces_shuffled": lambda: _shuffled(_faces()),
    "negative_shuffled": lambda: _random(7, 600, 9),
    "int32_max": lambda: _near_int32(True),
    "int32_min_shuffled": lambda: _shuffled(_near_int32(False)),
    "sparse_box": _sparse_box,
}


def _coords(case: str) -> torch.Tensor:
    return torch.from_numpy(CASES[case]().astype(np.int64)).to(torch.int32)


def _same_map(a: km.KernelMap, b: km.KernelMap) -> None:
    assert a.in_idx.dtype == b.in_idx.dtype and a.out_idx.dtype == b.out_idx.dtype
    assert torch.equal(a.in_idx, b.in_idx)
    assert torch.equal(a.out_idx, b.out_idx)
    assert (a.starts, a.num_in, a.num_out, a.identity_tap) == (
        b.starts,
        b.num_in,
        b.num_out,
        b.identity_tap,
    )
    assert (a.outputs_sorted, a.inputs_sorted) == (b.outputs_sorted, b.inputs_sorted)


def _same(a: Any, b: Any) -> None:
    """Equal supports (rows, order, stride) and maps, or equal (support, map) pairs."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        _same(a[0], b[0])
        _same(a[1], b[1])
    elif isinstance(a, Support):
        assert isinstance(b, Support)
        assert a.stride == b.stride
        assert torch.equal(a.coords, b.coords)
    else:
        _same_map(a, b)


def _without_index(monkeypatch: pytest.MonkeyPatch, build: Callable[[], Any]) -> Any:
    """``build()`` with the dense index refused everywhere (the table and sort path)."""
    with monkeypatch.context() as m:
        m.setattr(_cpu_lookup, "dense_fits", lambda *args: False)
        return build()


OFFSETS: dict[str, list[Triple]] = {
    "subm_half": [(-1, -1, -1), (-1, -1, 0), (-1, -1, 1), (-1, 0, -1), (0, -1, 0), (0, 0, -1)],
    "dilated": [(-2, 0, 3), (0, 0, 3), (2, 0, 3), (0, -2, -3)],  # z not consecutive
    "beyond_padding": [(-20, 0, 0), (0, 1, 0), (20, 0, 1)],  # the table's masked path
}


@pytest.mark.parametrize("offsets", list(OFFSETS))
@pytest.mark.parametrize("case", list(CASES))
def test_self_lookup_matches_table(case: str, offsets: str) -> None:
    logical = _coords(case).to(torch.int64)
    table = CoordinateTable(logical)
    want = table.lookup_offsets(logical, OFFSETS[offsets], base_is_table=True)
    got = _cpu_lookup.lookup_offsets(logical, logical, OFFSETS[offsets], base_is_table=True)
    if case in ("empty", "sparse_box"):
        assert got is None  # no rows / a box no dense index should hold: the table answers
        return
    assert got is not None
    pairs, in_key_order = got
    assert in_key_order == table.rows_in_key_order()
    assert len(pairs) == len(want)
    for (q, r), (wq, wr) in zip(pairs, want, strict=True):
        assert q.dtype == r.dtype == torch.int32
        assert torch.equal(q.to(torch.int64), wq)  # same pairs, same order
        assert torch.equal(r.to(torch.int64), wr)


@pytest.mark.parametrize("case", ["faces_shuffled", "negative_shuffled", "int32_max", "one_row"])
@pytest.mark.parametrize("stride", [(2, 2, 2), (3, 1, 2)])
def test_strided_query_lookup_matches_table(case: str, stride: Triple) -> None:
    """Queries that are not the table's rows (a strided conv's ``o * s``), some outside its box."""
    logical = _coords(case).to(torch.int64)
    s = torch.tensor((1, *stride))
    target = torch.unique(torch.div(logical, s, rounding_mode="floor"), dim=0)
    base = _shuffled(target.numpy(), 2)
    base_t = torch.from_numpy(base) * s
    offsets = [(-1, 0, 1), (0, 0, 0), (1, 1, -1), (0, 2, 0)]
    want = CoordinateTable(logical).lookup_offsets(base_t, offsets)
    got = _cpu_lookup.lookup_offsets(logical, base_t, offsets)
    assert got is not None
    for (q, r), (wq, wr) in zip(got[0], want, strict=True):
        assert torch.equal(q.to(torch.int64), wq)
        assert torch.equal(r.to(torch.int64), wr)


def _builders(coords: torch.Tensor) -> dict[str, Callable[[], Any]]:
    def fresh() -> Support:
        return Support(coords, (1, 1, 1))

    target = km.coarsened_support(fresh(), (2, 2, 2))
    return {
        "subm3": lambda: km.subm_map(fresh(), (3, 3, 3), (1, 1, 1)),
        "subm3_d2": lambda: km.subm_map(fresh(), (3, 3, 3), (2, 1, 2)),
        "subm2": lambda: km.subm_map(fresh(), (2, 2, 2), (1, 1, 1)),
        "subm3_d20": lambda: km.subm_map(fresh(), (3, 1, 1), (20, 1, 1)),
        "k2s2": lambda: km.conv_map(fresh(), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)),
        "k123s233": lambda: km.conv_map(fresh(), (1, 2, 3), (2, 3, 3), (0, 0, 0), (1, 1, 1)),
        "k3s2": lambda: km.conv_map(fresh(), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)),
        "k3s1p": lambda: km.conv_map(fresh(), (3, 3, 3), (1, 1, 1), (1, 0, 2), (1, 1, 1)),
        "coarsen_s3": lambda: km.coarsened_support(fresh(), (3, 1, 2)),
        "full_k2s2": lambda: km.full_conv_map(fresh(), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)),
        "full_k3s1": lambda: km.full_conv_map(fresh(), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
        "transpose_k3s2": lambda: km.transpose_map(
            km.coarsened_support(fresh(), (2, 2, 2)), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)
        ),
        "target_transpose_k3s2": lambda: km.target_transpose_map(
            km.coarsened_support(fresh(), (2, 2, 2)),
            fresh(),
            (3, 3, 3),
            (2, 2, 2),
            (1, 1, 1),
            (1, 1, 1),
        ),
        "target_k3s2": lambda: km.target_conv_map(
            fresh(), target, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)
        ),
    }


BUILDS = list(_builders(torch.zeros(1, 4, dtype=torch.int32)))


# A target support is the input coarsened, which an input without rows does not give.
PAIRS = [(c, b) for c in CASES for b in BUILDS if (c, b) != ("empty", "target_k3s2")]


@pytest.mark.parametrize(("case", "build"), PAIRS)
def test_maps_with_and_without_dense_index_are_identical(
    monkeypatch: pytest.MonkeyPatch, case: str, build: str
) -> None:
    coords = _coords(case)
    builder = _builders(coords)[build]

    def outcome(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except (CoordinateSpanError, Int32CoordinateError) as err:
            return type(err), str(err)

    got = outcome(builder)
    want = _without_index(monkeypatch, lambda: outcome(builder))
    if isinstance(want, tuple) and isinstance(want[0], type):
        assert got == want  # the same error, the same words
    else:
        _same(got, want)


def test_tiled_map_pairs_follow_input_rows_per_tap() -> None:
    """k2s2 on shuffled rows: tap by tap, inputs in row order; outputs ranked by packed key."""
    rows = _random(3, 300, 6)
    out, kmap = km.conv_map(
        Support(torch.from_numpy(rows).to(torch.int32), (1, 1, 1)),
        (2, 2, 2),
        (2, 2, 2),
        (0, 0, 0),
        (1, 1, 1),
    )
    coarse = np.floor_divide(rows, np.array([1, 2, 2, 2]))
    uniq = sorted({tuple(int(v) for v in r) for r in coarse})
    assert [tuple(r) for r in out.logical.tolist()] == uniq
    rank = {r: i for i, r in enumerate(uniq)}
    tap = (rows[:, 1] % 2) * 4 + (rows[:, 2] % 2) * 2 + rows[:, 3] % 2
    for k in range(8):
        a, b = kmap.tap(k)
        inputs = [i for i in range(len(rows)) if tap[i] == k]
        assert a.tolist() == inputs
        assert b.tolist() == [rank[tuple(int(v) for v in coarse[i])] for i in inputs]


def test_int32_span_error_is_the_tables() -> None:
    """A box no int64 key can hold is refused with the table's error, index or not."""
    rows = torch.tensor(
        [[0, I32_MIN, I32_MIN, I32_MIN], [0, I32_MAX, I32_MAX, I32_MAX], [3, 0, 0, 0]],
        dtype=torch.int32,
    )
    with pytest.raises(CoordinateSpanError) as table_err:
        Support(rows, (1, 1, 1)).table  # noqa: B018 - building the table is the point
    with pytest.raises(CoordinateSpanError) as map_err:
        km.subm_map(Support(rows, (1, 1, 1)), (3, 3, 3), (1, 1, 1))
    assert str(map_err.value) == str(table_err.value)


@pytest.mark.parametrize("cells", [1, 7, 1000])
def test_dense_unique_matches_torch_unique(cells: int) -> None:
    g = torch.Generator().manual_seed(cells)
    for n in (0, 1, 5, 3000):
        keys = torch.randint(0, cells, (n,), generator=g)
        if n:
            keys[0], keys[-1] = 0, cells - 1  # both ends of the box
        uniq, inverse = _cpu_lookup.dense_unique(keys, cells)
        want_u, want_i = torch.unique(keys, sorted=True, return_inverse=True)
        assert torch.equal(uniq, want_u)
        assert torch.equal(inverse, want_i)
        assert uniq.dtype == inverse.dtype == torch.int64


@pytest.mark.parametrize("stride", [(1, 1, 1), (2, 4, 8), (3, 1, 5), (2, 3, 2)])
def test_floor_div_and_remainder_match_torch(stride: Triple) -> None:
    g = torch.Generator().manual_seed(0)
    logical = torch.randint(-40, 40, (500, 4), generator=g)
    logical[:3, 1:] = torch.tensor([[I32_MIN] * 3, [I32_MAX] * 3, [-1] * 3])
    s = torch.tensor((1, *stride))
    want = torch.div(logical, s, rounding_mode="floor")
    got = _cpu_lookup.floor_div(logical, stride)
    assert torch.equal(got, want)
    rem = _cpu_lookup.remainder(logical, got, stride)
    assert torch.equal(rem[:, 1:], torch.remainder(logical[:, 1:], s[1:]))
    assert not rem[:, 0].any()  # the batch column is no offset


def test_dense_fits_bounds() -> None:
    """Small boxes always fit; bigger ones need rows to pay for them, fresh memory more."""
    fits = _cpu_lookup.dense_fits
    assert fits(1 << 16, 1)
    assert not fits((1 << 16) + 1, 1)
    assert fits(64 * 100_000, 100_000)  # a reused 26 MiB block
    assert not fits(64 * 100_000 + 1, 100_000)
    assert fits(8 * 100_000, 100_000, _cpu_lookup.UNIQUE_CELLS_PER_KEY)
    assert not fits(8 * 100_000 + 1, 100_000, _cpu_lookup.UNIQUE_CELLS_PER_KEY)
    assert not fits(9_000_000, 200_000)  # past 32 MiB: a third of the cells a row
    assert fits(9_000_000, 1_000_000)
    assert not fits((1 << 27) + 1, 1 << 30)
    assert not fits(0, 10)


@pytest.mark.parametrize(
    ("lo", "hi", "shifted"),
    [
        ((0, -5, 0, 3), (2, 40, 7, 9), False),  # near the origin: one product and a constant
        # x at the int32 limit with a y-z plane of just over 2^32 cells: x times its place
        # value leaves int64, so the rows are shifted first
        ((0, 2**31 - 10, -(2**15), -(2**15)), (1, 2**31 - 1, 2**15 - 1, 2**15 + 1), True),
    ],
)
def test_pack_is_the_packings_own(lo: tuple[int, ...], hi: tuple[int, ...], shifted: bool) -> None:
    packing = Packing.covering(lo, hi, margin=0)
    reach = sum(max(abs(a), abs(b)) * w for a, b, w in zip(lo, hi, packing.strides, strict=True))
    assert (reach >= 2**63) == shifted  # the products would leave int64 (or not)
    g = torch.Generator().manual_seed(3)
    corners = torch.tensor([lo, hi, [lo[0], hi[1], lo[2], hi[3]], [hi[0], lo[1], hi[2], lo[3]]])
    inside = torch.stack(
        [torch.randint(a, b + 1, (500,), generator=g) for a, b in zip(lo, hi, strict=True)], 1
    )
    rows = torch.cat([corners, inside]).to(torch.int64)
    assert torch.equal(_cpu_lookup.pack(packing, rows), packing.pack(rows))

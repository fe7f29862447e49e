"""The Triton path's device-built maps at the edges: int32 limits and supports too wide to pack.

The int32 cases are the contract's own table (``lattice-conformance``'s
``coord_range_cases.py``, plain Python with an exact integer reference per
case, so it loads on machines without MLX), run here with
``schedule("triton")``: every output coordinate that leaves int32 raises
``Int32CoordinateError`` naming the op, the axis and an input row that
produces it; every case in range matches the reference exactly. Wide supports
(an output bounding box beyond 2^62 cells, which no int64 key can index) are
refused with the reference path's error.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from lattice_contract.dialect import INT32_MAX, INT32_MIN, Int32CoordinateError
from torch.utils._python_dispatch import TorchDispatchMode
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.conv import schedule

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_TABLE = Path(__file__).resolve().parents[2] / "lattice-conformance/tests/coord_range_cases.py"


def _table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("coord_range_cases", _TABLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLE = _table()
Triple3 = tuple[int, int, int]


def _run(op: str, rows: list[tuple[int, ...]], t: int, geo: dict[str, Any]) -> dict[Any, float]:
    kwargs = dict(geo)
    if op == "generative_conv_transpose3d":
        kwargs.pop("padding")
        kwargs.pop("dilation")
    k = TABLE._triple(geo["kernel_size"])
    x = SparseTensor(
        torch.tensor(rows, dtype=torch.int32, device=DEVICE),
        torch.ones(len(rows), 1, device=DEVICE),
        stride=t,
    )
    with schedule("triton"):
        if op == "pool3d":
            y = ops.pool3d(x, mode="sum", **kwargs)
        else:
            y = getattr(ops, op)(x, torch.ones(1, *k, 1, device=DEVICE), **kwargs)
    coords = y.coords.cpu().to(torch.int64).tolist()
    return {
        tuple(r): float(f) for r, f in zip(coords, y.feats.detach().cpu().reshape(-1), strict=True)
    }


@pytest.mark.parametrize(
    ("label", "op", "rows", "t", "geo"), TABLE.CASES, ids=[c[0] for c in TABLE.CASES]
)
def test_int32_limits_on_the_triton_path(
    label: str, op: str, rows: list[tuple[int, ...]], t: int, geo: dict[str, Any]
) -> None:
    expected, bad = TABLE.reference(op, rows, t, geo)
    if bad:
        with pytest.raises(Int32CoordinateError) as info:
            _run(op, rows, t, geo)
        err = info.value
        assert err.op == op and err.axis == 1, str(err)
        assert err.row in bad and err.coords == rows[err.row]
        assert not INT32_MIN <= err.value <= INT32_MAX
        assert str(err).startswith(f"{op}: the output coordinate on axis x would be {err.value}")
        return
    assert _run(op, rows, t, geo) == {row: float(n) for row, n in expected.items()}, label


def _wide(spread: int = 1 << 28) -> SparseTensor:
    """Rows ``spread`` apart on every axis (2^28: an output box of ~2^90 cells, too wide)."""
    g = torch.Generator().manual_seed(3)
    base = torch.randint(-4, 4, (24, 4), generator=g)
    base[:, 0] = torch.randint(0, 2, (24,), generator=g)
    far = torch.randint(-2, 2, (24, 3), generator=g) * spread
    coords = torch.unique(torch.cat([base[:, :1], base[:, 1:] + far], 1), dim=0) * 2
    coords[:, 0] //= 2
    feats = torch.randn(coords.shape[0], 3, generator=g)
    # trusted: the duplicate check itself indexes the box (the rows are distinct by construction)
    return SparseTensor.trusted(coords.to(torch.int32).to(DEVICE), feats.to(DEVICE), stride=2)


@pytest.mark.parametrize(
    ("op", "kwargs"),
    [
        ("full_conv3d", {"kernel_size": 3, "stride": 2, "padding": 1}),
        ("conv3d", {"kernel_size": 2, "stride": 2}),
        ("conv3d", {"kernel_size": 3, "stride": 2}),
        ("conv_transpose3d", {"kernel_size": 3, "stride": 2}),
    ],
)
def test_supports_too_wide_to_pack_are_refused_as_on_the_reference(
    op: str, kwargs: dict[str, Any]
) -> None:
    x = _wide()
    k = TABLE._triple(kwargs["kernel_size"])
    w = torch.randn(4, *k, 3, generator=torch.Generator().manual_seed(5)).to(DEVICE)
    with schedule("tap_major"), pytest.raises(ValueError, match="2\\^62 cells or more") as ref:
        getattr(ops, op)(x, w, **kwargs)
    with schedule("triton"), pytest.raises(ValueError, match="2\\^62 cells or more") as got:
        getattr(ops, op)(SparseTensor.trusted(x.coords, x.feats, x.stride), w, **kwargs)
    assert "translate the coordinates" in str(got.value) and type(got.value) is type(ref.value)


def test_near_but_within_the_packing_limit_matches_the_reference() -> None:
    """Rows 2^18 apart on x, y and z (an output box of ~2^60 cells): packed, exact."""
    x = _wide(1 << 18)
    w = torch.randn(4, 3, 3, 3, 3, generator=torch.Generator().manual_seed(6)).to(DEVICE)
    for op, kwargs in (("full_conv3d", {"stride": 2, "padding": 1}), ("conv3d", {"stride": 2})):
        with schedule("tap_major"):
            ref = getattr(ops, op)(x, w, kernel_size=3, **kwargs)
        with schedule("triton"):
            got = getattr(ops, op)(
                SparseTensor.trusted(x.coords, x.feats, x.stride), w, kernel_size=3, **kwargs
            )
        assert torch.equal(got.coords, ref.coords), op
        torch.testing.assert_close(got.feats, ref.feats, atol=1e-5, rtol=1e-5)


class _Ops(TorchDispatchMode):
    """Records the aten ops run inside it (what a map build asks of torch)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_a_submanifold_map_is_built_without_host_reads_in_few_torch_ops() -> None:
    """Hash fill + insert + lookup: no scalar read back, no sort, a handful of torch calls.

    (Tensor.tolist reads without a dispatched op, so the strided conv's one
    read of its info vector is not seen here; no other read may be.)
    """
    from torch_lattice.triton import maps

    g = torch.Generator().manual_seed(8)
    coords = torch.unique(torch.randint(0, 12, (400, 4), generator=g), dim=0)
    coords[:, 0] %= 2
    coords = torch.unique(coords, dim=0).to(torch.int32).to(DEVICE)
    x = SparseTensor(coords, torch.ones(coords.shape[0], 1, device=DEVICE))
    with _Ops() as seen:
        _, smap = maps.build("subm", x.support, (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))
        smap.transposed()
    assert not [n for n in seen.names if "local_scalar" in n or "sort" in n or "unique" in n]
    if DEVICE == "cuda":  # the interpreter's own tensor copies would be counted on CPU
        assert len(seen.names) <= 8, seen.names
    with _Ops() as seen:  # a strided conv: its one read is the info vector, not a scalar op
        maps.build("centred", x.support, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1))
    assert not [n for n in seen.names if "local_scalar" in n or "unique" in n], seen.names


@pytest.mark.parametrize("mirror", [False, True], ids=["scatter", "mirror"])
def test_transposed_twin_points_back_weakly(mirror: bool) -> None:
    """A map and its cached adjoint form no reference cycle (as the reference maps)."""
    import gc
    import weakref

    from torch_lattice.triton.maps import SlotMap

    slots = torch.tensor([[0, -1, 1], [1, 0, -1]], dtype=torch.int32, device=DEVICE)
    forward = SlotMap(slots, 2)
    if mirror:
        forward.cache["mirror"] = True
    twin = forward.transposed()
    assert twin.transposed() is forward
    alive = weakref.ref(forward)
    gc.disable()
    try:
        del forward
        assert alive() is None
    finally:
        gc.enable()
    assert twin.transposed() is not None  # rebuilt on demand once the original is gone


def _scene(seed: int, n: int = 300, extent: int = 14, stride: int = 1) -> SparseTensor:
    g = torch.Generator().manual_seed(seed)
    coords = torch.randint(-extent, extent, (n, 4), generator=g)
    coords[:, 0] = torch.randint(0, 2, (n,), generator=g)
    coords = torch.unique(coords, dim=0)
    coords[:, 1:] *= stride
    feats = torch.randn(coords.shape[0], 2, generator=g)
    return SparseTensor(coords.to(torch.int32).to(DEVICE), feats.to(DEVICE), stride=stride)


def _reference_slots(kmap: Any) -> torch.Tensor:
    """The reference map as a slot table with -1 for absent pairs (its own marker is num_in)."""
    slots = kmap.slots().clone()
    slots[slots == kmap.num_in] = -1
    return slots


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation", "t"),
    [
        ((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), 1),  # spconv's k3s2 p1
        ((3, 3, 3), (2, 2, 2), (0, 0, 0), (2, 2, 2), 1),  # gcd(d, s) = 2: odd residues have none
        ((5, 3, 4), (3, 2, 3), (2, 1, 0), (1, 3, 2), 2),  # mixed periods, strided input
        ((3, 1, 2), (2, 1, 2), (0, 0, 1), (1, 1, 1), 1),  # stride 1 on one axis
    ],
)
def test_indexed_maps_match_the_reference_row_for_row(
    kernel: Triple3, stride: Triple3, padding: Triple3, dilation: Triple3, t: int
) -> None:
    """Only exactly dividing taps are made as candidates; rows, row order and slots unchanged."""
    from torch_lattice.kernel_map import full_conv_map
    from torch_lattice.triton import maps

    x = _scene(11, stride=t)
    ref_support, kmap = full_conv_map(x.support, kernel, stride, padding, dilation)
    fresh = SparseTensor.trusted(x.coords, x.feats, x.stride)
    out, smap = maps.build("indexed", fresh.support, kernel, stride, padding, dilation)
    assert torch.equal(out.coords, ref_support.coords)
    assert out.stride == ref_support.stride
    assert torch.equal(smap.slots, _reference_slots(kmap))
    present = smap.slots >= 0
    bits = (present.to(torch.int64) << torch.arange(smap.volume, device=DEVICE)).sum(1)
    assert torch.equal(smap.cache["pattern"].to(torch.int64), bits)


def test_k3s2_sorts_eight_candidates_per_row_not_27() -> None:
    from torch_lattice.triton import maps

    x = _scene(12)

    class _Sorts(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[int] = []

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            if "sort" in str(func.overloadpacket):
                self.sizes.append(int(args[0].numel()))
            return func(*args, **(kwargs or {}))

    with _Sorts() as seen:
        maps.build("indexed", x.support, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1))
    assert seen.sizes == [8 * x.num_rows], seen.sizes


@pytest.mark.parametrize(
    ("kernel", "padded"), [((2, 2, 2), False), ((2, 2, 2), True), ((3, 3, 3), False)]
)
def test_the_adjoint_is_one_scatter_with_its_tap_masks(kernel: Triple3, padded: bool) -> None:
    """The transposed table equals a brute-force transposition, masks and tap order included.

    A k2s2 map's adjoint is written by the launch that emits the map (disjoint
    windows: one output row and one tap per input row), so it costs nothing
    more; a k3s2's is one scatter.  Padded (a captured call's support, the
    last third of its rows padding), padding rows have no taps either way.
    """
    from torch_lattice.sparse import Support
    from torch_lattice.triton import maps

    x = _scene(13)
    support = x.support
    live = torch.tensor([2 * x.num_rows // 3], dtype=torch.int32, device=DEVICE)
    if padded:
        support = Support(x.coords, x.stride, live)
    p = (1, 1, 1) if kernel[0] == 3 else (0, 0, 0)
    _, smap = maps.build("indexed", support, kernel, (2, 2, 2), p, (1, 1, 1))
    with _Ops() as seen:
        back = smap.transposed()
    if DEVICE == "cuda":  # none for k2s2 (already written), else the fills and the launch
        assert len(seen.names) <= (0 if kernel[0] == 2 else 3), seen.names
    if padded:
        assert back.live is support.active
        assert bool((back.slots[int(live) :] == -1).all())
    m, k = smap.slots.shape
    expected = torch.full((x.num_rows, k), -1, dtype=torch.int32)
    o, tap = torch.nonzero(smap.slots.cpu() >= 0, as_tuple=True)
    expected[smap.slots.cpu()[o, tap].long(), tap] = o.to(torch.int32)
    assert torch.equal(back.slots.cpu(), expected)
    assert back.num_in == m and back.transposed() is smap
    bits = ((expected >= 0).to(torch.int64) << torch.arange(k)).sum(1)
    assert torch.equal(back.cache["pattern"].cpu().to(torch.int64), bits)
    order = back.order().cpu().long()
    assert torch.equal(torch.sort(order).values, torch.arange(x.num_rows))
    assert bool((bits[order][1:] >= bits[order][:-1]).all())  # grouped by tap pattern


def test_the_inverse_conv_reuses_the_forward_map_transposed() -> None:
    """``conv_transpose3d(coordinates=x)`` after the k2s2 conv of x: no search, the adjoint."""
    x = _scene(14)
    w = torch.randn(3, 2, 2, 2, 2, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    w2 = torch.randn(2, 2, 2, 2, 3, generator=torch.Generator().manual_seed(2)).to(DEVICE)
    with schedule("tap_major"):
        ref = ops.conv_transpose3d(
            ops.conv3d(x, w, kernel_size=2, stride=2), w2, kernel_size=2, stride=2, coordinates=x
        )
    fresh = SparseTensor.trusted(x.coords, x.feats, x.stride)
    with schedule("triton"):
        coarse = ops.conv3d(fresh, w, kernel_size=2, stride=2)
        with _Ops() as seen:
            got = ops.conv_transpose3d(coarse, w2, kernel_size=2, stride=2, coordinates=fresh)
    assert not [n for n in seen.names if "local_scalar" in n or "unique" in n], seen.names
    assert torch.equal(got.coords, ref.coords)
    torch.testing.assert_close(got.feats, ref.feats, atol=1e-5, rtol=1e-5)


def test_a_centred_conv_with_gaps_between_windows_keeps_every_coarse_row() -> None:
    """conv3d K = 1, s = 2: every floor(c / s) is a row, also those whose window is empty."""
    x = _scene(15)
    w = torch.randn(2, 1, 1, 1, 2, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    with schedule("tap_major"):
        ref = ops.conv3d(x, w, kernel_size=1, stride=2)
    with schedule("triton"):
        got = ops.conv3d(SparseTensor.trusted(x.coords, x.feats), w, kernel_size=1, stride=2)
    assert torch.equal(got.coords, ref.coords)
    torch.testing.assert_close(got.feats, ref.feats, atol=1e-5, rtol=1e-5)


def test_a_mirrored_adjoint_reuses_the_forward_tap_order() -> None:
    """Odd subm: the adjoint's rows grouped by tap mask with the forward's order, no sort."""
    from torch_lattice.triton import maps

    x = _scene(16)
    _, smap = maps.build("subm", x.support, (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))
    forward_order = smap.order()  # the forward conv sorted its rows once
    back = smap.transposed()
    with _Ops() as seen:
        order = back.order()
    assert not [n for n in seen.names if "sort" in n], seen.names
    assert order is forward_order
    bits = ((back.slots.cpu() >= 0).to(torch.int64) << torch.arange(27)).sum(1)[order.cpu().long()]
    changes = int((bits[1:] != bits[:-1]).sum())
    assert changes == len(torch.unique(bits)) - 1  # each mask's rows are contiguous


@pytest.mark.parametrize("kind", ["subm", "indexed"])
def test_the_pair_lists_are_the_table_read_tap_by_tap(kind: str) -> None:
    """pairs(): per tap, the present (input, output) rows in ascending output, and the starts."""
    from torch_lattice.triton import maps

    x = _scene(17)
    s = (1, 1, 1) if kind == "subm" else (2, 2, 2)
    _, smap = maps.build(kind, x.support, (3, 3, 3), s, (0, 0, 0), (1, 1, 1))
    pin, pout, starts = (t.cpu() for t in smap.pairs())
    slots = smap.slots.cpu()
    first = 0
    assert int(starts[0]) == 0
    for k in range(smap.volume):
        rows = torch.nonzero(slots[:, k] >= 0).reshape(-1)
        end = first + rows.numel()
        assert int(starts[k + 1]) == end
        assert torch.equal(pout[first:end].long(), rows)
        assert torch.equal(pin[first:end], slots[rows, k])
        first = end

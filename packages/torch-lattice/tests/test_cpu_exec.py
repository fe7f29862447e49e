"""The CPU segmented conv executor and its plan, against tap-major and the dense oracle.

The segmented schedule gathers each output range's pairs with one
``index_select`` (the plan's ``gather`` list), multiplies tap by tap and sums
each output row's products with ``embedding_bag`` (the plan's ``bag`` and
range-relative ``offsets``).  These tests run it on inputs that reach the
edges (voxels on every face of a box with negative coordinates, several batch
items, one row, no rows, a map whose pairs partition the inputs), with the
ranges cut small so that taps straddle many of them, and compare values and
gradients with the tap-major schedule and the float64 dense convolution.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.kernel_map import KernelMap
from torch_lattice.ops import conv as conv_module
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import dense_conv3d

Conv = Callable[[SparseTensor, torch.Tensor, torch.Tensor | None], SparseTensor]

CONVS: dict[str, tuple[int, Conv]] = {
    "subm3": (3, lambda x, w, b: ops.subm_conv3d(x, w, b, kernel_size=3)),
    "k2s2": (2, lambda x, w, b: ops.conv3d(x, w, b, kernel_size=2, stride=2)),
    "subm3_dil2": (3, lambda x, w, b: ops.subm_conv3d(x, w, b, kernel_size=3, dilation=2)),
}
GEOMETRY = {
    "subm3": ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
    "k2s2": ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)),
    "subm3_dil2": ((3, 3, 3), (1, 1, 1), (2, 2, 2), (2, 2, 2)),
}


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ranges of the 256-pair minimum: dozens of them, every tap cut across several."""
    monkeypatch.setattr(conv_module, "_SEGMENT_BYTES", 1)
    yield


def _key_ordered(
    coords: torch.Tensor, channels: int, seed: int, dtype: torch.dtype
) -> SparseTensor:
    """Rows sorted by (batch, x, y, z), the order in which per-tap outputs increase."""
    coords = torch.unique(coords.to(torch.int64), dim=0).to(torch.int32)
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(coords.shape[0], channels, generator=g, dtype=torch.float64)
    return SparseTensor(coords, feats.to(dtype))


def _box_faces(batch: int, low: int = -3, high: int = 4) -> torch.Tensor:
    """Every voxel on the six faces of ``[low, high]^3`` in each batch item (a closed surface)."""
    axis = torch.arange(low, high + 1)
    grid = torch.cartesian_prod(axis, axis, axis)
    on_face = ((grid == low) | (grid == high)).any(dim=1)
    shell = grid[on_face]
    items = [torch.cat([torch.full((shell.shape[0], 1), b), shell], 1) for b in range(batch)]
    return torch.cat(items)


def _scene(seed: int, channels: int, dtype: torch.dtype = torch.float32) -> SparseTensor:
    """Box faces in two batch items plus a random interior cloud (some voxels isolated)."""
    g = torch.Generator().manual_seed(seed)
    cloud = torch.cat(
        [torch.randint(0, 2, (80, 1), generator=g), torch.randint(-5, 6, (80, 3), generator=g)], 1
    )
    return _key_ordered(torch.cat([_box_faces(2), cloud]), channels, seed, dtype)


def _maps(x: SparseTensor) -> list[KernelMap]:
    """The kernel maps cached on ``x``'s support (strided ones are stored with their output)."""
    found = []
    for value in x.support.maps.values():
        items = value if isinstance(value, tuple) else (value,)
        found += [m for m in items if isinstance(m, KernelMap)]
    return found


def _plans(x: SparseTensor) -> list[conv_module._Segments]:
    return [
        plan
        for m in _maps(x)
        for key, plan in m.cache.items()
        if key.startswith("segments/") and isinstance(plan, conv_module._Segments)
    ]


def _run(
    name: str, x: SparseTensor, w: torch.Tensor, b: torch.Tensor, mode: str
) -> tuple[SparseTensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    feats = x.feats.clone().requires_grad_(True)
    weight = w.clone().requires_grad_(True)
    bias = b.clone().requires_grad_(True)
    with schedule(mode):
        y = CONVS[name][1](x.with_feats(feats), weight, bias)
        upstream = torch.randn(y.feats.shape, generator=torch.Generator().manual_seed(5))
        y.feats.backward(upstream.to(y.feats.dtype))
    assert feats.grad is not None and weight.grad is not None and bias.grad is not None
    return y, feats.grad, weight.grad, bias.grad


@pytest.mark.usefixtures("small_ranges")
@pytest.mark.parametrize("name", list(CONVS))
def test_segmented_matches_tap_major_values_and_gradients(name: str) -> None:
    x = _scene(1, 5)
    size = CONVS[name][0]
    g = torch.Generator().manual_seed(2)
    w = torch.randn(6, size, size, size, 5, generator=g)
    b = torch.randn(6, generator=g)
    seg = _run(name, x, w, b, "segmented")
    plans = _plans(x)
    assert plans and max(len(p.bounds) for p in plans) > 3  # several ranges really ran
    ref = _run(name, SparseTensor(x.coords, x.feats), w, b, "tap_major")
    assert torch.equal(seg[0].coords, ref[0].coords)
    for got, want in zip((seg[0].feats, *seg[1:]), (ref[0].feats, *ref[1:]), strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", list(CONVS))
def test_segmented_float64_matches_dense_oracle(name: str) -> None:
    x = _scene(3, 4, torch.float64)
    size = CONVS[name][0]
    g = torch.Generator().manual_seed(4)
    w = torch.randn(3, size, size, size, 4, generator=g, dtype=torch.float64)
    with schedule("segmented"):
        out = CONVS[name][1](x, w, None)
    assert _plans(x)
    k, s, p, d = GEOMETRY[name]
    ref = dense_conv3d(x, w, k, s, p, d)
    ref_on_rows = ops.sparse_reindex(SparseTensor(ref.coords, ref.feats, stride=out.stride), out)
    torch.testing.assert_close(out.feats, ref_on_rows.feats, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("budget_bytes", [1, 1 << 22])
def test_plan_lists_every_pair_once_per_range(
    budget_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conv_module, "_SEGMENT_BYTES", budget_bytes)
    x = _scene(6, 8)
    ops.subm_conv3d(x, torch.zeros(2, 3, 3, 3, 8), kernel_size=3)
    (kmap,) = _maps(x)
    (plan,) = _plans(x)
    # the gather list holds the map's input rows, each pair once
    assert torch.equal(torch.sort(plan.gather).values, torch.sort(kmap.in_idx).values)
    for c in range(len(plan.bounds) - 1):
        lo, hi = plan.bounds[c], plan.bounds[c + 1]
        base, end = plan.pair_bounds[c], plan.pair_bounds[c + 1]
        assert sum(plan.part_sizes[c]) == end - base
        assert len(plan.part_taps[c]) == len(plan.part_sizes[c]) and all(plan.part_sizes[c])
        # every buffer position of the range is summed exactly once
        assert torch.equal(
            torch.sort(plan.bag[base:end]).values, torch.arange(end - base, dtype=torch.int32)
        )
        starts = plan.offsets[lo:hi]
        assert hi == lo or int(starts[0]) == 0
        assert bool((starts[1:] >= starts[:-1]).all()) and bool((starts <= end - base).all())


def test_partition_map_gathers_each_input_once() -> None:
    # k2 s2: every input row feeds exactly one output through one tap
    x = _scene(7, 3)
    w = torch.randn(2, 2, 2, 2, 3, generator=torch.Generator().manual_seed(8))
    with schedule("segmented"):
        ops.conv3d(x, w, kernel_size=2, stride=2)
    (plan,) = _plans(x)
    assert torch.equal(
        torch.sort(plan.gather).values, torch.arange(x.num_rows, dtype=plan.gather.dtype)
    )


@pytest.mark.parametrize("name", list(CONVS))
def test_one_row_and_no_rows(name: str) -> None:
    size = CONVS[name][0]
    g = torch.Generator().manual_seed(9)
    w = torch.randn(3, size, size, size, 2, generator=g)
    b = torch.randn(3, generator=g)
    one = _key_ordered(torch.tensor([[0, -1, 2, 3]]), 2, 9, torch.float32)
    none = SparseTensor(torch.zeros(0, 4, dtype=torch.int32), torch.zeros(0, 2))
    for x in (one, none):
        seg = _run(name, x, w, b, "segmented")
        ref = _run(name, SparseTensor(x.coords, x.feats), w, b, "tap_major")
        assert torch.equal(seg[0].coords, ref[0].coords)
        for got, want in zip((seg[0].feats, *seg[1:]), (ref[0].feats, *ref[1:]), strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_auto_schedule_every_dtype_matches_float64(dtype: torch.dtype) -> None:
    # f32 and f64 run segmented under auto; half types are widened and run tap-major
    x = _scene(10, 16, dtype)
    w = torch.randn(8, 3, 3, 3, 16, generator=torch.Generator().manual_seed(11)).to(dtype)
    out = ops.subm_conv3d(x, w, kernel_size=3)
    assert out.dtype == dtype
    assert bool(_plans(x)) == (dtype in (torch.float32, torch.float64))
    wide = ops.subm_conv3d(x.with_feats(x.feats.double()), w.double(), kernel_size=3)
    tol = {torch.float16: 2e-2, torch.bfloat16: 8e-2, torch.float32: 1e-4, torch.float64: 1e-10}[
        dtype
    ]
    torch.testing.assert_close(out.feats.double(), wide.feats, atol=tol, rtol=tol)

"""The segmented (scatter-free) conv schedule against the dense oracle and tap-major.

It runs only on maps whose per-tap output rows increase, which subm maps over
rows already in key order have; these tests build such inputs, check that the
schedule really ran (its plan is cached on the map), cut the outputs into many
ranges, and gradcheck it.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_lattice import SparseTensor, ops
from torch_lattice.kernel_map import KernelMap
from torch_lattice.ops import conv as conv_module
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import dense_conv3d, random_sparse

small = st.integers(min_value=1, max_value=4)


def _key_ordered(x: SparseTensor) -> SparseTensor:
    """The same value with rows sorted by (batch, x, y, z): the order the segmented path needs."""
    coords = x.coords.to(torch.int64)
    key = torch.zeros(coords.shape[0], dtype=torch.int64)
    for a in range(4):
        key = key * 4096 + (coords[:, a] + 2048)
    perm = torch.argsort(key)
    return SparseTensor(x.coords[perm], x.feats[perm], stride=x.stride)


def _ran_segmented(x: SparseTensor) -> bool:
    maps = [m for m in x.support.maps.values() if isinstance(m, KernelMap)]
    return any(k.startswith("segments/") for m in maps for k in m.cache)


def _dense_on_rows(
    x: SparseTensor, w: torch.Tensor, k: tuple[int, int, int], d: tuple[int, int, int]
) -> torch.Tensor:
    pad = ((k[0] - 1) // 2 * d[0], (k[1] - 1) // 2 * d[1], (k[2] - 1) // 2 * d[2])
    ref = dense_conv3d(x, w, k, (1, 1, 1), pad, d)
    ref_sparse = SparseTensor(ref.coords, ref.feats)
    return ops.sparse_reindex(ref_sparse, x.with_feats(x.feats.double())).feats


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.tuples(small, small, small),
    d=st.tuples(small, small, small),
)
def test_segmented_subm_matches_dense(
    seed: int, k: tuple[int, int, int], d: tuple[int, int, int]
) -> None:
    g = torch.Generator().manual_seed(seed)
    x = _key_ordered(random_sparse(g, 40, 3, batch=2, extent=5))
    w = torch.randn(4, *k, 3, generator=g)
    with schedule("segmented"):
        out = ops.subm_conv3d(x, w, kernel_size=k, dilation=d)
    stored = sum(int(m.in_idx.numel()) for m in x.support.maps.values() if isinstance(m, KernelMap))
    assert _ran_segmented(x) == (stored > 0)  # only the identity tap: nothing to segment
    torch.testing.assert_close(out.feats.double(), _dense_on_rows(x, w, k, d), atol=1e-4, rtol=1e-4)


def test_segmented_many_ranges_match_tap_major(monkeypatch: pytest.MonkeyPatch) -> None:
    # a tiny range buffer forces the 256-pair minimum: dozens of ranges, taps split across them
    monkeypatch.setattr(conv_module, "_SEGMENT_BYTES", 1)
    g = torch.Generator().manual_seed(11)
    x = _key_ordered(random_sparse(g, 900, 5, batch=2, extent=9))
    w = torch.randn(6, 3, 3, 3, 5, generator=g)
    with schedule("segmented"):
        out = ops.subm_conv3d(x, w, kernel_size=3)
    plans = [
        v
        for m in x.support.maps.values()
        if isinstance(m, KernelMap)
        for key, v in m.cache.items()
        if key.startswith("segments/")
    ]
    assert plans and len(plans[0].bounds) > 10
    with schedule("tap_major"):
        ref = ops.subm_conv3d(SparseTensor(x.coords, x.feats), w, kernel_size=3)
    torch.testing.assert_close(out.feats, ref.feats, atol=1e-4, rtol=1e-4)


def test_segmented_falls_back_on_unsorted_rows() -> None:
    g = torch.Generator().manual_seed(3)
    x = random_sparse(g, 60, 3, extent=5)  # rows shuffled: per-tap outputs not increasing
    w = torch.randn(2, 3, 3, 3, 3, generator=g)
    with schedule("segmented"):
        out = ops.subm_conv3d(x, w, kernel_size=3)
    assert not _ran_segmented(x)
    torch.testing.assert_close(
        out.feats.double(), _dense_on_rows(x, w, (3, 3, 3), (1, 1, 1)), atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("k", [2, 3])
def test_segmented_gradcheck(k: int) -> None:
    g = torch.Generator().manual_seed(7)
    x = _key_ordered(random_sparse(g, 25, 2, extent=4, dtype=torch.float64))
    w = torch.randn(3, k, k, k, 2, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    f = x.feats.clone().requires_grad_(True)
    with schedule("segmented"):
        assert torch.autograd.gradcheck(
            lambda f, w, b: ops.subm_conv3d(x.with_feats(f), w, b, kernel_size=k).feats, (f, w, b)
        )
    assert _ran_segmented(x)

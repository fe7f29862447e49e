"""The CPU fast paths of the kernel maps (tiled strided map, sort-based unique) against the search.

The general path (coarsened support, then a sorted-table search of every
tap) is the reference (the subm map has no fast path of its own here:
test_kernel_map_oracle.py checks it against a dense-grid oracle): for
every geometry both must give the same (tap, input row, output row)
triples, the same output support rows in the same order, and honest
``outputs_sorted`` / ``inputs_sorted`` promises.
Inputs reach the edges: negative coordinates, several batch items, rows out
of key order, a one-row support, and a LiDAR-like mix of dense and sparse
regions.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_lattice import kernel_map as km
from torch_lattice.sparse import Support


def _coords(n: int, seed: int, shuffle: bool, span: int = 24) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    pts = rng.integers(-span, span, size=(3 * n, 3))
    b = rng.integers(0, 3, size=(3 * n, 1))
    rows = np.unique(np.concatenate([b, pts], 1), axis=0)[:n]
    if shuffle:
        rows = rows[rng.permutation(len(rows))]
    return torch.from_numpy(rows).to(torch.int32)


def _triples(kmap: km.KernelMap) -> set[tuple[int, int, int]]:
    out: set[tuple[int, int, int]] = set()
    for k in range(kmap.volume):
        a, b = kmap.tap(k)
        out.update((k, int(i), int(o)) for i, o in zip(a.tolist(), b.tolist(), strict=True))
        if k == kmap.identity_tap:
            out.update((k, i, i) for i in range(kmap.num_out))
    return out


def _check_sorted(kmap: km.KernelMap) -> None:
    for k in range(kmap.volume):
        a, b = kmap.tap(k)
        if kmap.outputs_sorted:
            assert bool(torch.all(b[1:] > b[:-1]))
        if kmap.inputs_sorted:
            assert bool(torch.all(a[1:] > a[:-1]))


def _reference(monkeypatch: pytest.MonkeyPatch, build):
    with monkeypatch.context() as m:
        m.setattr(km, "_tiled_map", lambda *a, **k: None)
        return build()


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(
    "kernel,stride,padding",
    [
        ((2, 2, 2), (2, 2, 2), (0, 0, 0)),  # tiled
        ((1, 2, 1), (2, 2, 3), (0, 0, 0)),  # tiled, taps past K feed nothing
        ((3, 3, 3), (2, 2, 2), (1, 1, 1)),  # hashed strided search
        ((3, 3, 3), (1, 1, 1), (1, 0, 2)),  # stride 1, not submanifold
        ((2, 2, 2), (2, 2, 2), (1, 0, 0)),  # padded: hashed, not tiled
    ],
)
def test_conv_map_matches_table(
    monkeypatch: pytest.MonkeyPatch,
    shuffle: bool,
    kernel,
    stride,
    padding,
) -> None:
    coords = _coords(800, 5, shuffle)
    d = (1, 1, 1)
    out, got = km.conv_map(Support(coords, (1, 1, 1)), kernel, stride, padding, d)
    ref_out, ref = _reference(
        monkeypatch, lambda: km.conv_map(Support(coords, (1, 1, 1)), kernel, stride, padding, d)
    )
    assert torch.equal(out.logical, ref_out.logical)
    assert got.starts == ref.starts
    assert _triples(got) == _triples(ref)
    _check_sorted(got)


def test_tiled_map_keeps_cached_coarse_support() -> None:
    support = Support(_coords(300, 2, True), (1, 1, 1))
    coarse = km.coarsened_support(support, (2, 2, 2))
    out, _ = km.conv_map(support, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1))
    assert out is coarse


def test_unique_matches_torch_unique() -> None:
    for vals in (
        torch.tensor([4, 1, 4, 9, 1, 1, -3], dtype=torch.int64),
        torch.randint(-50, 50, (1000,), dtype=torch.int64),
        torch.tensor([7], dtype=torch.int64),
    ):
        uniq, inv = km._unique(vals)
        ref_u, ref_i = torch.unique(vals, sorted=True, return_inverse=True)
        assert torch.equal(uniq, ref_u) and torch.equal(inv, ref_i)
    empty_u, empty_i = km._unique(torch.empty(0, dtype=torch.int64))
    assert empty_u.numel() == 0 and empty_i.numel() == 0


def test_full_and_transpose_maps_on_cpu_match_pairs() -> None:
    """full_conv3d / conv_transpose3d maps (now through the sort-based unique): every pair exact."""
    coords = _coords(300, 9, True)
    support = Support(coords, (1, 1, 1))
    logical = support.logical
    out, kmap = km.full_conv_map(support, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1))
    keys = {tuple(r) for r in out.logical.tolist()}
    assert len(keys) == out.num_rows
    for k in range(kmap.volume):
        a, b = kmap.tap(k)
        shift = torch.tensor([k // 9, (k // 3) % 3, k % 3]) - 1  # o*s = c + p - k*d
        c = logical[a.long(), 1:]
        o = out.logical[b.long(), 1:]
        assert torch.equal(o * 2, c + 1 - (shift + 1))
        assert torch.equal(logical[a.long(), 0], out.logical[b.long(), 0])

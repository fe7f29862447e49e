"""sparse_quantize, vote_labels and voxel_features against brute-force definitions.

The oracles walk the points one by one in Python (small inputs), straight
from the definitions: a point lies in voxel ``floor((p - origin) / size)``;
a voxel's label is its most frequent point label (ties to the smallest);
its features are the mean of its points' features.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
import torch
from torch_lattice import ops
from torch_lattice.data import sparse_quantize, vote_labels, voxel_features


def _brute_voxels(points: torch.Tensor, size: tuple[float, float, float], origin=(0, 0, 0)):
    voxel_of = [
        tuple(math.floor((p[i] - origin[i]) / size[i]) for i in range(3)) for p in points.tolist()
    ]
    first: dict[tuple[int, ...], int] = {}
    for i, v in enumerate(voxel_of):
        first.setdefault(v, i)
    return voxel_of, first


@pytest.mark.parametrize(
    ("size", "origin"), [((0.5, 0.5, 0.5), None), ((0.3, 1.0, 0.7), (-1.0, 2.0, 0.5))]
)
def test_quantize_matches_the_definition(size, origin) -> None:
    g = torch.Generator().manual_seed(0)
    points = torch.rand(400, 3, generator=g, dtype=torch.float64) * 6 - 2
    got = sparse_quantize(points, size, origin=origin)
    voxel_of, first = _brute_voxels(points, size, origin or (0, 0, 0))
    assert sorted(first) == [tuple(r) for r in got.coords.tolist()]  # sorted, unique
    assert got.coords.dtype == torch.int32
    rows = {tuple(r): i for i, r in enumerate(got.coords.tolist())}
    assert got.inverse.tolist() == [rows[v] for v in voxel_of]
    assert got.indices.tolist() == [first[tuple(r)] for r in got.coords.tolist()]
    # Unpacks like TorchSparse's (coords, indices, inverse).
    coords, indices, inverse = got
    assert indices is got.indices
    assert torch.equal(coords[inverse], torch.tensor(voxel_of, dtype=torch.int32))


def test_quantize_agrees_with_the_voxelize_op_on_float32_points() -> None:
    g = torch.Generator().manual_seed(1)
    points = torch.rand(2000, 3, generator=g) * 7.3
    got = sparse_quantize(points, 0.37)
    voxels = ops.voxelize(
        points, torch.ones(2000, 1), torch.zeros(2000, dtype=torch.int32), voxel_size=0.37
    )
    # voxelize lists cells in first-occurrence order (upstream's); sort them like sparse_quantize
    cells = torch.unique(voxels.coords[:, 1:], dim=0)
    assert len(cells) == len(voxels.coords) and torch.equal(got.coords, cells)


def test_quantize_integer_and_numpy_inputs() -> None:
    coords = np.array([[3, 1, 2], [0, 0, 0], [3, 1, 2], [-4, 5, 1]], dtype=np.int64)
    got = sparse_quantize(coords)
    assert got.coords.tolist() == [[-4, 5, 1], [0, 0, 0], [3, 1, 2]]
    assert got.indices.tolist() == [3, 1, 0]
    assert got.inverse.tolist() == [2, 1, 2, 0]
    empty = sparse_quantize(torch.zeros(0, 3))
    assert empty.coords.shape == (0, 3) and empty.inverse.numel() == 0


@pytest.mark.parametrize(
    ("points", "size", "words"),
    [
        (torch.zeros(4, 4), 1.0, "shape (P, 3)"),
        (torch.tensor([[0.0, float("nan"), 1.0]]), 1.0, "NaN"),
        (torch.zeros(2, 3), 0.0, "positive"),
        (torch.zeros(2, 3), (1.0, 2.0), "three"),
        (torch.tensor([[1e12, 0.0, 0.0]], dtype=torch.float64), 1e-3, "int32"),
        ("points", 1.0, "tensor or array"),
    ],
)
def test_quantize_rejects_bad_input(points, size, words) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        sparse_quantize(points, size)


def test_vote_labels_is_the_majority_with_ties_to_the_smallest() -> None:
    g = torch.Generator().manual_seed(2)
    inverse = torch.randint(0, 40, (600,), generator=g)
    labels = torch.randint(-1, 5, (600,), generator=g)
    got = vote_labels(labels, inverse, 42)
    pairs = list(zip(labels.tolist(), inverse.tolist(), strict=True))
    for voxel in range(42):
        votes = Counter(v for v, i in pairs if i == voxel)
        votes.pop(-1, None)
        if not votes:
            assert int(got[voxel]) == -1
            continue
        top = max(votes.values())
        assert int(got[voxel]) == min(k for k, c in votes.items() if c == top)
    tie = vote_labels(torch.tensor([3, 1, 1, 3, 250]), torch.tensor([0, 0, 0, 0, 1]))
    assert tie.tolist() == [1, 250]


def test_vote_labels_with_huge_label_ids_neither_overflows_nor_crashes() -> None:
    # voxel * (max label + 1) used to overflow int64: a bare RuntimeError or wrong votes
    big = 2**61
    inverse = torch.tensor([0, 0, 1, 1, 2, 3, 4, 4, 4, 5, 5])
    labels = torch.tensor([7, 7, 3, 3, 9, 5, big, big, big + 1, big + 1, 2**63 - 1])
    assert vote_labels(labels, inverse).tolist() == [7, 3, 9, 5, big, big + 1]


def test_voxel_features_are_point_means() -> None:
    g = torch.Generator().manual_seed(3)
    inverse = torch.randint(0, 10, (100,), generator=g)
    feats = torch.randn(100, 3, generator=g)
    got = voxel_features(feats, inverse, 11)
    for voxel in range(11):
        rows = feats[inverse == voxel]
        want = rows.mean(0) if len(rows) else torch.zeros(3)
        torch.testing.assert_close(got[voxel], want)
    with pytest.raises(ValueError, match="num_voxels"):
        voxel_features(feats, inverse, 5)
    with pytest.raises(ValueError, match="points"):
        vote_labels(torch.zeros(3, dtype=torch.int64), inverse)

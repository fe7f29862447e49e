"""sparse_collate and VoxelizedDataset: batch column, offsets, inverse maps, DataLoader use.

The strongest oracle is the model itself: in eval mode a network's logits
for a collated batch, split per sample, must equal the logits of each sample
run alone -- which fails if the batch column, the row offsets or the shifted
inverse maps are wrong.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler
from torch_lattice import SparseTensor
from torch_lattice.data import (
    PointCloud,
    SparseBatch,
    VoxelizedDataset,
    make_sparse_collate,
    sparse_collate,
)
from torch_lattice.models import MinkUNet


class _Clouds:
    def __len__(self) -> int:
        return 5

    def __getitem__(self, index: int) -> PointCloud:
        g = torch.Generator().manual_seed(index)
        points = torch.rand(80 + 30 * index, 3, generator=g) * 6
        labels = (points[:, 2] > 3).to(torch.int64)
        return PointCloud(points, torch.rand(len(points), 2, generator=g), labels)


def _dataset() -> VoxelizedDataset:
    return VoxelizedDataset(_Clouds(), 0.75)


def test_samples_are_voxelised_clouds() -> None:
    cloud = _Clouds()[2]
    sample = _dataset()[2]
    voxels = sample["input"]
    assert isinstance(voxels, SparseTensor) and voxels.num_channels == 2
    assert bool((voxels.coords[:, 0] == 0).all())
    # Every point's voxel is the row its inverse names.
    want = torch.floor(cloud.points / 0.75).to(torch.int32)
    assert torch.equal(voxels.coords[sample["inverse"], 1:], want)
    assert cloud.labels is not None
    assert torch.equal(sample["point_labels"], cloud.labels)
    assert sample["labels"].shape == (voxels.num_rows,)


def test_collate_writes_the_batch_column_offsets_and_shifted_inverse() -> None:
    data = _dataset()
    samples = [data[i] for i in (3, 0, 4)]
    batch = sparse_collate(samples)
    assert isinstance(batch, SparseBatch) and batch.batch_size == 3
    x = batch["input"]
    rows = [s["input"].num_rows for s in samples]
    assert batch.offsets["input"].tolist() == [0, rows[0], rows[0] + rows[1], sum(rows)]
    want_batch = torch.repeat_interleave(torch.arange(3), torch.tensor(rows))
    assert torch.equal(x.coords[:, 0].long(), want_batch)
    for i, sample in enumerate(samples):
        lo, hi = batch.offsets["input"][i : i + 2].tolist()
        assert torch.equal(x.coords[lo:hi, 1:], sample["input"].coords[:, 1:])
        assert torch.equal(x.feats[lo:hi], sample["input"].feats)
    # Shifted inverse maps: batched voxel features read back at every point of
    # every sample equal each sample's own read-back.
    per_point = x.feats[batch["inverse"]]
    want = torch.cat([s["input"].feats[s["inverse"]] for s in samples])
    assert torch.equal(per_point, want)
    split = batch.split(per_point, "inverse")
    assert [len(t) for t in split] == [len(s["inverse"]) for s in samples]
    assert torch.equal(batch["point_labels"], torch.cat([s["point_labels"] for s in samples]))


def test_batched_predictions_equal_per_sample_predictions() -> None:
    torch.manual_seed(0)
    model = MinkUNet(2, 3, (4, 4, 8)).eval()
    data = _dataset()
    samples = [data[i] for i in range(3)]
    batch = sparse_collate(samples)
    with torch.no_grad():
        logits = model(batch["input"]).feats
        points = batch.split(logits[batch["inverse"]], "inverse")
        for sample, got in zip(samples, points, strict=True):
            alone = model(sample["input"]).feats[sample["inverse"]]
            torch.testing.assert_close(got, alone, atol=1e-5, rtol=1e-5)


def test_dataloader_with_distributed_sampler_and_a_worker_process() -> None:
    data = _dataset()
    sampler = DistributedSampler[int](data, num_replicas=2, rank=1, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=2, sampler=sampler, collate_fn=sparse_collate)
    served = [int(i) for i in sampler]
    batches = list(loader)
    assert sum(b.batch_size for b in batches) == len(served) == 3
    first = batches[0]
    want = sparse_collate([data[i] for i in served[:2]])
    assert torch.equal(first["input"].coords, want["input"].coords)
    # Samples cross a worker process (pickled) intact.
    threaded = list(DataLoader(data, batch_size=5, num_workers=1, collate_fn=sparse_collate))
    everything = sparse_collate([data[i] for i in range(len(data))])
    assert torch.equal(threaded[0]["input"].coords, everything["input"].coords)


def test_collate_scalars_lists_and_other_inverse_keys() -> None:
    data = _dataset()
    samples = [
        {"voxels": data[i]["input"], "point_to_voxel": data[i]["inverse"], "id": i, "name": f"s{i}"}
        for i in range(2)
    ]
    collate = make_sparse_collate({"point_to_voxel": "voxels"})
    batch = collate(samples)
    assert batch["id"].tolist() == [0, 1] and batch["name"] == ["s0", "s1"]
    assert int(batch["point_to_voxel"][len(samples[0]["point_to_voxel"])]) >= int(
        samples[0]["voxels"].num_rows
    )
    # Without the mapping the inverse map is concatenated as plain data.
    plain = sparse_collate(samples)
    assert torch.equal(plain["point_to_voxel"], torch.cat([s["point_to_voxel"] for s in samples]))


def _sparse(stride: int = 1, batch: int = 0) -> SparseTensor:
    coords = torch.tensor([[batch, 0, 0, 0], [batch, 2, 2, 2]], dtype=torch.int32)
    return SparseTensor(
        coords * torch.tensor([1, stride, stride, stride]).int(), torch.ones(2, 1), stride
    )


@pytest.mark.parametrize(
    ("samples", "words"),
    [
        ([{"input": _sparse(1)}, {"input": _sparse(2)}], "stride"),
        ([{"input": _sparse(batch=1)}], "batch index 0"),
        ([{"input": _sparse()}, {"x": _sparse()}], "keys"),
        ([(_sparse(),)], "return a dict"),
        ([], "non-empty"),
        ([{"input": _sparse(), "inverse": torch.tensor([5])}], "outside"),
        ([{"v": _sparse(), "inverse": torch.tensor([0])}], "inverse_maps"),
        ([{"a": torch.zeros(2, 3)}, {"a": torch.zeros(2, 4)}], "first (row) dimension"),
    ],
)
def test_collate_rejects_bad_samples(samples, words) -> None:
    with pytest.raises((ValueError, TypeError, KeyError), match=re.escape(words)):
        sparse_collate(samples)

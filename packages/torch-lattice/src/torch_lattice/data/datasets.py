"""Datasets that turn point clouds into the samples :func:`sparse_collate` batches.

A *source* is anything indexable that yields :class:`PointCloud` values --
a list, :class:`PointCloudFiles` (PLY / NPY / ``.bin`` files),
:class:`SemanticKITTIScans` (a SemanticKITTI tree), or a generator of
synthetic scenes.  :class:`VoxelizedDataset` quantises each cloud with
:func:`sparse_quantize` and returns the TorchSparse-style sample::

    {"input": SparseTensor,      # unique voxels, batch index 0, mean point features
     "inverse": (P,) int64,      # voxel row of every point
     "labels": (M,) int64,       # per-voxel majority label      (labelled clouds only)
     "point_labels": (P,) int64} # the original per-point labels (labelled clouds only)

so that ``DataLoader(dataset, collate_fn=sparse_collate, sampler=DistributedSampler(dataset))``
is the whole input pipeline of a distributed run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from torch.utils.data import Dataset

from torch_lattice.data.quantize import sparse_quantize, vote_labels, voxel_features
from torch_lattice.data.readers import (
    PointCloud,
    read_point_cloud,
    read_semantic_kitti,
    semantic_kitti_paths,
)
from torch_lattice.sparse import SparseTensor

__all__ = ["PointCloudFiles", "PointCloudSource", "SemanticKITTIScans", "VoxelizedDataset"]


class PointCloudSource(Protocol):
    """Indexable point clouds: ``len(source)`` and ``source[i] -> PointCloud``."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> PointCloud: ...


class PointCloudFiles:
    """Point-cloud files (``.ply``, ``.npy``, SemanticKITTI ``.bin``), read on access."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        self.paths = [Path(p) for p in paths]
        missing = [str(p) for p in self.paths if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"point-cloud files not found: {missing[:5]}")

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> PointCloud:
        return read_point_cloud(self.paths[index])


class SemanticKITTIScans:
    """The scans of some sequences of a SemanticKITTI tree (``<root>/sequences/NN/...``).

    ``learning_map`` maps raw semantic ids to training classes (the
    ``learning_map`` of the dataset's ``semantic-kitti.yaml``); ids it does
    not name become ``ignore_index``.  Without it labels are the raw ids.
    Sequences without a ``labels`` folder (the test split) give unlabelled
    clouds.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        sequences: Sequence[int | str] = (0,),
        *,
        learning_map: Mapping[int, int] | None = None,
        ignore_index: int = -1,
    ) -> None:
        self.root = Path(root)
        self.frames: list[tuple[int, int]] = []
        for seq in sequences:
            folder = semantic_kitti_paths(self.root, seq, 0)[0].parent
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"{folder} is missing; the layout is <root>/sequences/NN/velodyne/FFFFFF.bin"
                )
            frames = sorted(int(p.stem) for p in folder.glob("*.bin") if p.stem.isdigit())
            self.frames += [(int(seq), f) for f in frames]
        self.lookup: torch.Tensor | None = None
        if learning_map is not None:
            if any(k < 0 for k in learning_map):
                raise ValueError(
                    "learning_map keys are raw SemanticKITTI label ids and cannot be negative, "
                    f"got {sorted(k for k in learning_map if k < 0)}"
                )
            top = max(max(learning_map), 0) + 1
            lookup = torch.full((max(top, 1 << 16),), ignore_index, dtype=torch.int64)
            keys = torch.tensor(list(learning_map), dtype=torch.int64)
            lookup[keys] = torch.tensor(list(learning_map.values()), dtype=torch.int64)
            self.lookup = lookup

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, index: int) -> PointCloud:
        seq, frame = self.frames[index]
        scan, label = semantic_kitti_paths(self.root, seq, frame)
        cloud, _ = read_semantic_kitti(scan, label if label.is_file() else None)
        if cloud.labels is not None and self.lookup is not None:
            cloud = cloud._replace(labels=self.lookup[cloud.labels])
        return cloud


class VoxelizedDataset(Dataset[dict[str, Any]]):
    """Voxelised samples of a point-cloud source, ready for :func:`sparse_collate`.

    ``point_features(cloud)`` gives the per-point input features (default:
    the cloud's own features, or a column of ones when it has none); voxel
    features are their mean over each voxel.  Labels are voted per voxel
    (:func:`vote_labels`, ``ignore_index`` points abstain).  ``transform``
    may augment each cloud first (rotation, scaling, cropping).
    """

    def __init__(
        self,
        source: PointCloudSource,
        voxel_size: float | Sequence[float],
        *,
        point_features: Callable[[PointCloud], torch.Tensor] | None = None,
        transform: Callable[[PointCloud], PointCloud] | None = None,
        ignore_index: int = -1,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.source = source
        self.voxel_size = voxel_size
        self.point_features = point_features
        self.transform = transform
        self.ignore_index = ignore_index
        self.dtype = dtype

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index: int) -> dict[str, Any]:
        size = len(self.source)
        if not -size <= index < size:
            raise IndexError(f"sample {index} is out of range for {size} samples")
        cloud = self.source[index % size]
        if self.transform is not None:
            cloud = self.transform(cloud)
        if self.point_features is not None:
            feats = self.point_features(cloud)
        elif cloud.features is not None:
            feats = cloud.features
        else:
            feats = torch.ones((cloud.points.shape[0], 1), dtype=torch.float32)
        coords, _, inverse = sparse_quantize(cloud.points, self.voxel_size)
        m = int(coords.shape[0])
        batch = torch.zeros((m, 1), dtype=torch.int32)
        voxels = SparseTensor.trusted(
            torch.cat([batch, coords], dim=1),
            voxel_features(feats.to(torch.float32), inverse, m).to(self.dtype),
        )
        sample: dict[str, Any] = {"input": voxels, "inverse": inverse}
        if cloud.labels is not None:
            sample["labels"] = vote_labels(cloud.labels, inverse, m, ignore_index=self.ignore_index)
            sample["point_labels"] = cloud.labels.to(torch.int64)
        return sample

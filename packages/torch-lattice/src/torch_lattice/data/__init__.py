"""The sparse data pipeline for training: quantise, read, batch.

* :func:`sparse_quantize` -- points to unique voxels with index and inverse
  maps; :func:`vote_labels` and :func:`voxel_features` carry per-point labels
  and features onto the voxels.
* :func:`sparse_collate` -- the ``DataLoader`` ``collate_fn``: batches
  SparseTensors (writing the batch column), labels and per-point tensors,
  and keeps per-sample offsets and shifted inverse maps (:class:`SparseBatch`).
* Readers for PLY, ``.npy`` and SemanticKITTI ``.bin`` + ``.label`` files, and
  :class:`VoxelizedDataset` over any indexable source of point clouds.

Nothing here needs NumPy; NumPy arrays are accepted where a tensor is.
"""

from __future__ import annotations

from torch_lattice.data.collate import (
    DEFAULT_INVERSE_MAPS,
    SparseBatch,
    make_sparse_collate,
    sparse_collate,
)
from torch_lattice.data.datasets import (
    PointCloudFiles,
    PointCloudSource,
    SemanticKITTIScans,
    VoxelizedDataset,
)
from torch_lattice.data.quantize import Quantized, sparse_quantize, vote_labels, voxel_features
from torch_lattice.data.readers import (
    PointCloud,
    read_npy,
    read_ply,
    read_point_cloud,
    read_semantic_kitti,
    semantic_kitti_paths,
    write_semantic_kitti,
)

__all__ = [
    "DEFAULT_INVERSE_MAPS",
    "PointCloud",
    "PointCloudFiles",
    "PointCloudSource",
    "Quantized",
    "SemanticKITTIScans",
    "SparseBatch",
    "VoxelizedDataset",
    "make_sparse_collate",
    "read_npy",
    "read_ply",
    "read_point_cloud",
    "read_semantic_kitti",
    "semantic_kitti_paths",
    "sparse_collate",
    "sparse_quantize",
    "vote_labels",
    "voxel_features",
    "write_semantic_kitti",
]

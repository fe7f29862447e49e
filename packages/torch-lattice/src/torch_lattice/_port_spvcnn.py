"""SPVNAS's SPVCNN as a ported model: the MinkUNet voxel branch plus its point branch.

SPVCNN's ``forward`` moves features between points and voxels with
TorchSparse's ``point_to_voxel`` (the mean of the points that fall in each
voxel ``floor(p / s) * s`` of an existing tensor) and ``voxel_to_point`` (the
eight corners ``floor(p / s) * s + {0, s}^3``, hat weights ``1 - |p - c| / s``
per axis, renormalised over the corners present).  In SPVNAS's SemanticKITTI
configuration the points are the input voxels themselves
(``PointTensor(x.F, x.C.float())``, ``pres == vres``), so the point features
live here as a sparse value on the input's rows, and each transform is one
Lattice op or two:

* ``voxel_to_point`` = ``devoxelize(..., voxel_size=s, origin=-s/2,
  interpolation="trilinear")`` (cell-centred corners half a cell back are
  TorchSparse's corners, with the same renormalised hat weights; at ``s = 1`` a
  ``sparse_reindex``), put back on the points' rows by ``voxelize`` at 1.
  (``trilinear_upsample3d`` computes the same weights but enumerates
  ``(2s - 1)^3`` taps: 8 s at stride 16 on 2,000 rows.)
* ``point_to_voxel`` = ``devoxelize`` (nearest, the point features in point
  order) then ``voxelize(..., voxel_size=s, stride=s, reduction="mean")``,
  read back onto the voxel tensor's rows with ``sparse_reindex``;
* the point branch's ``z.F + transform(z.F)`` is a ``sparse_binary`` add on
  the points' rows.

The ported model takes ``(points, features, batch)`` (the input voxels' float
coordinates, their features and batch indices) and returns the per-point
logits in the points' order, as SPVCNN does.
"""

from __future__ import annotations

import torch

from torch_lattice import ops
from torch_lattice._port_walk import Context, run
from torch_lattice.sparse import SparseTensor

__all__ = ["SPVCNN"]

_Points = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""The points (P, 3), their batch indices (P,) and the active count (1,)."""


class SPVCNN(torch.nn.Module):
    """The ported SPVCNN; children keep the source's names (``stem``, ``up1.0``, ...)."""

    def __init__(self, parts: dict[str, torch.nn.Module]) -> None:
        super().__init__()
        for name, module in parts.items():
            self.add_module(name, module)

    def _part(self, name: str) -> torch.nn.Module:
        module = self._modules[name]
        assert module is not None
        return module

    def _up(self, name: str, index: int) -> torch.nn.Module:
        modules = self._part(name)
        assert isinstance(modules, torch.nn.ModuleList)
        out: torch.nn.Module = modules[index]
        return out

    @staticmethod
    def _to_points(x: SparseTensor, z: SparseTensor, pts: _Points) -> SparseTensor:
        if x.stride == (1, 1, 1):
            return ops.sparse_reindex(x, z)
        s = float(x.stride[0])
        # Cell-centred trilinear with the origin half a cell back reads the corners
        # floor(p / s) * s + {0, s}^3 with hat weights, renormalised: TorchSparse's.
        points, batch, active = pts
        dense = ops.devoxelize(
            points, x, batch, active, voxel_size=s, origin=-s / 2, interpolation="trilinear"
        )
        return ops.sparse_reindex(ops.voxelize(points, dense, batch, active, voxel_size=1.0), z)

    @staticmethod
    def _to_voxels(z: SparseTensor, x: SparseTensor, pts: _Points) -> SparseTensor:
        if x.stride == (1, 1, 1):
            return ops.sparse_reindex(z, x)
        points, batch, active = pts
        dense = ops.devoxelize(points, z, batch, active, voxel_size=1.0, interpolation="nearest")
        pooled = ops.voxelize(
            points, dense, batch, active, voxel_size=float(x.stride[0]), stride=x.stride
        )
        return ops.sparse_reindex(pooled, x)

    def _mix(self, x: SparseTensor, z: SparseTensor, k: int, pts: _Points) -> SparseTensor:
        transforms = self._part("point_transforms")
        assert isinstance(transforms, torch.nn.ModuleList)
        moved = self._to_points(x, z, pts)
        return ops.sparse_binary(moved, run(transforms[k], z, {}), op="add")

    def forward(
        self,
        points: torch.Tensor,
        features: torch.Tensor,
        batch: torch.Tensor,
        active: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-point logits ``(P, num_classes)`` for unique integer-valued ``points``.

        ``active`` (int32 ``(1,)``, default every point) is the count of
        leading points that take part; an exported artifact takes it as its
        fourth input (upstream's point ABI).
        """
        if active is None:
            active = torch.tensor([points.shape[0]], dtype=torch.int32, device=points.device)
        pts: _Points = (points, batch, active)
        ctx: Context = {}
        z = ops.voxelize(points, features, batch, active, voxel_size=1.0)
        x0 = run(self._part("stem"), z, ctx)
        z0 = self._to_points(x0, z, pts)
        x1 = run(self._part("stage1"), self._to_voxels(z0, x0, pts), ctx)
        x2 = run(self._part("stage2"), x1, ctx)
        x3 = run(self._part("stage3"), x2, ctx)
        x4 = run(self._part("stage4"), x3, ctx)
        z1 = self._mix(x4, z0, 0, pts)
        y1 = self._decode("up1", self._to_voxels(z1, x4, pts), x3, ctx)
        y2 = self._decode("up2", y1, x2, ctx)
        z2 = self._mix(y2, z1, 1, pts)
        y3 = self._decode("up3", self._to_voxels(z2, y2, pts), x1, ctx)
        y4 = self._decode("up4", y3, x0, ctx)
        z3 = self._mix(y4, z2, 2, pts)
        logits = run(self._part("classifier"), z3, ctx)
        out: torch.Tensor = ops.devoxelize(
            points, logits, batch, active, voxel_size=1.0, interpolation="nearest"
        )
        return out

    def _decode(self, name: str, y: SparseTensor, skip: SparseTensor, ctx: Context) -> SparseTensor:
        up = run(self._up(name, 0), y, ctx)
        return run(self._up(name, 1), ops.sparse_cat(up, skip, join="left"), ctx)

"""Small reference networks built only from ``torch_lattice.nn``.

Two architectures that cover what deployment of real segmentation networks
needs, kept small enough to train for a few steps on a CPU in seconds:

* :class:`MinkUNet` -- a two-level sparse U-Net: submanifold stem, encoder
  stages entered by ``k=2, s=2`` strided convs, decoder stages entered by
  *target* transposed convs that land exactly on the rows of the matching
  encoder stage, skip connections by ``sparse_cat``, BatchNorm + ReLU after
  every conv, and a per-voxel Linear classifier.  Its output is a
  SparseTensor of logits on the input's rows, in the input's row order.
* :class:`SPVCNN` -- a point-voxel network: points are voxelized, a small
  sparse U-Net runs on the voxels, a per-point Linear branch is computed
  beside it, the two are fused, and the voxel features are read back at the
  points (trilinear devoxelize) for a per-point classifier.  The dialect has
  no dense elementwise add, so the point branch is fused in voxel space: it
  is scattered into the same voxels (mean voxelize, which commutes with the
  Linear) and added there with ``sparse_binary``.  Output: dense ``(P,
  num_classes)`` logits in point order.

Every op they use is traced, so both export with
:func:`torch_lattice.export.save_lattice_model_artifact`; their parameter
names are the artifact's storage keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from torch_lattice import nn
from torch_lattice.sparse import SparseTensor

__all__ = ["SPVCNN", "MinkUNet", "conv_block"]


def conv_block(
    in_channels: int, out_channels: int, kernel_size: int = 3, **factory: Any
) -> nn.Sequential:
    """``SubmConv3d -> BatchNorm -> ReLU``: the unit every stage is made of."""
    return nn.Sequential(
        nn.SubmConv3d(in_channels, out_channels, kernel_size, bias=False, **factory),
        nn.BatchNorm(out_channels, **factory),
        nn.ReLU(),
    )


class _Down(torch.nn.Module):
    """Strided ``k=2, s=2`` conv (halves the resolution) followed by BatchNorm + ReLU."""

    def __init__(self, in_channels: int, out_channels: int, **factory: Any) -> None:
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 2, stride=2, bias=False, **factory)
        self.norm = nn.BatchNorm(out_channels, **factory)
        self.act = nn.ReLU()

    def forward(self, x: SparseTensor) -> SparseTensor:
        out: SparseTensor = self.act(self.norm(self.conv(x)))
        return out


class _Up(torch.nn.Module):
    """Target transposed ``k=2, s=2`` conv onto the skip's rows, then BatchNorm + ReLU."""

    def __init__(self, in_channels: int, out_channels: int, **factory: Any) -> None:
        super().__init__()
        self.conv = nn.TargetConvTranspose3d(
            in_channels, out_channels, 2, stride=2, bias=False, **factory
        )
        self.norm = nn.BatchNorm(out_channels, **factory)
        self.act = nn.ReLU()

    def forward(self, x: SparseTensor, skip: SparseTensor) -> SparseTensor:
        out: SparseTensor = self.act(self.norm(self.conv(x, skip)))
        return out


def _channels(channels: Sequence[int], count: int, what: str) -> tuple[int, ...]:
    out = tuple(int(c) for c in channels)
    if len(out) != count or any(c < 1 for c in out):
        raise ValueError(f"{what}: channels must be {count} positive ints, got {channels!r}")
    return out


class MinkUNet(torch.nn.Module):
    """A two-level sparse U-Net for per-voxel segmentation (input stride 1).

    ``channels = (c0, c1, c2)`` are the widths at strides 1, 2 and 4.
    """

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        channels: Sequence[int] = (32, 32, 64),
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        c0, c1, c2 = _channels(channels, 3, "MinkUNet")
        f = {"device": device, "dtype": dtype}
        self.stem = nn.Sequential(conv_block(in_channels, c0, **f), conv_block(c0, c0, **f))
        self.down1 = _Down(c0, c1, **f)
        self.enc1 = conv_block(c1, c1, **f)
        self.down2 = _Down(c1, c2, **f)
        self.enc2 = conv_block(c2, c2, **f)
        self.up2 = _Up(c2, c1, **f)
        self.dec1 = conv_block(2 * c1, c1, **f)
        self.up1 = _Up(c1, c0, **f)
        self.dec0 = conv_block(2 * c0, c0, **f)
        self.cat = nn.SparseCat(join="left")
        self.head = nn.Linear(c0, num_classes, **f)

    def forward(self, x: SparseTensor) -> SparseTensor:
        """Logits on ``x``'s rows (same order), as a SparseTensor."""
        x0 = self.stem(x)
        x1 = self.enc1(self.down1(x0))
        x2 = self.enc2(self.down2(x1))
        y1 = self.dec1(self.cat(self.up2(x2, x1), x1))
        y0 = self.dec0(self.cat(self.up1(y1, x0), x0))
        out: SparseTensor = self.head(y0)
        return out


class SPVCNN(torch.nn.Module):
    """A small point-voxel CNN: ``forward(points, features, batch, active) -> (P, num_classes)``.

    ``points`` are float32 ``(P, 3)`` positions, ``features`` ``(P,
    in_channels)``, ``batch`` int32 ``(P,)`` and ``active`` the int32 ``(1,)``
    count of leading points that take part (upstream's point ABI; rows past it
    read zeros before the head).  ``channels = (c0, c1)`` are the widths at
    voxel strides 1 and 2.
    """

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        voxel_size: float,
        channels: Sequence[int] = (32, 64),
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        c0, c1 = _channels(channels, 2, "SPVCNN")
        f = {"device": device, "dtype": dtype}
        self.voxelize = nn.Voxelize(voxel_size, "mean")
        self.stem = conv_block(in_channels, c0, **f)
        self.down = _Down(c0, c1, **f)
        self.mid = conv_block(c1, c1, **f)
        self.up = _Up(c1, c0, **f)
        self.point = nn.Linear(in_channels, c0, **f)
        self.point_act = nn.ReLU()
        self.scatter = nn.Voxelize(voxel_size, "mean")
        self.fuse = nn.SparseAdd(join="left")
        self.fused = conv_block(c0, c0, **f)
        self.devoxelize = nn.Devoxelize(voxel_size, "trilinear")
        self.head = nn.Linear(c0, num_classes, **f)

    def forward(
        self,
        points: torch.Tensor,
        features: torch.Tensor,
        batch: torch.Tensor,
        active: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-point logits, in the order of ``points``.

        ``active`` defaults to every point; an exported artifact takes it as
        its fourth input.
        """
        if active is None:
            active = torch.tensor([points.shape[0]], dtype=torch.int32, device=points.device)
        v0 = self.voxelize(points, features, batch, active)
        x0 = self.stem(v0)
        y0 = self.up(self.mid(self.down(x0)), x0)
        point_branch = self.scatter(points, self.point_act(self.point(features)), batch, active)
        fused = self.fused(self.fuse(y0, point_branch))
        logits: torch.Tensor = self.head(self.devoxelize(fused, points, batch, active))
        return logits

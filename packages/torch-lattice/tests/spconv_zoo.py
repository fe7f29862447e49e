"""The field's spconv detector backbones, written from
the papers / OpenPCDet configs (layer widths, kernels, strides, paddings,
grid), plus a LiDAR-like scan generator whose voxels reach every face of the
grid.  Real spconv 2.x (``spconv.pytorch``, CPU, one thread) runs them.

Models (indices are OpenPCDet's ``(batch, z, y, x)``; spatial shapes are
``[D, H, W] = [z, y, x]``):

* ``VoxelBackBone8x``   -- SECOND / PV-RCNN / Voxel R-CNN 3D backbone.
* ``VoxelResBackBone8x`` -- CenterPoint's residual variant (SparseBasicBlock,
  whose SubM convs carry a bias because a norm follows: OpenPCDet's default).
* ``HeightCompression`` -- ``dense()`` then ``(N, C, D, H, W) -> (N, C*D, H, W)``.
* ``UNetV2``            -- PartA2's encoder/decoder: VoxelBackBone8x's encoder,
  UR blocks (lateral SparseBasicBlock, concat, merge conv, channel reduction,
  residual add) and ``SparseInverseConv3d`` decoders paired by ``indice_key``.

The oracle side of ``test_port_grid.py`` (no test lives here).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
import spconv.pytorch as spconv
import torch
from torch import nn

KITTI_SHAPE = [41, 1600, 1408]  # z, y, x  (grid_size [1408, 1600, 40] + [1, 0, 0] on z)
KITTI_RANGE = (0.0, -40.0, -3.0, 70.4, 40.0, 1.0)  # x0, y0, z0, x1, y1, z1 (metres)
KITTI_VOXEL = (0.05, 0.05, 0.1)  # x, y, z (metres)
SMALL_SHAPE = [41, 200, 176]  # same range at 0.4 x 0.4 x 0.1 m


def _bn(c: int) -> nn.BatchNorm1d:
    return nn.BatchNorm1d(c, eps=1e-3, momentum=0.01)  # OpenPCDet's norm_fn


def post_act_block(
    c_in: int, c_out: int, k: Any, key: str, stride: Any = 1, padding: Any = 0, kind: str = "subm"
) -> spconv.SparseSequential:
    """conv -> BN -> ReLU; ``kind`` subm | spconv | inverseconv (all bias-free)."""
    if kind == "subm":
        conv = spconv.SubMConv3d(c_in, c_out, k, bias=False, indice_key=key)
    elif kind == "spconv":
        conv = spconv.SparseConv3d(
            c_in, c_out, k, stride=stride, padding=padding, bias=False, indice_key=key
        )
    elif kind == "inverseconv":
        conv = spconv.SparseInverseConv3d(c_in, c_out, k, indice_key=key, bias=False)
    else:
        raise ValueError(kind)
    return spconv.SparseSequential(conv, _bn(c_out), nn.ReLU())


def conv_out_block(c_in: int, last_pad: Any) -> spconv.SparseSequential:
    """OpenPCDet's ``conv_out``: (3, 1, 1) stride (2, 1, 1) down to 128 channels, BN, ReLU."""
    conv = spconv.SparseConv3d(
        c_in,
        128,
        (3, 1, 1),
        stride=(2, 1, 1),
        padding=last_pad,
        bias=False,
        indice_key="spconv_down2",
    )
    return spconv.SparseSequential(conv, _bn(128), nn.ReLU())


class SparseBasicBlock(spconv.SparseModule):
    """ResNet basic block of two 3x3x3 SubM convs sharing ``indice_key``; identity skip."""

    def __init__(self, c_in: int, c_out: int, key: str, bias: bool = True) -> None:
        super().__init__()
        self.conv1 = spconv.SubMConv3d(c_in, c_out, 3, padding=1, bias=bias, indice_key=key)
        self.bn1 = _bn(c_out)
        self.relu = nn.ReLU()
        self.conv2 = spconv.SubMConv3d(c_out, c_out, 3, padding=1, bias=bias, indice_key=key)
        self.bn2 = _bn(c_out)

    def forward(self, x: spconv.SparseConvTensor) -> spconv.SparseConvTensor:
        out = self.conv1(x)
        out = out.replace_feature(self.relu(self.bn1(out.features)))
        out = self.conv2(out)
        out = out.replace_feature(self.bn2(out.features))
        return out.replace_feature(self.relu(out.features + x.features))


class VoxelBackBone8x(nn.Module):
    """16-16-32-64-64 channels, three k3 s2 downsamplings (the last pads z by 0), conv_out."""

    STAGES = ("conv_input", "conv1", "conv2", "conv3", "conv4", "conv_out")

    def __init__(self, c_in: int = 4, last_pad: int = 0) -> None:
        super().__init__()
        b = post_act_block
        self.conv_input = spconv.SparseSequential(
            spconv.SubMConv3d(c_in, 16, 3, padding=1, bias=False, indice_key="subm1"),
            _bn(16),
            nn.ReLU(),
        )
        self.conv1 = spconv.SparseSequential(b(16, 16, 3, "subm1", padding=1))
        self.conv2 = spconv.SparseSequential(
            b(16, 32, 3, "spconv2", 2, 1, "spconv"),
            b(32, 32, 3, "subm2", padding=1),
            b(32, 32, 3, "subm2", padding=1),
        )
        self.conv3 = spconv.SparseSequential(
            b(32, 64, 3, "spconv3", 2, 1, "spconv"),
            b(64, 64, 3, "subm3", padding=1),
            b(64, 64, 3, "subm3", padding=1),
        )
        self.conv4 = spconv.SparseSequential(
            b(64, 64, 3, "spconv4", 2, (0, 1, 1), "spconv"),
            b(64, 64, 3, "subm4", padding=1),
            b(64, 64, 3, "subm4", padding=1),
        )
        self.conv_out = conv_out_block(64, last_pad)

    def stages(self, x: spconv.SparseConvTensor) -> dict[str, spconv.SparseConvTensor]:
        out = {}
        for name in self.STAGES:
            x = getattr(self, name)(x)
            out[name] = x
        return out

    def forward(self, x: spconv.SparseConvTensor) -> spconv.SparseConvTensor:
        return self.stages(x)["conv_out"]


class VoxelResBackBone8x(VoxelBackBone8x):
    """CenterPoint's residual backbone: 16-32-64-128 channels, two basic blocks per stage."""

    def __init__(self, c_in: int = 4, last_pad: int = 0, bias: bool = True) -> None:
        nn.Module.__init__(self)
        b, r = post_act_block, partial(SparseBasicBlock, bias=bias)
        self.conv_input = spconv.SparseSequential(
            spconv.SubMConv3d(c_in, 16, 3, padding=1, bias=False, indice_key="subm1"),
            _bn(16),
            nn.ReLU(),
        )
        self.conv1 = spconv.SparseSequential(r(16, 16, "res1"), r(16, 16, "res1"))
        self.conv2 = spconv.SparseSequential(
            b(16, 32, 3, "spconv2", 2, 1, "spconv"), r(32, 32, "res2"), r(32, 32, "res2")
        )
        self.conv3 = spconv.SparseSequential(
            b(32, 64, 3, "spconv3", 2, 1, "spconv"), r(64, 64, "res3"), r(64, 64, "res3")
        )
        self.conv4 = spconv.SparseSequential(
            b(64, 128, 3, "spconv4", 2, (0, 1, 1), "spconv"),
            r(128, 128, "res4"),
            r(128, 128, "res4"),
        )
        self.conv_out = conv_out_block(128, last_pad)


class HeightCompression(nn.Module):
    """spconv ``dense()`` (N, C, D, H, W), then fold D into channels: (N, C*D, H, W)."""

    def forward(self, x: spconv.SparseConvTensor) -> torch.Tensor:
        dense = x.dense()  # channels first; indices (b, z, y, x) -> [b, :, z, y, x]
        n, c, d, h, w = dense.shape
        return dense.view(n, c * d, h, w)  # channel index = c_idx * D + z_idx


class UNetV2(VoxelBackBone8x):
    """PartA2's U-Net: the VoxelBackBone8x encoder and four UR decoder blocks.

    UR block (lateral L, bottom B): t = basic_block(L); m = merge_conv(cat(B, t));
    r = sum of adjacent channel pairs of cat(B, t); out = inverse_conv(m + r).
    ``cat`` pairs rows by position: B and L share rows (B came back to L's rows).
    """

    def __init__(self, c_in: int = 4, last_pad: int = 0) -> None:
        super().__init__(c_in, last_pad)
        b = post_act_block
        bb = partial(SparseBasicBlock, bias=False)  # spconv_unet.py's block is bias-free
        self.conv_up_t4 = bb(64, 64, "subm4")
        self.conv_up_m4 = b(128, 64, 3, "subm4", padding=1)
        self.inv_conv4 = b(64, 64, 3, "spconv4", kind="inverseconv")
        self.conv_up_t3 = bb(64, 64, "subm3")
        self.conv_up_m3 = b(128, 64, 3, "subm3", padding=1)
        self.inv_conv3 = b(64, 32, 3, "spconv3", kind="inverseconv")
        self.conv_up_t2 = bb(32, 32, "subm2")
        self.conv_up_m2 = b(64, 32, 3, "subm2")
        self.inv_conv2 = b(32, 16, 3, "spconv2", kind="inverseconv")
        self.conv_up_t1 = bb(16, 16, "subm1")
        self.conv_up_m1 = b(32, 16, 3, "subm1")
        self.conv5 = spconv.SparseSequential(b(16, 16, 3, "subm1", padding=1))

    @staticmethod
    def _ur(lateral, bottom, conv_t, conv_m, conv_inv):
        t = conv_t(lateral)
        x = t.replace_feature(torch.cat((bottom.features, t.features), 1))
        m = conv_m(x)
        n, _c = x.features.shape
        reduced = x.features.view(n, m.features.shape[1], -1).sum(2)
        return conv_inv(x.replace_feature(m.features + reduced))

    def stages(self, x: spconv.SparseConvTensor) -> dict[str, spconv.SparseConvTensor]:
        out = super().stages(x)
        c1, c2, c3, c4 = (out[k] for k in ("conv1", "conv2", "conv3", "conv4"))
        out["up4"] = self._ur(c4, c4, self.conv_up_t4, self.conv_up_m4, self.inv_conv4)
        out["up3"] = self._ur(c3, out["up4"], self.conv_up_t3, self.conv_up_m3, self.inv_conv3)
        out["up2"] = self._ur(c2, out["up3"], self.conv_up_t2, self.conv_up_m2, self.inv_conv2)
        out["up1"] = self._ur(c1, out["up2"], self.conv_up_t1, self.conv_up_m1, self.conv5)
        return out

    def forward(self, x):
        s = self.stages(x)
        return s["conv_out"], s["up1"]


# ---------------------------------------------------------------------------
# Weights: random but well-conditioned, BN statistics non-trivial.


def randomise(model: nn.Module, seed: int) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, spconv.conv.SparseConvolution):
                fan_in = m.weight.numel() // m.out_channels
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * math.sqrt(2.0 / fan_in))
                if m.bias is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
            elif isinstance(m, nn.BatchNorm1d):
                assert m.weight is not None and m.bias is not None
                assert m.running_mean is not None and m.running_var is not None
                c = m.num_features
                m.weight.copy_(1 + 0.1 * torch.randn(c, generator=gen))
                m.bias.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_var.copy_(1 + 0.2 * torch.rand(c, generator=gen))
    return model


def oracle_mode(model: nn.Module) -> nn.Module:
    """BN in eval (running stats); spconv convs in train mode.

    spconv 2.3.8 on CPU fails for a conv *with bias* in eval(); in
    train() it adds the bias itself.  Run under ``torch.no_grad()``.
    """
    model.eval()
    for m in model.modules():
        if isinstance(m, spconv.conv.SparseConvolution):
            m.train()
    return model


# ---------------------------------------------------------------------------
# LiDAR-like scans.


def _raycast(
    rng: np.random.Generator, n_beams: int = 64, n_az: int = 2000, car_count: int = 8
) -> np.ndarray:
    """Points (x, y, z, intensity) of a 64-beam sensor at the origin, 1.73 m above the
    ground, front half (azimuth -90..90 deg), against ground, side walls at y = +-39.99,
    a far wall at x = 70.39, boxes (cars) and poles.  Density falls with range."""
    elev = np.deg2rad(np.linspace(-24.8, 2.0, n_beams))
    az = np.deg2rad(np.linspace(-90.0, 90.0, n_az)) + rng.uniform(0, 1e-3)
    e, a = np.meshgrid(elev, az, indexing="ij")
    d = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1).reshape(-1, 3)
    t = np.full(len(d), np.inf)

    def hit_plane(axis: int, value: float, lo: np.ndarray, hi: np.ndarray) -> None:
        with np.errstate(divide="ignore", invalid="ignore"):
            tt = value / d[:, axis]
        p = d * tt[:, None]
        ok = (tt > 0) & np.all((p >= lo) & (p <= hi), 1)
        np.minimum.at(t, np.nonzero(ok)[0], tt[ok])

    big = 1e9
    hit_plane(2, -1.73, np.array([-big, -big, -big]), np.array([big, big, big]))  # ground
    for y in (39.99, -39.99):  # walls, 4.5 m high
        hit_plane(1, y, np.array([-big, -big, -1.73]), np.array([big, big, 2.8]))
    hit_plane(0, 70.39, np.array([-big, -big, -1.73]), np.array([big, big, 2.8]))  # far wall
    for _ in range(car_count):  # axis-aligned cars, 4 x 1.8 x 1.5 m
        cx, cy = rng.uniform(5, 65), rng.uniform(-30, 30)
        lo = np.array([cx - 2, cy - 0.9, -1.73])
        hi = np.array([cx + 2, cy + 0.9, -0.23])
        for axis in range(3):
            for v in (lo[axis], hi[axis]):
                hit_plane(axis, v, lo - 1e-6, hi + 1e-6)
    for _ in range(6):  # poles: 0.3 m boxes, 6 m high (reach the top of the range)
        cx, cy = rng.uniform(3, 60), rng.uniform(-35, 35)
        lo = np.array([cx - 0.15, cy - 0.15, -1.73])
        hi = np.array([cx + 0.15, cy + 0.15, 4.3])
        for axis in range(2):
            for v in (lo[axis], hi[axis]):
                hit_plane(axis, v, lo - 1e-6, hi + 1e-6)
    ok = np.isfinite(t) & (t < 120)
    pts = d[ok] * t[ok, None] + rng.normal(0, 0.01, (ok.sum(), 3))
    intensity = rng.uniform(0, 1, (len(pts), 1))
    return np.concatenate([pts, intensity], 1).astype(np.float32)


def lidar_scan(
    shape_zyx: list[int], batch: int = 2, seed: int = 0, faces: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Voxel indices (b, z, y, x) int32 and mean features (x, y, z, intensity).

    The KITTI point-cloud range is quantised onto ``shape_zyx`` (the voxel size
    follows from the shape; z keeps OpenPCDet's extra layer: 40 layers of
    0.1 m in a shape of 41).  With ``faces`` a thin sprinkle of voxels is put
    on each of the six faces of the *declared* shape (index 0 and ``shape-1``
    on every axis, the z = 40 layer included), as the issue's bar asks.
    """
    rng = np.random.default_rng(seed)
    x0, y0, z0, x1, y1, z1 = KITTI_RANGE
    D, H, W = shape_zyx
    vs = np.array([(x1 - x0) / W, (y1 - y0) / H, (z1 - z0) / (D - 1)])
    all_idx, all_feat = [], []
    for b in range(batch):
        pts = _raycast(rng)
        ijk = np.floor((pts[:, :3] - np.array([x0, y0, z0])) / vs).astype(np.int64)  # x, y, z
        keep = np.all((ijk >= 0) & (ijk < np.array([W, H, D - 1])), 1)
        ijk, feat = ijk[keep], pts[keep]
        if faces:
            sides = []
            for axis, size in enumerate((W, H, D)):
                for side in (0, size - 1):
                    n = 60
                    f = np.stack([rng.integers(0, s, n) for s in (W, H, D)], 1)
                    f[:, axis] = side
                    sides.append(f)
            corners = np.array(
                [[x, y, z] for x in (0, W - 1) for y in (0, H - 1) for z in (0, D - 1)]
            )
            extra = np.concatenate([*sides, corners])
            centre = (extra + 0.5) * vs + np.array([x0, y0, z0])
            ijk = np.concatenate([ijk, extra])
            feat = np.concatenate(
                [
                    feat,
                    np.concatenate([centre, rng.uniform(0, 1, (len(extra), 1))], 1).astype(
                        np.float32
                    ),
                ]
            )
        key = (ijk[:, 2] * H + ijk[:, 1]) * W + ijk[:, 0]
        uniq, inv = np.unique(key, return_inverse=True)
        mean = np.zeros((len(uniq), 4))
        np.add.at(mean, inv, feat)
        mean /= np.bincount(inv)[:, None]
        zyx = np.stack([uniq // (H * W), (uniq // W) % H, uniq % W], 1)
        all_idx.append(np.concatenate([np.full((len(uniq), 1), b), zyx], 1))
        all_feat.append(mean)
    idx = torch.from_numpy(np.concatenate(all_idx)).to(torch.int32)
    feats = torch.from_numpy(np.concatenate(all_feat)).to(torch.float32)
    return idx, feats


def cube_scan(
    n: int = 64, batch: int = 2, seed: int = 3, rows: int = 1500, margin: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """A 64^3 cloud: random voxels (LiDAR-like: denser near x = 0) plus voxels on all faces."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(batch):
        r = rng.exponential(n / 4, rows).clip(0, n - 1)  # density falls with x
        xyz = np.stack([r, rng.uniform(0, n, rows), rng.uniform(0, n, rows)], 1).astype(int)
        if margin is None:
            for axis in range(3):
                for side in (0, n - 1):
                    f = rng.integers(0, n, (40, 3))
                    f[:, axis] = side
                    xyz = np.concatenate([xyz, f])
        else:
            xyz = xyz.clip(margin, n - 1 - margin)
        xyz = np.unique(xyz, axis=0)
        out.append(np.concatenate([np.full((len(xyz), 1), b), xyz[:, ::-1]], 1))  # b, z, y, x
    idx = torch.from_numpy(np.concatenate(out)).to(torch.int32)
    feats = torch.from_numpy(rng.normal(0, 1, (len(idx), 4))).to(torch.float32)
    return idx, feats


PCDET_TYPES: dict[type, str] = {
    SparseBasicBlock: "SparseBasicBlock",
    VoxelBackBone8x: "VoxelBackBone8x",
    VoxelResBackBone8x: "VoxelResBackBone8x",
    UNetV2: "UNetV2",
    HeightCompression: "HeightCompression",
}
"""OpenPCDet's classes as written here, for ``from_spconv(..., types=PCDET_TYPES)``."""

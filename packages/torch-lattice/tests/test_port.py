"""``torch_lattice.port``: whole spconv and TorchSparse model definitions.

* spconv: an OpenPCDet-style backbone (``VoxelBackBone8x``'s layout:
  SubMConv3d stem, k3 s2 p1 SparseConv3d stages with BatchNorm1d and ReLU, a
  (3,1,1) s(2,1,1) output conv, ``(batch, z, y, x)`` indices) and an
  encoder/decoder with SparseInverseConv3d, built from the real spconv
  classes; the oracle is spconv itself on CPU (one thread, eval mode).
* TorchSparse: ``SparseResUNet42`` built from classes with TorchSparse's names
  (``torchsparse_layers``); the oracle is a NumPy forward of the same module
  tree through ``framework_reference``'s TorchSparse 2.1 kernel maps.
"""

from __future__ import annotations

from typing import Any

import framework_reference as ref
import numpy as np
import pytest
import spconv.pytorch as spconv
import torch
import torchsparse_layers as ts
from torch_lattice import SparseTensor, canonical_order
from torch_lattice.port import PortError, from_spconv, from_torchsparse

pytestmark = pytest.mark.usefixtures("one_thread")


def _sorted(coords: Any, feats: Any) -> tuple[torch.Tensor, torch.Tensor]:
    c = torch.as_tensor(coords).to(torch.int32)
    perm = canonical_order(c)
    return c[perm], torch.as_tensor(feats, dtype=torch.float32)[perm]


def _max_error(ours: SparseTensor, coords: Any, feats: Any) -> float:
    want_c, want_f = _sorted(coords, feats)
    got_c, got_f = _sorted(ours.coords, ours.feats)
    assert torch.equal(got_c, want_c)
    return float((got_f - want_f).abs().max())


def _cloud(seed: int, low: int, high: int, rows: int = 400, channels: int = 4) -> SparseTensor:
    gen = torch.Generator().manual_seed(seed)
    xyz = torch.randint(low, high, (rows, 3), generator=gen)
    batch = torch.randint(0, 2, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), channels, generator=gen))


# ---------------------------------------------------------------------------
# spconv


def _block(c_in: int, c_out: int, k: Any, s: Any, p: Any, key: str, kind: str) -> Any:
    conv = (
        spconv.SubMConv3d(c_in, c_out, k, padding=p, bias=False, indice_key=key)
        if kind == "subm"
        else spconv.SparseConv3d(c_in, c_out, k, stride=s, padding=p, bias=False, indice_key=key)
    )
    return spconv.SparseSequential(
        conv, torch.nn.BatchNorm1d(c_out, eps=1e-3, momentum=0.01), torch.nn.ReLU()
    )


class VoxelBackBone8x(torch.nn.Module):
    """OpenPCDet's layout, narrowed: indices are (batch, z, y, x)."""

    def __init__(self, c_in: int = 4) -> None:
        super().__init__()
        self.conv_input = spconv.SparseSequential(
            spconv.SubMConv3d(c_in, 16, 3, padding=1, bias=False, indice_key="subm1"),
            torch.nn.BatchNorm1d(16, eps=1e-3, momentum=0.01),
            torch.nn.ReLU(),
        )
        self.conv1 = spconv.SparseSequential(_block(16, 16, 3, 1, 1, "subm1", "subm"))
        self.conv2 = spconv.SparseSequential(
            _block(16, 32, 3, 2, 1, "spconv2", "spconv"), _block(32, 32, 3, 1, 1, "subm2", "subm")
        )
        self.conv3 = spconv.SparseSequential(
            _block(32, 64, 3, 2, 1, "spconv3", "spconv"), _block(64, 64, 3, 1, 1, "subm3", "subm")
        )
        self.conv4 = spconv.SparseSequential(
            _block(64, 64, 3, 2, (0, 1, 1), "spconv4", "spconv"),
            _block(64, 64, 3, 1, 1, "subm4", "subm"),
        )
        self.conv_out = spconv.SparseSequential(
            spconv.SparseConv3d(64, 128, (3, 1, 1), stride=(2, 1, 1), padding=0, bias=False),
            torch.nn.BatchNorm1d(128, eps=1e-3, momentum=0.01),
            torch.nn.ReLU(),
        )

    def forward(self, x: Any) -> Any:
        for stage in (self.conv_input, self.conv1, self.conv2, self.conv3, self.conv4):
            x = stage(x)
        return self.conv_out(x)


def _spconv_out_xyz(
    out: Any, stride_zyx: tuple[int, int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """spconv (b, z, y, x) output indices as Lattice physical (b, x, y, z) rows."""
    idx = out.indices.to(torch.int64)
    sz, sy, sx = stride_zyx
    coords = torch.stack([idx[:, 0], idx[:, 3] * sx, idx[:, 2] * sy, idx[:, 1] * sz], 1)
    return coords, out.features


def _crop(y: SparseTensor, shape_zyx: list[int]) -> SparseTensor:
    """The rows spconv can hold: logical coords inside [0, out_spatial_shape)."""
    logical = y.coords[:, 1:] // torch.tensor(y.stride)
    bounds = torch.tensor([shape_zyx[2], shape_zyx[1], shape_zyx[0]])
    keep = ((logical >= 0) & (logical < bounds)).all(1)
    return SparseTensor(y.coords[keep], y.feats[keep], stride=y.stride)


def test_spconv_voxel_backbone_matches_spconv() -> None:
    torch.manual_seed(1)
    theirs = ts.randomise(VoxelBackBone8x(), 2)
    ours = from_spconv(theirs, axes="zyx", types={VoxelBackBone8x: "VoxelBackBone8x"}).eval()
    x = _cloud(3, 20, 100)  # Lattice (b, x, y, z)
    shape_zyx = [128, 128, 128]
    zyx = x.coords[:, [0, 3, 2, 1]].contiguous()
    with torch.no_grad():
        want = theirs(spconv.SparseConvTensor(x.feats, zyx, shape_zyx, 2))
        got = _crop(ours(x), list(want.spatial_shape))
    assert got.stride == (8, 8, 16)
    err = _max_error(got, *_spconv_out_xyz(want, (16, 8, 8)))
    assert err < 1e-5, err


def test_spconv_encoder_decoder_with_inverse_convs() -> None:
    torch.manual_seed(4)
    theirs = spconv.SparseSequential(
        spconv.SubMConv3d(4, 8, 3, bias=False, indice_key="s1"),
        torch.nn.BatchNorm1d(8),
        torch.nn.ReLU(),
        spconv.SparseConv3d(8, 16, 3, stride=2, padding=1, bias=False, indice_key="d1"),
        spconv.SparseConv3d(16, 16, 2, stride=2, bias=False, indice_key="d2"),
        spconv.SubMConv3d(16, 16, 1, bias=False),
        spconv.SparseInverseConv3d(16, 16, 2, bias=False, indice_key="d2"),
        spconv.SparseInverseConv3d(16, 8, 3, bias=False, indice_key="d1"),
        torch.nn.LeakyReLU(0.1),
    )
    ts.randomise(theirs, 5)
    ours = from_spconv(theirs).eval()
    x = _cloud(6, 16, 48)
    with torch.no_grad():
        want = theirs(spconv.SparseConvTensor(x.feats, x.coords, [64] * 3, 2))
        got = ours(x)
    assert _max_error(got, want.indices, want.features) < 1e-5


def test_spconv_port_refuses_what_it_cannot_rebuild() -> None:
    bad = spconv.SparseSequential(spconv.SubMConv3d(4, 8, 3), spconv.ToDense())
    with pytest.raises(PortError, match=r"^1: ToDense writes a dense array.*pass spatial_shape="):
        from_spconv(bad)
    orphan = spconv.SparseSequential(spconv.SparseInverseConv3d(4, 8, 3, indice_key="nope"))
    with pytest.raises(PortError, match=r"^0: SparseInverseConv3d with indice_key 'nope'"):
        from_spconv(orphan)


# ---------------------------------------------------------------------------
# TorchSparse


class _Reference:
    """What TorchSparse 2.1 computes for a ``torchsparse_layers`` tree, in NumPy."""

    def __init__(self) -> None:
        self.by_stride: dict[int, np.ndarray] = {}

    def run(self, m: torch.nn.Module, c: np.ndarray, f: np.ndarray, t: int) -> tuple[Any, Any, int]:
        self.by_stride.setdefault(t, c)
        if isinstance(m, torch.nn.Sequential):
            for child in m:
                c, f, t = self.run(child, c, f, t)
                self.by_stride.setdefault(t, c)
            return c, f, t
        if isinstance(m, ts.SparseResBlock):
            _, main, _ = self.run(m.main, c, f, t)
            _, short, _ = self.run(m.shortcut, c, f, t)
            return c, np.maximum(main + short, 0), t
        if isinstance(m, torch.nn.Identity):
            return c, f, t
        if isinstance(m, ts.ReLU):
            return c, np.maximum(f, 0), t
        if isinstance(m, ts.BatchNorm):
            assert m.running_mean is not None and m.running_var is not None  # track_running_stats
            mean, var = m.running_mean.double().numpy(), m.running_var.double().numpy()
            w, b = m.weight.detach().double().numpy(), m.bias.detach().double().numpy()
            return c, (f - mean) / np.sqrt(var + m.eps) * w + b, t
        assert isinstance(m, ts.Conv3d), type(m).__name__
        kernel = m.kernel.detach().double().numpy()
        kernel = kernel[None] if kernel.ndim == 2 else kernel
        s = m.stride[0]
        if m.transposed:
            fine = self.by_stride[t // s]
            out = ref.transposed_conv(
                "torchsparse-2.1", c, f, kernel, m.kernel_size, fine, fine_tensor_stride=t // s
            )
            return fine, out, t // s
        c2, out = ref.forward_conv(
            "torchsparse-2.1", c, f, kernel, m.kernel_size, stride=s, tensor_stride=t
        )
        return c2, out, t * s

    def unet(self, m: ts.SparseResUNet, c: np.ndarray, f: np.ndarray) -> list[tuple[Any, Any]]:
        c, f, t = self.run(m.stem, c, f, 1)

        def level(c: Any, f: Any, t: int, depth: int) -> list[tuple[Any, Any, int]]:
            if depth == 4:
                return [(c, f, t)]
            inner = level(*self.run(m.encoders[depth], c, f, t), depth + 1)
            dec = m.decoders[3 - depth]
            assert isinstance(dec, torch.nn.ModuleDict)
            uc, uf, _ = self.run(dec["upsample"], *inner[-1])
            assert np.array_equal(uc, c)
            return [(c, f, t), *inner, self.run(dec["fuse"], c, np.concatenate([uf, f], 1), t)]

        return [(c, f) for c, f, _ in level(c, f, t, 0)]


def test_torchsparse_resunet42_matches_the_reference() -> None:
    torch.manual_seed(7)
    model = ts.randomise(ts.SparseResUNet42(width=0.25), 8)
    ported = from_torchsparse(model, version="2.1", types=ts.TYPES).eval()
    x = _cloud(9, 0, 32, rows=600)
    with torch.no_grad():
        outputs = ported(x)
    want = _Reference().unet(model, x.coords.numpy().astype(np.int64), x.feats.double().numpy())
    assert len(outputs) == len(want) == 9
    errors = [_max_error(got, c, f) for got, (c, f) in zip(outputs, want, strict=True)]
    assert max(errors) < 1e-4, errors


def test_torchsparse_port_refuses_with_the_module_path() -> None:
    model = torch.nn.Sequential(ts.Conv3d(4, 8, 3), ts.Conv3d(8, 8, 3, stride=2))
    with pytest.raises(PortError, match=r"^1: a strided TorchSparse conv with stride"):
        from_torchsparse(model, types=ts.TYPES)
    gen = torch.nn.Sequential(
        torch.nn.Sequential(ts.Conv3d(4, 8, 2, 2, transposed=True, generative=True))
    )
    with pytest.raises(PortError, match=r"^0\.0: TorchSparse generative convs are not ported"):
        from_torchsparse(gen, types=ts.TYPES)
    with pytest.raises(PortError, match=r"version must be"):
        from_torchsparse(model, version="1.4", types=ts.TYPES)

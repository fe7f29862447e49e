"""spconv's grid bounds and dense hand-off, ported; real spconv 2.3.8 (CPU, 1 thread) is the oracle.

The models are OpenPCDet's ``VoxelBackBone8x``, CenterPoint's
``VoxelResBackBone8x`` (with height compression) and PartA2's ``UNetV2``
(``spconv_zoo.py``), on scans whose voxels touch every face of the grid, with
two batch items.  spconv drops the outputs of strided convs that leave the
layer's output shape; the port must emit ``sparse_crop`` where it does, so
coordinates are identical and every feature agrees within 1e-4 relative.
"""

from __future__ import annotations

import warnings

import pytest
import spconv.pytorch as spconv
import spconv_zoo as zoo
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.port import PortError, from_spconv

pytestmark = pytest.mark.usefixtures("one_thread")


def _lattice_input(idx: torch.Tensor, feats: torch.Tensor) -> SparseTensor:
    """spconv's (b, z, y, x) indices as Lattice (b, x, y, z) rows at stride 1."""
    return SparseTensor(idx[:, [0, 3, 2, 1]].contiguous(), feats)


def _rows(y: SparseTensor) -> dict[tuple[int, ...], torch.Tensor]:
    logical = y.support.logical
    return {tuple(r): f for r, f in zip(logical.tolist(), y.feats, strict=True)}


def _assert_same(
    ours: SparseTensor, theirs: spconv.SparseConvTensor, what: str
) -> tuple[int, float]:
    """Identical rows (logical b, x, y, z) and features within 1e-4 relative."""
    i = theirs.indices.long()
    want = torch.stack([i[:, 0], i[:, 3], i[:, 2], i[:, 1]], 1)
    order_t = sorted(range(len(want)), key=lambda r: tuple(want[r].tolist()))
    got = ours.support.logical
    order_o = sorted(range(len(got)), key=lambda r: tuple(got[r].tolist()))
    assert got.shape[0] == want.shape[0], f"{what}: {got.shape[0]} rows, spconv {want.shape[0]}"
    assert torch.equal(got[order_o], want[order_t]), f"{what}: coordinates differ"
    a, b = ours.feats.detach()[order_o], theirs.features.detach()[order_t]
    scale = b.abs().max().clamp(min=1.0)
    err = float((a - b).abs().max()) if len(a) else 0.0
    assert err <= 1e-4 * float(scale), f"{what}: max error {err} (outputs up to {scale})"
    return int(got.shape[0]), err


def _model(kind: str, seed: int = 0) -> torch.nn.Module:
    model = {"plain": zoo.VoxelBackBone8x, "res": zoo.VoxelResBackBone8x, "unet": zoo.UNetV2}[
        kind
    ]()
    return zoo.oracle_mode(zoo.randomise(model, seed))


def _oracle(model: torch.nn.Module, idx: torch.Tensor, feats: torch.Tensor, shape: list[int]):
    x = spconv.SparseConvTensor(feats, idx, shape, int(idx[:, 0].max()) + 1)
    with torch.no_grad():
        return model(x)


def _ported(model: torch.nn.Module, shape: list[int], batch: int = 2) -> torch.nn.Module:
    return from_spconv(
        model, axes="zyx", spatial_shape=shape, batch_size=batch, types=zoo.PCDET_TYPES
    ).eval()


# -- the 64^3 example of the issue: fails without the bounds -----------------------------


def test_cube_64_border_matches_spconv() -> None:
    """VoxelBackBone8x on 64^3 with voxels on every face: without bounds 961 vs 384 rows."""
    idx, feats = zoo.cube_scan()
    model, shape = _model("plain"), [64, 64, 64]
    want = _oracle(model, idx, feats, shape)
    with torch.no_grad():
        got = _ported(model, shape)(_lattice_input(idx, feats))
    rows, _ = _assert_same(got, want, "conv_out")
    assert rows == want.indices.shape[0] > 0


def test_cube_64_margin_also_needs_bounds() -> None:
    """Inputs 8 voxels from every face: conv4's z padding 0 still drops a layer in spconv."""
    idx, feats = zoo.cube_scan(margin=8)
    model, shape = _model("plain"), [64, 64, 64]
    with torch.no_grad():
        got = _ported(model, shape)(_lattice_input(idx, feats))
    _assert_same(got, _oracle(model, idx, feats, shape), "conv_out")


def test_port_without_grid_warns() -> None:
    with pytest.warns(UserWarning, match="cannot guarantee spconv's rows"):
        from_spconv(_model("plain"), axes="zyx", types=zoo.PCDET_TYPES)


def test_extra_stage_is_refused() -> None:
    model = _model("plain")
    model.conv5 = spconv.SparseSequential(spconv.SubMConv3d(128, 128, 3, indice_key="x"))
    with pytest.raises(PortError, match="conv5"):
        from_spconv(model, axes="zyx", spatial_shape=[64, 64, 64], types=zoo.PCDET_TYPES)


def test_input_outside_grid_is_an_error() -> None:
    idx, feats = zoo.cube_scan()
    ported = _ported(_model("plain"), [32, 64, 64])
    with pytest.raises(ValueError, match="outside the grid"):
        ported(_lattice_input(idx, feats))


# -- the zoo on a small grid (default run) and on KITTI's (slow) ------------------------------


def _bev_case(kind: str, shape: list[int], seed: int) -> None:
    idx, feats = zoo.lidar_scan(shape, batch=2, seed=seed, faces=True)
    model = _model(kind, seed)
    want_sparse = _oracle(model, idx, feats, shape)
    want_bev = zoo.HeightCompression()(want_sparse)
    ported = from_spconv(
        torch.nn.Sequential(model, zoo.HeightCompression()),
        axes="zyx",
        spatial_shape=shape,
        batch_size=2,
        types=zoo.PCDET_TYPES,
    ).eval()
    backbone = _ported(model, shape)
    x = _lattice_input(idx, feats)
    with torch.no_grad():
        got_sparse = backbone(x)
        got_bev = ported(x)
    _assert_same(got_sparse, want_sparse, f"{kind} conv_out")
    assert got_bev.shape == want_bev.shape
    scale = float(want_bev.abs().max().clamp(min=1.0))
    assert float((got_bev - want_bev).abs().max()) <= 1e-4 * scale


@pytest.mark.parametrize("kind", ["plain", "res"])
def test_backbone_bev_small_grid(kind: str) -> None:
    _bev_case(kind, [41, 50, 44], seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["plain", "res"])
@pytest.mark.parametrize("shape", [[41, 200, 176], [41, 1600, 1408]])
def test_backbone_bev_lidar(kind: str, shape: list[int]) -> None:
    _bev_case(kind, shape, seed=0)


def _unet_case(shape: list[int], seed: int) -> None:
    idx, feats = zoo.lidar_scan(shape, batch=2, seed=seed, faces=True)
    model = _model("unet", seed)
    want_out, want_up1 = _oracle(model, idx, feats, shape)
    with torch.no_grad():
        got_out, got_up1 = _ported(model, shape)(_lattice_input(idx, feats))
    _assert_same(got_out, want_out, "unet conv_out")
    _assert_same(got_up1, want_up1, "unet up1")


def test_unet_v2_small_grid() -> None:
    _unet_case([41, 50, 44], seed=2)


@pytest.mark.slow
def test_unet_v2_lidar() -> None:
    _unet_case([41, 200, 176], seed=0)


# -- single layers: transposed bounds (spconv's formula has no dilation), keyed pool ---------


def test_transposed_dilated_bound() -> None:
    """k3 s2 p1 d2 back from a 10^3 grid: spconv's out shape is 19 (not 21), rows at -1 dropped."""
    idx, feats = zoo.cube_scan(n=20, rows=400)
    model = spconv.SparseSequential(
        spconv.SparseConv3d(4, 8, 3, stride=2, padding=1, bias=False),
        spconv.SparseConvTranspose3d(8, 8, 3, stride=2, padding=1, dilation=2, bias=False),
    )
    model = zoo.oracle_mode(zoo.randomise(model, 5))
    want = _oracle(model, idx, feats, [20, 20, 20])
    assert list(want.spatial_shape) == [19, 19, 19]
    with torch.no_grad():
        got = _ported(model, [20, 20, 20])(_lattice_input(idx, feats))
    _assert_same(got, want, "transposed")


def test_inverse_conv_after_keyed_pool_is_refused() -> None:
    model = spconv.SparseSequential(
        spconv.SubMConv3d(4, 8, 3, indice_key="s1", bias=False),
        spconv.SparseMaxPool3d(3, stride=2, padding=1, indice_key="pool"),
        spconv.SparseInverseConv3d(8, 8, 3, indice_key="pool", bias=False),
    )
    with pytest.raises(PortError, match="SparseMaxPool3d of indice_key 'pool'"):
        from_spconv(model, spatial_shape=[16, 16, 16], types=zoo.PCDET_TYPES)


# -- the ops themselves ----------------------------------------------------------------------


def test_crop_and_dense_gradients() -> None:
    c = torch.tensor([[0, 0, 0, 0], [0, 2, 4, 6], [1, 6, 2, 0], [0, 8, 0, 0]], dtype=torch.int32)
    f = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)

    def run(feats: torch.Tensor) -> torch.Tensor:
        y = ops.sparse_crop(SparseTensor(c, feats, stride=2), lower=0, upper=(8, 8, 8))
        return ops.sparse_to_dense(y, spatial_shape=4, batch_size=2, layout="b_cz_y_x")

    assert torch.autograd.gradcheck(run, (f,))
    out = run(f.detach())
    assert out.shape == (2, 12, 4, 4)
    assert torch.equal(out[0, 0 * 4 + 3, 2, 1], f[1, 0].detach())  # row (0, 2, 4, 6) / 2
    with pytest.raises(ValueError, match="empty"):
        ops.sparse_crop(SparseTensor(c, f.detach(), stride=2), lower=0, upper=(8, 0, 8))
    with pytest.raises(ValueError, match="multiple of the value's stride"):
        ops.sparse_crop(SparseTensor(c, f.detach(), stride=2), lower=0, upper=(7, 8, 8))
    with pytest.raises(ValueError, match="outside batch_size"):
        ops.sparse_to_dense(SparseTensor(c, f.detach(), stride=2), spatial_shape=4, batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = ops.sparse_crop(SparseTensor(c, f.detach(), stride=2), lower=(2, 2, 2), upper=4)
    assert empty.num_rows == 0

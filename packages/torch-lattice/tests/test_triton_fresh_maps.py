"""A map is sorted only where it pays; fused blocks keep their weights' tap copies.

A fresh scan per frame builds every map and uses each once or a few times:
the tap-pattern sort of a map (a device radix sort, about 0.2 ms of host time)
pays back only when the map is used again (a second conv, or the backward
pass) by a conv heavy enough (``maps.SORT_MIN_MACS``).  Otherwise the conv,
and its input gradient, run their tiles in row order.  The oracle is the
reference path (``schedule("tap_major")``).  Without a GPU the kernels run
under ``TRITON_INTERPRET=1`` (set by the root conftest) on small inputs; with
CUDA the same tests run on the GPU at full size.
"""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch
from torch_lattice import SparseTensor, nn, ops
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import random_sparse

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

from torch_lattice.triton import fuse_conv_bn_relu, kernels, maps
from torch_lattice.triton.maps import build

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
ROWS, C_IN, C_OUT, EXTENT = (20000, 32, 48, 40) if CUDA else (60, 5, 6, 5)
SUBM = ((3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))


def _input(seed: int, dtype: torch.dtype = torch.float32) -> SparseTensor:
    """Rows filling a small box (every face touched) over two batch items, shuffled."""
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, ROWS, C_IN, batch=2, extent=EXTENT, stride=(1, 1, 1), dtype=dtype)
    perm = torch.randperm(x.coords.shape[0], generator=g)
    return SparseTensor(x.coords[perm].to(DEVICE), x.feats[perm].to(DEVICE))


def _weight(seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(C_OUT, 3, 3, 3, C_IN, generator=g) / (C_IN * 3) ** 0.5
    return w.to(dtype).to(DEVICE)


@pytest.mark.parametrize("bm", [16, 32])
def test_tiles_of_rows_as_they_are_list_exactly_their_taps(bm: int) -> None:
    """Per tile of unsorted rows: exactly the taps some row of it has, in increasing order."""
    x = _input(1)
    _, smap = build("subm", x.support, *SUBM)
    taps, counts = kernels._tile_taps(smap.slots, None, bm, None)
    present = (smap.slots >= 0).cpu()
    tiles = -(-present.shape[0] // bm)
    padded = torch.zeros(tiles * bm, 27, dtype=torch.bool)
    padded[: present.shape[0]] = present
    want = padded.view(tiles, bm, 27).any(1)
    assert torch.equal(counts.cpu(), want.sum(1).to(torch.int32))
    taps = taps.cpu()
    for t in range(tiles):
        assert torch.equal(taps[t, : int(counts[t])], torch.nonzero(want[t]).flatten().int())
    assert "order" not in smap.cache  # nothing was sorted


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_every_tile_shape_matches_the_reference_on_unsorted_rows(dtype: torch.dtype) -> None:
    """Flat, skip-by-branch and listed-tap walks over tiles in row order give the result."""
    x, w = _input(2, dtype), _weight(3, dtype)
    with torch.no_grad(), schedule("tap_major"):
        ref = ops.subm_conv3d(x, w, kernel_size=3).feats.double()
    _, smap = build("subm", x.support, *SUBM)
    taps = w.reshape(C_OUT, 27, C_IN).permute(1, 2, 0).contiguous()
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for cfg in kernels.conv_candidates(dtype, dtype):
        got = kernels.launch_conv(
            x.feats, taps, smap.slots, smap.order, dtype, cache=smap.cache, config=cfg,
            sorted_tiles=False,
        )  # fmt: skip
        torch.testing.assert_close(got.double(), ref, atol=tol, rtol=tol, msg=str(cfg))
    assert "order" not in smap.cache


def _fresh(x: SparseTensor) -> SparseTensor:
    """The same rows on a new support: every map is built again, as for a new scan."""
    return SparseTensor(x.coords.clone(), x.feats)


def test_a_map_is_sorted_on_its_second_use_in_inference_and_first_in_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(maps, "SORT_MIN_MACS", 0)  # every conv heavy enough to sort
    x, w = _input(4), _weight(5)
    with schedule("triton"):
        with torch.no_grad():
            fresh = _fresh(x)
            first = ops.subm_conv3d(fresh, w, kernel_size=3)
            _, smap = build("subm", fresh.support, *SUBM)
            assert "order" not in smap.cache, "a map used once was sorted"
            second = ops.subm_conv3d(fresh, w, kernel_size=3)
            assert "order" in smap.cache, "a reused map was not sorted"
        torch.testing.assert_close(first.feats, second.feats, atol=1e-5, rtol=1e-5)
        trained = _fresh(x)
        out = ops.subm_conv3d(trained, w.clone().requires_grad_(), kernel_size=3)
        _, tmap = build("subm", trained.support, *SUBM)
        assert "order" in tmap.cache, "a map the backward pass reuses was not sorted"
        torch.testing.assert_close(out.feats.detach(), first.feats, atol=1e-5, rtol=1e-5)


def test_a_light_conv_never_sorts_its_map() -> None:
    """Below SORT_MIN_MACS a reused map, and one the backward pass reuses, stay unsorted."""
    x, w = _input(4), _weight(5)
    assert x.coords.shape[0] * 27 * C_IN * C_OUT < maps.SORT_MIN_MACS
    with schedule("triton"):
        with torch.no_grad():
            fresh = _fresh(x)
            ops.subm_conv3d(fresh, w, kernel_size=3)
            ops.subm_conv3d(fresh, w, kernel_size=3)
            _, smap = build("subm", fresh.support, *SUBM)
        trained = _fresh(x)
        out = ops.subm_conv3d(trained, w.clone().requires_grad_(), kernel_size=3)
        out.feats.sum().backward()
        _, tmap = build("subm", trained.support, *SUBM)
    assert "order" not in smap.cache and "order" not in tmap.cache
    assert "order" not in tmap.transposed().cache


@pytest.mark.parametrize("sort_from", [0, 1 << 62])
@pytest.mark.parametrize(
    "geometry", [("subm", SUBM), ("centred", ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)))]
)
def test_gradients_on_sorted_and_unsorted_tiles_match_the_reference(
    sort_from: int,
    geometry: tuple[str, tuple[tuple[int, int, int], ...]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forward, input and weight gradients of a training step, with the map sorted or not."""
    monkeypatch.setattr(maps, "SORT_MIN_MACS", sort_from)
    kind, (kernel, stride, _, _) = geometry
    x = _input(10)
    g = torch.Generator().manual_seed(11)
    w = (torch.randn(C_OUT, *kernel, C_IN, generator=g) / (C_IN * 3) ** 0.5).to(DEVICE)

    def run(path: str) -> tuple[torch.Tensor, ...]:
        feats = x.feats.clone().requires_grad_()
        weight = w.clone().requires_grad_()
        with schedule(path):
            y = _conv(kind, _fresh(x).with_feats(feats), weight, kernel, stride)
        proj = torch.randn(y.feats.shape, generator=torch.Generator().manual_seed(12))
        (y.feats * proj.to(DEVICE)).sum().backward()
        assert feats.grad is not None and weight.grad is not None
        return y.feats.detach(), feats.grad, weight.grad

    for got, want in zip(run("triton"), run("tap_major"), strict=True):
        scale = want.double().abs().max().clamp(min=1.0)  # sums of thousands of pairs at full size
        torch.testing.assert_close(
            got.double() / scale, want.double() / scale, atol=1e-4, rtol=1e-4
        )


def _conv(
    kind: str,
    x: SparseTensor,
    w: torch.Tensor,
    kernel: tuple[int, int, int],
    stride: tuple[int, int, int],
) -> SparseTensor:
    if kind == "subm":
        return ops.subm_conv3d(x, w, kernel_size=kernel)
    return ops.conv3d(x, w, kernel_size=kernel, stride=stride)


def _block() -> tuple[nn.Sequential, nn.SubmConv3d]:
    """conv -> BatchNorm (statistics away from the identity) -> ReLU, eval, and its conv."""
    torch.manual_seed(6)
    conv, bn = nn.SubmConv3d(C_IN, C_OUT, 3, bias=False), nn.BatchNorm(C_OUT)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    return nn.Sequential(conv, bn, nn.ReLU()).to(DEVICE).eval(), conv


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_fused_block_sees_every_weight_update(mode: str) -> None:
    """The kept tap copy follows in-place updates, load_state_dict and a new parameter."""
    x = _input(7)
    block, conv = _block()
    fused = fuse_conv_bn_relu(copy.deepcopy(block))
    fused_conv = next(m for m in fused.modules() if isinstance(m, nn.SubmConv3d))
    context = torch.inference_mode if mode == "inference_mode" else torch.no_grad

    def check() -> None:
        with context():
            with schedule("triton"):
                got = fused(_fresh(x)).feats
            with schedule("tap_major"):
                want = block(_fresh(x)).feats
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)

    check()
    with torch.no_grad():
        conv.weight.mul_(-2.0)
        fused_conv.weight.mul_(-2.0)  # in place: the version moves
    check()
    state = {k: v * 0.5 for k, v in block.state_dict().items() if k.endswith("0.weight")}
    block.load_state_dict(state, strict=False)
    fused.load_state_dict(state, strict=False)
    check()
    new = torch.nn.Parameter(torch.randn_like(conv.weight))
    conv.weight = new
    fused_conv.weight = torch.nn.Parameter(new.detach().clone())
    check()


@pytest.mark.parametrize("rows", [0, 1])
def test_one_row_and_no_rows_on_fresh_maps(rows: int) -> None:
    """A fresh map of one row or none: unsorted in inference, sorted in training, both exact."""
    g = torch.Generator().manual_seed(8)
    coords = torch.tensor([[1, 0, 4, 2]], dtype=torch.int32)[:rows].to(DEVICE)
    feats = torch.randn(1, C_IN, generator=g)[:rows].to(DEVICE)
    x, w = SparseTensor(coords, feats), _weight(9)
    with torch.no_grad(), schedule("tap_major"):
        want = ops.subm_conv3d(x, w, kernel_size=3).feats
    with schedule("triton"):
        with torch.no_grad():
            got = ops.subm_conv3d(_fresh(x), w, kernel_size=3).feats
        trained = ops.subm_conv3d(_fresh(x), w.clone().requires_grad_(), kernel_size=3).feats
    assert got.shape == want.shape == (rows, C_OUT)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(trained.detach(), want, atol=1e-5, rtol=1e-5)

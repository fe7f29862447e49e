"""Fused conv + eval BatchNorm + ReLU (torch_lattice.triton.fuse) and the conv tile shapes.

The oracle is the unfused model on the reference path (``schedule("tap_major")``):
the same modules run one after another in plain torch.  On a machine without a
GPU the kernels run under ``TRITON_INTERPRET=1`` (set by the root conftest) on
small inputs; with CUDA the same tests run on the GPU at full size.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from torch_lattice import SparseTensor, canonical_order, nn, ops
from torch_lattice.artifact import load_lattice_program
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import random_sparse

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

from lattice_conformance.metrics import Tolerance
from torch_lattice.triton import (
    FusedSequential,
    fuse_conv_bn_relu,
    kernels,
)
from torch_lattice.triton.maps import build

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
ROWS, C_IN, C_MID, EXTENT = (20000, 32, 48, 40) if CUDA else (50, 5, 6, 5)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-2, 2e-2),
    torch.bfloat16: (8e-2, 4e-2),
}
"""(atol, rtol) on outputs scaled to at most 1: the fused kernel applies the batch
norm to the f32 sums and rounds once, the reference rounds the conv output first."""


def _tol(dtype: torch.dtype) -> Tolerance:
    atol, rtol = TOLERANCES[dtype]
    return {"atol": atol, "rtol": rtol}


def _input(seed: int, dtype: torch.dtype) -> SparseTensor:
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, ROWS, C_IN, batch=2, extent=EXTENT, stride=(1, 1, 1), dtype=dtype)
    return SparseTensor(x.coords.to(DEVICE), x.feats.to(DEVICE))


def _randomise(bn: nn.BatchNorm, g: torch.Generator) -> None:
    """Statistics and affine parameters far from the identity, so a missed fold shows."""
    c = bn.num_features
    with torch.no_grad():
        bn.running_mean.copy_(torch.rand(c, generator=g) * 2 - 1)
        bn.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
        bn.weight.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
        bn.bias.copy_(torch.rand(c, generator=g) - 0.5)


def _model(seed: int) -> nn.Sequential:
    """Four blocks: subm with bias + BN + ReLU, k2s2 conv + BN + ReLU, subm + BN, transposed."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.SubmConv3d(C_IN, C_MID, 3),
        nn.BatchNorm(C_MID),
        nn.ReLU(),
        nn.Conv3d(C_MID, C_MID, 2, 2, bias=False),
        nn.BatchNorm(C_MID),
        nn.ReLU(),
        nn.SubmConv3d(C_MID, C_MID, (3, 1, 3), bias=False),
        nn.BatchNorm(C_MID),
        nn.ConvTranspose3d(C_MID, C_IN, 2, 2),
        nn.BatchNorm(C_IN),
        nn.ReLU(),
    )
    g = torch.Generator().manual_seed(seed)
    for m in model:
        if isinstance(m, nn.BatchNorm):
            _randomise(m, g)
    return model.eval()


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_inference_matches_unfused_reference(dtype: torch.dtype) -> None:
    x = _input(1, dtype)
    model = _model(2).to(DEVICE).to(dtype)
    keys = list(model.state_dict())
    with torch.no_grad(), schedule("tap_major"):
        ref = model(x)
    fused = fuse_conv_bn_relu(model)
    assert isinstance(fused, FusedSequential)
    assert list(fused.state_dict()) == keys, "fusing renamed parameters"
    with torch.no_grad(), schedule("triton"):
        got = fused(x)
    assert torch.equal(got.coords, ref.coords)
    assert got.dtype == dtype
    scale = ref.feats.double().abs().max().clamp(min=1.0)
    torch.testing.assert_close(
        got.feats.double() / scale, ref.feats.double() / scale, **_tol(dtype)
    )
    assert bool((got.feats >= 0).all()), "the last block's ReLU was dropped"


def test_fused_blocks_do_not_run_the_batch_norm_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the Triton path the batch norms and ReLUs are folded into the conv kernels."""
    x = _input(3, torch.float32)
    fused = fuse_conv_bn_relu(_model(4).to(DEVICE))
    with torch.no_grad(), schedule("tap_major"):
        ref = fused(x)  # the reference path: the blocks run module by module

    def refuse(self: torch.nn.Module, x: object) -> object:
        raise AssertionError(f"{type(self).__name__} ran although its block was fused")

    monkeypatch.setattr(nn.BatchNorm, "forward", refuse)
    monkeypatch.setattr(nn.ReLU, "forward", refuse)
    with torch.no_grad(), schedule("triton"):
        got = fused(x)
    torch.testing.assert_close(got.feats, ref.feats, **_tol(torch.float32))


def test_training_and_autograd_run_the_modules_unchanged() -> None:
    """Training mode or autograd on: the fused container is the plain one (same grads)."""
    x = _input(5, torch.float32)
    plain = _model(6).to(DEVICE)
    fused = fuse_conv_bn_relu(_model(6).to(DEVICE))
    for mode in ("train", "eval"):
        outs = []
        for net in (plain, fused):
            net.train(mode == "train")
            f = x.feats.clone().requires_grad_(True)
            with schedule("triton"):
                y = net(SparseTensor(x.coords, f))
                y.feats.square().sum().backward()
            assert f.grad is not None
            grads = [p.grad for p in net.parameters()]
            assert all(g is not None for g in grads)
            outs.append((y.feats.detach(), f.grad, [g.clone() for g in grads if g is not None]))
            net.zero_grad()
        (a, ga, pa), (b, gb, pb) = outs
        torch.testing.assert_close(a, b, atol=0, rtol=0)
        torch.testing.assert_close(ga, gb, atol=0, rtol=0)
        for u, v in zip(pa, pb, strict=True):
            torch.testing.assert_close(u, v, atol=0, rtol=0)
    assert fused.training is False


def _block(seed: int) -> nn.Sequential:
    """One subm conv -> BatchNorm -> ReLU block, eval, statistics far from the identity."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.SubmConv3d(C_IN, C_MID, 3), nn.BatchNorm(C_MID), nn.ReLU())
    bn = model[1]
    assert isinstance(bn, nn.BatchNorm)
    _randomise(bn, torch.Generator().manual_seed(seed))
    return model.to(DEVICE).eval()


def test_fused_model_exports_its_batch_norm_and_activation(tmp_path: Path) -> None:
    """Under an export the blocks run module by module: the graph records every op.

    The reloaded artifact is compared with the unfused model on the reference
    path (an oracle independent of the Triton kernels and of the exporter's
    own self-check).
    """
    x = _input(11, torch.float32)
    fused = fuse_conv_bn_relu(_block(12))
    assert isinstance(fused, FusedSequential)
    with torch.no_grad(), schedule("tap_major"):
        ref = fused(x)
    with schedule("triton"):
        report = save_lattice_model_artifact(fused, x, tmp_path / "fused.lattice")
    assert all(c.passed for c in report.checks)
    assert {"lattice.subm_conv3d", "lattice.batch_norm", "lattice.activation"} <= set(report.ops)
    assert "lattice.batch_norm" in report.graph and "lattice.activation" in report.graph
    got = load_lattice_program(tmp_path / "fused.lattice", device=DEVICE)(x)
    assert isinstance(got, SparseTensor)
    pg, pr = canonical_order(got.coords), canonical_order(ref.coords)
    assert torch.equal(got.coords[pg].cpu(), ref.coords[pr].cpu())
    torch.testing.assert_close(got.feats[pg], ref.feats[pr], **_tol(torch.float32))


def test_a_global_forward_hook_sees_every_module() -> None:
    """A hook registered for every module sees the batch norm and ReLU of a fused block run."""
    x = _input(15, torch.float32)
    fused = fuse_conv_bn_relu(_block(16))
    with torch.no_grad(), schedule("tap_major"):
        ref = fused(x)
    seen: list[str] = []

    def hook(module: torch.nn.Module, args: object, out: object) -> None:
        seen.append(type(module).__name__)

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        with torch.no_grad(), schedule("triton"):
            got = fused(x)
    finally:
        handle.remove()
    assert {"SubmConv3d", "BatchNorm", "ReLU"} <= set(seen), seen
    assert isinstance(got, SparseTensor)
    torch.testing.assert_close(got.feats, ref.feats, **_tol(torch.float32))


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_hooked_block_runs_its_modules(where: int) -> None:
    """A forward hook on the conv, batch norm or ReLU sees its own module's call."""
    x = _input(13, torch.float32)
    fused = fuse_conv_bn_relu(_block(14))
    assert isinstance(fused, FusedSequential)
    with torch.no_grad(), schedule("tap_major"):
        ref = fused(x)
        conv_out = fused[0](x)
    seen: list[SparseTensor] = []

    def hook(module: torch.nn.Module, args: object, out: SparseTensor) -> None:
        seen.append(out)

    handle = fused[where].register_forward_hook(hook)
    with torch.no_grad(), schedule("triton"):
        got = fused(x)
    handle.remove()
    assert len(seen) == 1, "the hooked module did not run"
    torch.testing.assert_close(got.feats, ref.feats, **_tol(torch.float32))
    if where == 0:  # the conv's hook sees the conv output, not the normalised one
        torch.testing.assert_close(seen[0].feats, conv_out.feats, **_tol(torch.float32))


def test_fusion_finds_nested_sequentials_and_leaves_others() -> None:
    inner = nn.Sequential(nn.SubmConv3d(4, 4, 3), nn.BatchNorm(4))
    lone = nn.Sequential(nn.BatchNorm(4), nn.ReLU())  # no conv first: left alone

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stage = torch.nn.ModuleList([inner, lone])

    net = Net()
    keys = list(net.state_dict())
    assert fuse_conv_bn_relu(net) is net
    assert isinstance(net.stage[0], FusedSequential)
    assert net.stage[0][0] is inner[0] and net.stage[0][1] is inner[1]
    assert net.stage[1] is lone
    assert list(net.state_dict()) == keys


def test_normalised_and_subclassed_convs_are_not_fused() -> None:
    """A normalised conv divides by its weight mass: an epilogue on one conv call would be wrong."""

    class MySubm(nn.SubmConv3d):
        pass

    for conv in (nn.NormalizedSubmConv3d(4, 4, 3), MySubm(4, 4, 3)):
        seq = nn.Sequential(conv, nn.BatchNorm(4), nn.ReLU())
        assert fuse_conv_bn_relu(seq) is seq


def _subm_case(dtype: torch.dtype) -> tuple[SparseTensor, torch.Tensor, torch.Tensor]:
    x = _input(7, dtype)
    g = torch.Generator().manual_seed(8)
    w = (torch.randn(C_MID, 3, 3, 3, C_IN, generator=g) / (C_IN * 3) ** 0.5).to(dtype).to(DEVICE)
    with torch.no_grad(), schedule("tap_major"):
        ref = ops.subm_conv3d(x, w, kernel_size=3).feats
    return x, w, ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_every_tile_shape_matches_the_reference(dtype: torch.dtype) -> None:
    """Each autotune candidate (flat, skip-by-branch and listed-tap walks) gives the result."""
    x, w, ref = _subm_case(dtype)
    _, smap = build("subm", x.support, (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))
    taps = w.reshape(C_MID, 27, C_IN).permute(1, 2, 0).contiguous()
    for cfg in kernels.conv_candidates(dtype, dtype):
        got = kernels.launch_conv(
            x.feats, taps, smap.slots, smap.order, dtype, cache=smap.cache, config=cfg
        )
        torch.testing.assert_close(got.double(), ref.double(), **_tol(dtype), msg=str(cfg))


@pytest.mark.parametrize("bm", [16, 32])
def test_tile_tap_lists_match_their_definition(bm: int) -> None:
    """Per tile of sorted rows: exactly the taps some row has, in increasing order."""
    x = _input(9, torch.float32)
    _, smap = build("subm", x.support, (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))
    order = smap.order()
    taps, counts = kernels._tile_taps(smap.slots, order, bm, None)
    present = (smap.slots[order.long()] >= 0).cpu()
    tiles = -(-present.shape[0] // bm)
    padded = torch.zeros(tiles * bm, 27, dtype=torch.bool)
    padded[: present.shape[0]] = present
    want = padded.view(tiles, bm, 27).any(1)
    assert torch.equal(counts.cpu(), want.sum(1).to(torch.int32))
    # present taps first, in increasing order: a stable sort of "absent" per tile
    expected = torch.sort((~want).to(torch.int8), dim=1, stable=True).indices.to(torch.int32)
    listed = torch.arange(27)[None, :] < want.sum(1, keepdim=True)
    assert torch.equal(taps.cpu()[listed], expected[listed])


def test_epilogue_on_an_input_without_rows() -> None:
    """No input rows: every output is the epilogue of zero sums (shift, then ReLU)."""
    x = torch.zeros(0, 3, device=DEVICE)
    w = torch.randn(8, 3, 4, device=DEVICE)
    slots = torch.full((5, 8), -1, dtype=torch.int32, device=DEVICE)
    shift = torch.tensor([-1.0, 0.5, 2.0, -3.0], device=DEVICE)
    epi = kernels.Epilogue(scale=torch.full((4,), 2.0, device=DEVICE), shift=shift, relu=True)
    out = kernels.launch_conv(x, w, slots, None, torch.float32, epilogue=epi)
    assert torch.equal(out, shift.clamp_min(0).expand(5, 4))
    with pytest.raises(ValueError, match="bias or an epilogue"):
        kernels.launch_conv(x, w, slots, None, torch.float32, bias=shift, epilogue=epi)


def test_folded_batch_norm_is_reused_until_its_state_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A frozen batch norm folds once; an in-place update or a loaded state dict refolds it."""
    from torch_lattice.triton import fuse as fuse_module

    x = _input(11, torch.float32)
    model = _model(12).to(DEVICE)
    fused = fuse_conv_bn_relu(_model(12).to(DEVICE))
    folds = [0]
    real = fuse_module.fold_batch_norm

    def counting(m: nn.BatchNorm) -> tuple[torch.Tensor, torch.Tensor]:
        folds[0] += 1
        return real(m)

    def same_as_reference() -> None:
        with torch.no_grad(), schedule("tap_major"):
            ref = model(x)
        with torch.no_grad(), schedule("triton"):
            got = fused(x)
        torch.testing.assert_close(got.feats, ref.feats, **_tol(torch.float32))

    monkeypatch.setattr(fuse_module, "fold_batch_norm", counting)
    same_as_reference()
    assert folds[0] == 4, "each of the four batch norms folds once"
    same_as_reference()
    assert folds[0] == 4, "a second forward folded its batch norms again"
    for target in (model, fused):  # an in-place update, as an optimizer step makes
        bn = cast(Any, target)[1]
        assert isinstance(bn, nn.BatchNorm)
        _randomise(bn, torch.Generator().manual_seed(14))
    same_as_reference()
    assert folds[0] == 5, "only the updated batch norm folds again"
    state = _model(15).state_dict()
    model.load_state_dict(state)
    fused.load_state_dict(state)
    same_as_reference()
    assert folds[0] == 9, "a loaded state dict refolds every batch norm"
    for target in (model, fused):  # a new buffer tensor (it may reuse a freed address)
        bn = cast(Any, target)[4]
        assert isinstance(bn, nn.BatchNorm)
        bn.running_var = bn.running_var * 2 + 0.5
    same_as_reference()
    assert folds[0] == 10, "a reassigned buffer kept its batch norm's old fold"

"""torch_lattice.nn behaves like torch.nn where PyTorch users rely on it.

Positional conv geometry, BatchNorm1d state dicts, half-precision and
autocast training, Dropout, and ``+`` / ``cat`` on sparse tensors.  The
oracles are torch itself (``torch.nn.BatchNorm1d``, ``torch.nn.functional``)
and the functional sparse ops the habits must be equivalent to.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch_lattice
from safetensors.torch import load_file
from torch_lattice import SparseTensor, nn, ops
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.ops.reference import available_devices, random_sparse

DEVICES = available_devices()


def _sparse(seed: int = 0, rows: int = 90, channels: int = 4, extent: int = 8) -> SparseTensor:
    return random_sparse(torch.Generator().manual_seed(seed), rows, channels, extent=extent)


def test_conv_geometry_is_positional_like_torch() -> None:
    conv = nn.Conv3d(4, 8, 2, 2)
    assert (conv.kernel_size, conv.stride) == ((2, 2, 2), (2, 2, 2))
    full = nn.Conv3d(4, 8, 3, 1, 1, 2, bias=False)
    assert (full.stride, full.padding, full.dilation) == ((1, 1, 1), (1, 1, 1), (2, 2, 2))
    assert full.bias is None
    assert nn.ConvTranspose3d(8, 4, 2, 2).stride == (2, 2, 2)
    assert nn.GenerativeConvTranspose3d(8, 4, 2, 2).stride == (2, 2, 2)
    x = _sparse()
    y = conv(x)
    assert y.stride == (2, 2, 2)
    same = ops.conv3d(x, conv.weight, conv.bias, kernel_size=2, stride=2)
    assert torch.equal(y.coords, same.coords) and torch.equal(y.feats, same.feats)
    # A subm conv has no stride or padding: its positional geometry is upstream's
    # (kernel_size, dilation), and bias stays keyword-only (torch's 7th is groups).
    assert nn.SubmConv3d(4, 8, 3, 2).dilation == (2, 2, 2)
    with pytest.raises(TypeError):
        nn.Conv3d(4, 8, 3, 1, 0, 1, False)  # type: ignore[call-arg]


def test_batchnorm_loads_a_batchnorm1d_state_dict_and_matches_it() -> None:
    torch.manual_seed(0)
    ref = torch.nn.BatchNorm1d(6, momentum=None)  # cumulative average uses the counter
    ours = nn.BatchNorm(6, momentum=None)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-0.5, 0.5)
    feats = [torch.randn(50, 6) * 3 + 1 for _ in range(3)]
    ref(feats[0])
    state = ref.state_dict()
    assert "num_batches_tracked" in state
    ours.load_state_dict(state)  # strict: the five BatchNorm1d entries
    assert int(ours.num_batches_tracked) == 1
    for f in feats[1:]:
        torch.testing.assert_close(ours(f), ref(f))
    torch.testing.assert_close(ours.running_mean, ref.running_mean)
    torch.testing.assert_close(ours.running_var, ref.running_var)
    assert ref.num_batches_tracked is not None
    assert int(ours.num_batches_tracked) == int(ref.num_batches_tracked) == 3
    ref.eval()
    ours.eval()
    torch.testing.assert_close(ours(feats[0]), ref(feats[0]))
    # and back: torch loads ours; a state dict without the counter loads too
    torch.nn.BatchNorm1d(6).load_state_dict(ours.state_dict())
    legacy = {k: v for k, v in state.items() if k != "num_batches_tracked"}
    nn.BatchNorm(6).load_state_dict(legacy)


def _net(dtype: torch.dtype | None = None) -> nn.Sequential:
    return nn.Sequential(
        nn.SubmConv3d(4, 16, 3, dtype=dtype),
        nn.BatchNorm(16, dtype=dtype),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Conv3d(16, 16, 2, 2, dtype=dtype),
        nn.Linear(16, 3, dtype=dtype),
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_training(device: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = _net().to(device=device, dtype=dtype)
    x = _sparse().to(device, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        y = model(x)
        assert y.dtype == dtype
        loss = y.feats.float().square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert losses[-1] < losses[0]
    bn = model[1]
    assert isinstance(bn, nn.BatchNorm)
    assert bn.running_mean.dtype == dtype and int(bn.num_batches_tracked) == 4
    assert float(bn.running_var.float().sub(1).abs().max()) > 0  # the statistics moved


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_runs_convs_in_half_with_f32_master_weights(device: str) -> None:
    torch.manual_seed(0)
    model = _net().to(device)
    x = _sparse().to(device)
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    with torch.autocast(device, dtype=dtype):
        y = model(x)
        hidden = model[0](x)
    assert y.dtype == dtype and hidden.dtype == dtype  # autocast has an effect
    y.feats.float().square().mean().backward()
    for p in model.parameters():
        assert p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32
    # the half result is the f32 network's up to bf16/f16 rounding
    model.eval()
    with torch.no_grad():
        ref = model(x)
        with torch.autocast(device, dtype=dtype):
            approx = model(x)
    torch.testing.assert_close(approx.feats.float(), ref.feats, atol=0.1, rtol=0.05)


def test_dropout_trains_and_is_identity_in_eval() -> None:
    torch.manual_seed(0)
    drop = nn.Dropout(0.5)
    x = _sparse(rows=400, extent=16)
    x = x.with_feats(torch.ones(x.num_rows, 4))
    y = drop(x)
    assert y.support is x.support
    zero = float((y.feats == 0).float().mean())
    assert 0.4 < zero < 0.6 and set(y.feats.unique().tolist()) <= {0.0, 2.0}
    drop.eval()
    assert drop(x) is x
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.0)


class _Residual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.SubmConv3d(4, 4, 3)
        self.b = nn.SubmConv3d(4, 4, 3)
        self.drop = nn.Dropout(0.3)

    def forward(self, x: SparseTensor) -> SparseTensor:
        h = self.drop(self.a(x))
        return torch_lattice.cat([h + x, self.b(h), x])


def test_sparse_add_and_cat_match_the_ops_and_export(tmp_path: Path) -> None:
    x = _sparse()
    y = x.with_feats(torch.randn(x.num_rows, 4))
    s = x + y
    assert s.support is x.support or torch.equal(s.coords, x.coords)
    torch.testing.assert_close(s.feats, x.feats + y.feats)
    c = torch_lattice.cat([x, y, x])
    torch.testing.assert_close(c.feats, torch.cat([x.feats, y.feats, x.feats], dim=1))
    # unaligned rows: outer join, a missing side reads zeros (the functional op's meaning)
    other = _sparse(seed=5)
    expected = ops.sparse_binary(x, other, op="add", join="outer")
    torch.testing.assert_close((x + other).feats, expected.feats)
    with pytest.raises(ValueError, match="dim=1"):
        torch_lattice.cat([x, y], dim=0)
    with pytest.raises(TypeError):
        x + x.feats
    with pytest.raises(ValueError, match="stride"):
        x + nn.Conv3d(4, 4, 2, 2)(x)

    model = _Residual()
    report = save_lattice_model_artifact(model, x, tmp_path / "res.lattice")
    assert report.ops.count("lattice.sparse.binary") == 1
    assert report.ops.count("lattice.sparse.cat") == 2
    assert set(load_file(str(tmp_path / "res.lattice" / "weights.safetensors"))) == {
        "a.weight",
        "a.bias",
        "b.weight",
        "b.bias",
    }

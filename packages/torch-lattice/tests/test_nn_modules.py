"""torch_lattice.nn: parameter names (artifact keys), BatchNorm train/eval, training a tiny net."""

from __future__ import annotations

import pytest
import torch
from torch_lattice import SparseTensor, nn, ops
from torch_lattice.ops.reference import available_devices, random_sparse

DEVICES = available_devices()


# State-dict keys (the artifact storage keys) on both runtimes: mlx-lattice test_nn_declared.py.


def test_conv_init_is_kaiming_uniform_like_torch() -> None:
    torch.manual_seed(0)
    conv = nn.SubmConv3d(16, 32, 3)
    bound = 1 / (16 * 27) ** 0.5
    top = float(conv.weight.detach().abs().max())
    assert 0.9 * bound < top <= bound
    assert float(conv.bias.detach().abs().max()) <= bound  # type: ignore[union-attr]


@pytest.mark.parametrize("device", DEVICES)
def test_batchnorm_train_uses_batch_stats_and_updates_running(device: str) -> None:
    g = torch.Generator().manual_seed(1)
    x = random_sparse(g, 80, 3, extent=8, device=device)
    x = x.with_feats(x.feats * 3 + 2)
    bn = nn.BatchNorm(3, momentum=0.5).to(device)
    y = bn(x)
    assert y.support is x.support
    torch.testing.assert_close(y.feats.mean(0), torch.zeros(3, device=device), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        y.feats.var(0, unbiased=False), torch.ones(3, device=device), atol=1e-3, rtol=0
    )
    torch.testing.assert_close(bn.running_mean, 0.5 * x.feats.mean(0))
    torch.testing.assert_close(bn.running_var, 0.5 + 0.5 * x.feats.var(0, unbiased=True))
    bn.eval()
    frozen = bn(x)
    expected = ops.batch_norm(
        x.feats, bn.weight, bn.bias, bn.running_mean, bn.running_var, eps=bn.eps
    )
    torch.testing.assert_close(frozen.feats, expected)
    before = bn.running_mean.clone()
    bn(x)
    assert torch.equal(bn.running_mean, before)  # eval never updates statistics


@pytest.mark.parametrize("device", DEVICES)
def test_feature_modules_keep_support_and_accept_dense(device: str) -> None:
    x = random_sparse(torch.Generator().manual_seed(2), 30, 4, device=device)
    for module in (
        nn.ReLU(),
        nn.GELU("tanh"),
        nn.Softplus(2.0, 10.0),
        nn.Linear(4, 6),
        nn.Softmax(),
        nn.LayerNorm(4),
        nn.RMSNorm(4),
        nn.Hardswish(),
        nn.LeakyReLU(0.2),
        nn.ELU(),
        nn.SiLU(),
        nn.Sigmoid(),
        nn.Tanh(),
        nn.Identity(),
    ):
        module = module.to(device)
        y = module(x)
        assert isinstance(y, SparseTensor) and y.support is x.support
        assert torch.equal(module(x.feats), y.feats)


@pytest.mark.parametrize("device", DEVICES)
def test_unet_style_network_trains(device: str) -> None:
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.SubmConv3d(3, 8, 3), nn.BatchNorm(8), nn.ReLU())
            self.down = nn.Conv3d(8, 16, 2, stride=2)
            self.mid = nn.SubmConv3d(16, 16, 3)
            self.up = nn.TargetConvTranspose3d(16, 8, 2, stride=2)
            self.cat = nn.SparseCat()
            self.head = nn.Linear(16, 2)
            self.pool = nn.MaxPool3d(2)

        def forward(self, x: SparseTensor) -> torch.Tensor:
            a = self.stem(x)
            b = self.mid(self.down(a))
            _ = self.pool(a)
            u = self.up(b, a)
            out: SparseTensor = self.head(self.cat(u, a))
            return out.feats

    g = torch.Generator().manual_seed(3)
    x = random_sparse(g, 300, 3, batch=2, extent=10, device=device)
    labels = (x.coords[:, 1] > 4).long()
    net = Net().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), labels)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0]
    assert all(p.grad is not None for p in net.parameters())


def test_pool_and_point_modules() -> None:
    g = torch.Generator().manual_seed(4)
    points = torch.rand(200, 3, generator=g) * 4
    batch = torch.zeros(200, dtype=torch.int32)
    feats = torch.randn(200, 5, generator=g)
    vox = nn.Voxelize(0.5, "mean")(points, feats, batch)
    assert vox.stride == (1, 1, 1)
    assert nn.AvgPool3d(2)(vox).stride == (2, 2, 2)
    assert nn.SumPool3d(3, stride=1, padding=1)(vox).stride == (1, 1, 1)
    dense = nn.GlobalPool("max", batch_size=2)(vox)
    assert tuple(dense.shape) == (2, 5)
    back = nn.Devoxelize(0.5, "nearest")(vox, points, batch)
    assert tuple(back.shape) == (200, 5)
    assert tuple(nn.GlobalPool()(vox).shape) == (1, 5)
    gen = nn.GenerativeConvTranspose3d(5, 2, 2, stride=2)
    coarse = nn.Conv3d(5, 5, 2, stride=2)(vox)
    assert gen(coarse).num_rows == coarse.num_rows * 8
    tc = nn.TargetConv3d(5, 3, 3, stride=2, padding=1)
    assert tc(vox, coarse).support is coarse.support
    assert nn.ConvTranspose3d(5, 4, 3, stride=2)(coarse).stride == (1, 1, 1)
    add = nn.SparseAdd()(vox, vox)
    torch.testing.assert_close(add.feats, 2 * vox.feats)
    with pytest.raises(ValueError, match="in_channels"):
        nn.SubmConv3d(0, 4, 3)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: nn.RMSNorm(8, eps=0), ValueError, r"^RMSNorm: eps must be a positive finite"),
        (lambda: nn.LayerNorm(8, eps=-1), ValueError, r"^LayerNorm: eps must be a positive"),
        (lambda: nn.BatchNorm(8, eps=0.0), ValueError, r"^BatchNorm: eps must be a positive"),
        (lambda: nn.BatchNorm(8, eps=float("inf")), ValueError, r"^BatchNorm: eps must be"),
        (lambda: nn.LayerNorm(8, eps=None), TypeError, "LayerNorm: eps"),  # type: ignore[arg-type]
    ],
)
def test_a_norms_eps_is_checked_at_construction(make, error, match) -> None:
    """A bad ``eps`` fails where the module is built, in the contract's words, not at forward."""
    with pytest.raises(error, match=match):
        make()

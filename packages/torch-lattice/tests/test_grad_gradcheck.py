"""torch.autograd.gradcheck in float64 for every conv, pool and the voxel ops."""

from __future__ import annotations

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import available_devices, random_sparse

DEVICES = available_devices()


def _x(device: str, stride=(1, 1, 1), seed: int = 0, channels: int = 2) -> SparseTensor:
    g = torch.Generator().manual_seed(seed)
    return random_sparse(
        g, 14, channels, batch=2, extent=4, stride=stride, dtype=torch.float64, device=device
    )


def _w(cout: int, k: int, cin: int, device: str) -> torch.Tensor:
    return torch.randn(cout, k, k, k, cin, dtype=torch.float64, device=device, requires_grad=True)


CONVS = {
    "conv3d_k3s2p1": lambda x, w, b: ops.conv3d(x, w, b, kernel_size=3, stride=2, padding=1),
    "conv3d_k2s1d2": lambda x, w, b: ops.conv3d(x, w, b, kernel_size=2, dilation=2),
    "subm_k3": lambda x, w, b: ops.subm_conv3d(x, w, b, kernel_size=3),
    "subm_k2": lambda x, w, b: ops.subm_conv3d(x, w, b, kernel_size=2),
    "transpose_k3s1p1": lambda x, w, b: ops.conv_transpose3d(x, w, b, kernel_size=3, padding=1),
}


@pytest.mark.parametrize("sched", ["tap_major", "output_major"])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_gradcheck(device: str, name: str, sched: str) -> None:
    x = _x(device)
    k = 2 if "k2" in name else 3
    w = _w(3, k, 2, device)
    b = torch.randn(3, dtype=torch.float64, device=device, requires_grad=True)
    f = x.feats.clone().requires_grad_(True)
    fn = CONVS[name]
    with schedule(sched):
        assert torch.autograd.gradcheck(lambda f, w, b: fn(x.with_feats(f), w, b).feats, (f, w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_strided_and_target_transpose_gradcheck(device: str) -> None:
    x = _x(device, stride=(2, 2, 2))
    target = _x(device, seed=3)
    w = _w(3, 2, 2, device)
    f = x.feats.clone().requires_grad_(True)

    def t_fn(f: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ops.conv_transpose3d(
            x.with_feats(f), w, kernel_size=2, stride=2, coordinates=target
        ).feats

    assert torch.autograd.gradcheck(t_fn, (f, w))

    def g_fn(f: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ops.generative_conv_transpose3d(x.with_feats(f), w, kernel_size=2, stride=2).feats

    assert torch.autograd.gradcheck(g_fn, (f, w))
    down = _x(device, seed=5)
    tc = _x(device, stride=(2, 2, 2), seed=6)

    def c_fn(f: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ops.conv3d(down.with_feats(f), w, kernel_size=2, stride=2, coordinates=tc).feats

    f2 = down.feats.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(c_fn, (f2, w))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["max", "avg", "sum"])
def test_pool_gradcheck(device: str, mode: str) -> None:
    x = _x(device, seed=7)
    f = x.feats.clone().requires_grad_(True)
    p_fn = lambda f: ops.pool3d(x.with_feats(f), mode=mode, kernel_size=2, stride=2).feats  # noqa: E731
    assert torch.autograd.gradcheck(p_fn, (f,))
    g_fn = lambda f: ops.global_pool(x.with_feats(f), mode=mode, batch_size=3)  # noqa: E731
    assert torch.autograd.gradcheck(g_fn, (f,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "max"])
def test_voxelize_gradcheck(device: str, reduction: str) -> None:
    g = torch.Generator().manual_seed(8)
    points = (torch.rand(30, 3, generator=g) * 2).to(device)
    batch = torch.randint(0, 2, (30,), generator=g, dtype=torch.int32).to(device)
    feats = torch.randn(30, 2, dtype=torch.float64, generator=g).to(device).requires_grad_(True)
    fn = lambda f: ops.voxelize(points, f, batch, voxel_size=0.5, reduction=reduction).feats  # noqa: E731
    assert torch.autograd.gradcheck(fn, (feats,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interpolation", ["nearest", "linear", "trilinear"])
def test_devoxelize_gradcheck(device: str, interpolation: str) -> None:
    x = _x(device, stride=(2, 2, 2), seed=9)
    g = torch.Generator().manual_seed(10)
    points = (torch.rand(25, 3, generator=g) * 8).to(device)
    batch = torch.randint(0, 2, (25,), generator=g, dtype=torch.int32).to(device)
    f = x.feats.clone().requires_grad_(True)
    fn = lambda f: ops.devoxelize(  # noqa: E731
        points, x.with_feats(f), batch, voxel_size=2.0, interpolation=interpolation
    )
    assert torch.autograd.gradcheck(fn, (f,))


@pytest.mark.parametrize("device", DEVICES)
def test_quantized_weight_conv_has_feature_gradient(device: str) -> None:
    x = _x(device, channels=32)
    w = torch.randn(4, 3, 3, 3, 32, device=device)
    q = ops.quantize_weight(w, bits=8, group_size=32)
    f = x.feats.float().clone().requires_grad_(True)
    out = ops.subm_conv3d(x.with_feats(f), q, kernel_size=3)
    out.feats.sum().backward()
    assert f.grad is not None and f.grad.shape == f.shape

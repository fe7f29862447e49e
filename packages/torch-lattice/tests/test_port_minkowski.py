"""from_minkowski against a NumPy re-derivation of MinkowskiEngine's kernel maps.

What is verified against what: the ME model trees are built from stand-in
classes (``minkowski_layers``, declared with ``types=``) because
MinkowskiEngine does not install here; the oracle is ``framework_reference``
(ME 0.5.4's kernel regions, strided coordinate maps, transposed maps reversed,
generative expansion, re-derived from its source), composed layer by layer in
float64 with BatchNorm in eval mode.  Inputs touch every face of their box and
hold two batch items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import framework_reference as ref
import minkowski_layers as me
import numpy as np
import pytest
import torch
from torch_lattice import SparseTensor, canonical_order
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.port import PortError, from_minkowski


def _cloud(seed: int, extent: int = 20, rows: int = 500) -> SparseTensor:
    gen = torch.Generator().manual_seed(seed)
    xyz = torch.randint(0, extent, (rows, 3), generator=gen)
    m = extent - 1
    faces = torch.tensor([[0, 7, 7], [m, 7, 7], [7, 0, 7], [7, m, 7], [7, 7, 0], [7, 7, m]])
    xyz = torch.cat([faces, xyz])
    batch = torch.randint(0, 2, (len(xyz), 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), 4, generator=gen))


def _randomise(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm1d):
                assert m.weight is not None and m.bias is not None
                assert m.running_mean is not None and m.running_var is not None
                c = m.num_features
                m.weight.copy_(1 + 0.1 * torch.randn(c, generator=gen))
                m.bias.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_var.copy_(1 + 0.2 * torch.rand(c, generator=gen))
    return model


def _kernel(conv: Any) -> np.ndarray:
    k = conv.kernel.detach().double().numpy()
    return k[None] if k.ndim == 2 else k


def _bn(norm: Any, f: np.ndarray) -> np.ndarray:
    bn = norm.bn
    mean, var = bn.running_mean.double().numpy(), bn.running_var.double().numpy()
    w, b = bn.weight.detach().double().numpy(), bn.bias.detach().double().numpy()
    return (f - mean) / np.sqrt(var + bn.eps) * w + b


def _conv(conv: Any, c: np.ndarray, f: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray, int]:
    g = conv.kernel_generator
    s = g.kernel_stride[0]
    out_c, out_f = ref.forward_conv(
        "minkowski",
        c,
        f,
        _kernel(conv),
        g.kernel_size,
        stride=s,
        tensor_stride=t,
        dilation=g.kernel_dilation[0],
    )
    return out_c, out_f, t * s


def _block(block: Any, c: np.ndarray, f: np.ndarray, t: int) -> np.ndarray:
    _, h, _ = _conv(block.conv1, c, f, t)
    h = np.maximum(_bn(block.norm1, h), 0)
    _, h, _ = _conv(block.conv2, c, h, t)
    return np.maximum(_bn(block.norm2, h) + f, 0)


def _net() -> torch.nn.Sequential:
    return torch.nn.Sequential(
        me.MinkowskiConvolution(4, 8, 3, dilation=2),
        me.MinkowskiBatchNorm(8),
        me.MinkowskiReLU(),
        me.MinkowskiConvolution(8, 16, 2, stride=2),
        me.MinkowskiBatchNorm(16),
        me.MinkowskiReLU(),
        me.BasicBlock(16, 16),
        me.MinkowskiConvolution(16, 16, 4),  # stride 1, even: ME's 0..K-1 region
        me.MinkowskiConvolutionTranspose(16, 8, 2, stride=2),  # back onto the input rows
        me.MinkowskiReLU(),
        me.MinkowskiConvolution(8, 4, 1, bias=True),
    )


def _reference(net: Any, x: SparseTensor) -> tuple[np.ndarray, np.ndarray]:
    c0, f = x.coords.numpy().astype(np.int64), x.feats.double().numpy()
    _, f, _ = _conv(net[0], c0, f, 1)
    f = np.maximum(_bn(net[1], f), 0)
    c1, f, t = _conv(net[3], c0, f, 1)
    f = np.maximum(_bn(net[4], f), 0)
    f = _block(net[6], c1, f, t)
    _, f, _ = _conv(net[7], c1, f, t)
    up = net[8]
    f = ref.transposed_conv(
        "minkowski", c1, f, _kernel(up), up.kernel_generator.kernel_size, c0, fine_tensor_stride=1
    )
    f = np.maximum(f, 0)
    _, f, _ = _conv(net[10], c0, f, 1)
    return c0, f + net[10].bias.detach().double().numpy()


def _sorted(c: Any, f: Any) -> tuple[np.ndarray, np.ndarray]:
    ct = torch.as_tensor(np.asarray(c)).to(torch.int32)
    perm = canonical_order(ct).numpy()
    return np.asarray(c)[perm], np.asarray(f)[perm]


def test_minkowski_net_matches_the_numpy_rederivation(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = _randomise(_net(), 1)
    ported = from_minkowski(net, types=me.TYPES).eval()
    assert "6.norm1.bn.running_var" in ported.state_dict()  # the source's names
    assert "8.weight" in ported.state_dict()
    x = _cloud(2)
    with torch.no_grad():
        got = ported(x)
    want_c, want_f = _sorted(*_reference(net, x))
    got_c, got_f = _sorted(got.coords.numpy(), got.feats.double().numpy())
    np.testing.assert_array_equal(got_c, want_c)
    scale = max(1.0, float(np.abs(want_f).max()))
    assert float(np.abs(got_f - want_f).max()) < 1e-4 * scale
    report = save_lattice_model_artifact(ported, x, tmp_path / "me.lattice")
    assert report is not None


def test_minkowski_generative_transpose() -> None:
    net = torch.nn.Sequential(
        me.MinkowskiConvolution(4, 8, 2, stride=2),
        me.MinkowskiGenerativeConvolutionTranspose(8, 4, 2, stride=2),
    )
    ported = from_minkowski(net, types=me.TYPES).eval()
    x = _cloud(3)
    c0, f = x.coords.numpy().astype(np.int64), x.feats.double().numpy()
    c1, f, _ = _conv(net[0], c0, f, 1)
    want = ref.minkowski_generative(c1, f, _kernel(net[1]), (2, 2, 2), fine_stride=1)
    with torch.no_grad():
        got = ported(x)
    want_c, want_f = _sorted(*want)
    got_c, got_f = _sorted(got.coords.numpy(), got.feats.double().numpy())
    np.testing.assert_array_equal(got_c, want_c)
    assert float(np.abs(got_f - want_f).max()) < 1e-4


def test_minkowski_refusals() -> None:
    with pytest.raises(PortError, match=r"^0: the MinkowskiEngine port does not know"):
        from_minkowski(torch.nn.Sequential(me.MinkowskiConvolution(4, 4, 3)))  # undeclared
    odd = torch.nn.Sequential(me.MinkowskiGenerativeConvolutionTranspose(4, 4, 3, stride=2))
    with pytest.raises(PortError, match=r"^0: generative transposed convs port with even"):
        from_minkowski(odd, types=me.TYPES)
    conv = me.MinkowskiConvolution(4, 4, 3)
    conv.register_forward_hook(lambda m, i, o: o)
    with pytest.raises(PortError, match=r"^1: has a forward hook"):
        from_minkowski(torch.nn.Sequential(me.MinkowskiReLU(), conv), types=me.TYPES)


# ---------------------------------------------------------------------------
# The zoo's MinkowskiEngine MinkUNet14 on LiDAR-like scans.


def _block_ds(block: Any, c: np.ndarray, f: np.ndarray, t: int) -> np.ndarray:
    _, h, _ = _conv(block.conv1, c, f, t)
    h = np.maximum(_bn(block.norm1, h), 0)
    _, h, _ = _conv(block.conv2, c, h, t)
    residual = f
    if block.downsample is not None:
        _, residual, _ = _conv(block.downsample[0], c, f, t)
        residual = _bn(block.downsample[1], residual)
    return np.maximum(_bn(block.norm2, h) + residual, 0)


def _minkunet_reference(net: Any, x: SparseTensor) -> tuple[np.ndarray, np.ndarray]:
    relu = lambda a: np.maximum(a, 0)  # noqa: E731
    c, f = x.coords.numpy().astype(np.int64), x.feats.double().numpy()
    _, f, t = _conv(net.conv0p1s1, c, f, 1)
    f = relu(_bn(net.bn0, f))
    at_stride = {1: c}
    skips = [f]
    for i in range(1, 5):
        c, f, t = _conv(getattr(net, f"conv{i}p{2 ** (i - 1)}s2"), c, f, t)
        f = relu(_bn(getattr(net, f"bn{i}"), f))
        f = _block_ds(getattr(net, f"block{i}")[0], c, f, t)
        at_stride[t] = c
        skips.append(f)
    skips.pop()
    for j in range(4, 8):
        up = getattr(net, f"convtr{j}p{2 ** (8 - j)}s2")
        fine = at_stride[t // 2]
        f = ref.transposed_conv(
            "minkowski", c, f, _kernel(up), (2, 2, 2), fine, fine_tensor_stride=t // 2
        )
        c, t = fine, t // 2
        f = relu(_bn(getattr(net, f"bntr{j}"), f))
        f = np.concatenate([f, skips.pop()], 1)
        f = _block_ds(getattr(net, f"block{j + 1}")[0], c, f, t)
    _, f, _ = _conv(net.final, c, f, 1)
    return c, f + net.final.bias.detach().double().numpy()


def _scan(shape_zyx: list[int], seed: int) -> SparseTensor:
    import spconv_zoo

    idx, feats = spconv_zoo.lidar_scan(shape_zyx, batch=2, seed=seed, faces=True)
    idx = torch.as_tensor(idx).to(torch.int32)
    coords = idx[:, [0, 3, 2, 1]].contiguous()  # (b, z, y, x) -> (b, x, y, z)
    return SparseTensor(coords, torch.as_tensor(feats, dtype=torch.float32))


def _minkunet_case(shape_zyx: list[int], width: float, tmp_path: Path) -> tuple[int, float]:
    torch.manual_seed(0)
    net = _randomise(me.MinkUNet14(4, 19, width=width), 3)
    ported = from_minkowski(net, types=me.TYPES).eval()
    assert "block5.0.downsample.1.bn.running_mean" in ported.state_dict()
    x = _scan(shape_zyx, seed=1)
    with torch.no_grad():
        got = ported(x)
    want_c, want_f = _sorted(*_minkunet_reference(net, x))
    got_c, got_f = _sorted(got.coords.numpy(), got.feats.double().numpy())
    np.testing.assert_array_equal(got_c, want_c)
    err = float(np.abs(got_f - want_f).max()) / max(1.0, float(np.abs(want_f).max()))
    assert err < 1e-4, err
    save_lattice_model_artifact(ported, x, tmp_path / "minkunet14.lattice")  # verify + self-check
    return len(got_c), err


def test_minkunet14_small_scan(tmp_path: Path) -> None:
    _minkunet_case([11, 24, 24], 0.125, tmp_path)


@pytest.mark.slow
def test_minkunet14_full_width_lidar_scan(tmp_path: Path) -> None:
    rows, err = _minkunet_case([41, 200, 176], 1.0, tmp_path)
    print(f"MinkUNet14 full width, [41, 200, 176] scan: {rows} rows, max rel error {err:.2e}")

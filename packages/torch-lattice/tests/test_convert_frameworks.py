"""Converted checkpoints compute what their source framework computed.

* spconv 2.x: real spconv modules (CPU, one thread) are the oracle.  Their
  state dicts go through ``convert-checkpoint`` (from a ``.pt`` file), load
  into ``torch_lattice.nn`` modules, and must reproduce spconv's outputs --
  including the 1x1x1 matmul quirk, strided 1x1x1 convs, ``(b, z, y, x)``
  index order and SparseInverseConv3d.  spconv 1.x checkpoints are the same
  weights in RSCK order.
* TorchSparse and MinkowskiEngine are not installable here, so their
  convolutions are emulated in this file straight from their documented
  conventions (weight ``(K, C_in, C_out)``, their own tap enumeration and
  kernel phase) and compared with torch_lattice running the converted
  weights: TorchSparse stride-1 convs (odd and even kernels) are
  ``SubmConv3d``; MinkowskiEngine's odd kernels are ``SubmConv3d`` and its
  even kernels ``TargetConv3d`` onto the input rows with padding 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch_lattice import SparseTensor, canonical_order, nn
from torch_lattice.convert import KernelSpec, convert_checkpoint, convert_state_dict

try:
    import spconv.pytorch as spconv
except ImportError:  # the emulated TorchSparse / MinkowskiEngine tests still run
    spconv = None

needs_spconv = pytest.mark.skipif(spconv is None, reason="spconv is not installed")

SHAPE = [32, 32, 32]


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # spconv's CPU scatter-add races with more threads
    yield
    torch.set_num_threads(before)


def _cloud(seed: int, rows: int = 120, channels: int = 4) -> SparseTensor:
    gen = torch.Generator().manual_seed(seed)
    xyz = torch.randint(8, 24, (rows, 3), generator=gen)  # well inside SHAPE
    batch = torch.randint(0, 2, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), channels, generator=gen))


def _spconv_input(x: SparseTensor, axes: str = "xyz") -> Any:
    cols = [0] + [1 + "xyz".index(a) for a in axes]
    return spconv.SparseConvTensor(x.feats, x.coords[:, cols].contiguous(), SHAPE, 2)


def _spconv_rows(out: Any, stride: int, axes: str = "xyz") -> tuple[torch.Tensor, torch.Tensor]:
    """spconv output as physical (b, x, y, z) rows in canonical order."""
    idx = out.indices.to(torch.int32)
    coords = torch.zeros_like(idx)
    coords[:, 0] = idx[:, 0]
    for j, a in enumerate(axes):
        coords[:, 1 + "xyz".index(a)] = idx[:, 1 + j] * stride
    perm = canonical_order(coords)
    return coords[perm], out.features[perm]


def _ours(y: SparseTensor) -> tuple[torch.Tensor, torch.Tensor]:
    perm = canonical_order(y.coords)
    return y.coords[perm], y.feats[perm]


def _assert_rows(ours: tuple[torch.Tensor, torch.Tensor], theirs: Any) -> None:
    assert torch.equal(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1], atol=1e-4, rtol=1e-4)


def _spec(kernels: dict[str, Any], **extra: Any) -> KernelSpec:
    return KernelSpec.from_json(
        {"format": "lattice-kernel-spec", "version": 1, "kernels": kernels, **extra}
    )


def _converted(module: torch.nn.Module, declaration: dict[str, Any]) -> dict[str, torch.Tensor]:
    state = {k: v for k, v in module.state_dict().items() if k == "weight"}
    return convert_state_dict(state, _spec({"weight": declaration})).tensors


@pytest.mark.parametrize(
    ("make_theirs", "make_ours", "declaration", "stride"),
    [
        (
            lambda: spconv.SubMConv3d(4, 8, 3, bias=False),
            lambda: nn.SubmConv3d(4, 8, 3, bias=False),
            {"framework": "spconv-2"},
            1,
        ),
        (
            lambda: spconv.SubMConv3d(4, 8, (3, 1, 5), bias=False),
            lambda: nn.SubmConv3d(4, 8, (3, 1, 5), bias=False),
            {"framework": "spconv-2"},
            1,
        ),
        (
            lambda: spconv.SparseConv3d(4, 8, 3, stride=2, padding=1, bias=False),
            lambda: nn.FullConv3d(4, 8, 3, stride=2, padding=1, bias=False),
            {"framework": "spconv-2"},
            2,
        ),
        (
            lambda: spconv.SubMConv3d(4, 8, 1, bias=False),
            lambda: nn.SubmConv3d(4, 8, 1, bias=False),
            {"framework": "spconv-2", "subm": True},
            1,
        ),
        (
            lambda: spconv.SparseConv3d(4, 8, 1, bias=False),
            lambda: nn.FullConv3d(4, 8, 1, bias=False),
            {"framework": "spconv-2", "stride": 1},
            1,
        ),
        (
            lambda: spconv.SparseConv3d(4, 8, 1, stride=2, bias=False),
            lambda: nn.FullConv3d(4, 8, 1, stride=2, bias=False),
            {"framework": "spconv-2", "stride": 2},
            2,
        ),
    ],
    ids=["subm3", "subm315", "conv3s2", "subm1x1", "conv1x1", "conv1x1s2"],
)
@needs_spconv
def test_spconv2_modules(make_theirs, make_ours, declaration, stride) -> None:
    torch.manual_seed(7)
    theirs, ours = make_theirs(), make_ours()
    ours.load_state_dict(_converted(theirs, declaration))
    x = _cloud(1)
    with torch.no_grad():
        _assert_rows(_ours(ours(x)), _spconv_rows(theirs(_spconv_input(x)), stride))


@needs_spconv
def test_spconv_1x1_quirk_is_real() -> None:
    # Without the declared stride the reading would be wrong: the plain layout
    # (C_out, 1, 1, 1, C_in) does not reproduce spconv's 1x1 matmul.
    torch.manual_seed(8)
    theirs = spconv.SubMConv3d(4, 8, 1, bias=False)
    ours = nn.SubmConv3d(4, 8, 1, bias=False)
    ours.load_state_dict(_converted(theirs, {"framework": "spconv-2", "stride": 2}))
    x = _cloud(2)
    with torch.no_grad():
        got = _ours(ours(x))[1]
        want = _spconv_rows(theirs(_spconv_input(x)), 1)[1]
    assert not torch.allclose(got, want, atol=1e-3)


@needs_spconv
def test_spconv_zyx_indices() -> None:
    # Detection code indexes voxels as (b, z, y, x); its kernel axis 0 is z.
    torch.manual_seed(9)
    theirs = spconv.SubMConv3d(4, 8, (5, 1, 3), bias=False)  # (Kz, Ky, Kx)
    ours = nn.SubmConv3d(4, 8, (3, 1, 5), bias=False)  # (Kx, Ky, Kz)
    ours.load_state_dict(_converted(theirs, {"framework": "spconv-2", "axes": "zyx"}))
    x = _cloud(3)
    with torch.no_grad():
        _assert_rows(_ours(ours(x)), _spconv_rows(theirs(_spconv_input(x, "zyx")), 1, "zyx"))


class _LatticeNet(torch.nn.Module):
    """The torch_lattice twin of the spconv network below (names after rename)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.SubmConv3d(4, 8, 3, bias=False)
        self.down = nn.FullConv3d(8, 16, 3, stride=2, padding=1, bias=False)
        self.mix = nn.SubmConv3d(16, 16, 1, bias=False)
        self.up = nn.TargetConvTranspose3d(16, 8, 3, stride=2, padding=1, bias=False)

    def forward(self, x: SparseTensor) -> SparseTensor:
        s = self.stem(x)
        out: SparseTensor = self.up(self.mix(self.down(s)), s)
        return out


@needs_spconv
@pytest.mark.parametrize("version", ["spconv-2", "spconv-1"])
def test_spconv_network_through_the_cli(tmp_path: Path, version: str) -> None:
    torch.manual_seed(10)
    net = spconv.SparseSequential(
        spconv.SubMConv3d(4, 8, 3, bias=False, indice_key="s1"),
        spconv.SparseConv3d(8, 16, 3, stride=2, padding=1, bias=False, indice_key="d1"),
        spconv.SubMConv3d(16, 16, 1, bias=False, indice_key="s2"),
        spconv.SparseInverseConv3d(16, 8, 3, bias=False, indice_key="d1"),
    )
    state = {k: v for k, v in net.state_dict().items() if k.endswith("weight")}
    if version == "spconv-1":  # the same weights as spconv 1.x stored them (RSCK)
        rsck = {}
        for key, v in state.items():
            c_out, *size, c_in = v.shape
            if size == [1, 1, 1]:  # spconv 2's 1x1 buffer already holds (C_in, C_out)
                rsck[key] = v.reshape(1, 1, 1, c_in, c_out).clone()
            else:
                rsck[key] = v.permute(1, 2, 3, 4, 0).contiguous()
        state = rsck
    torch.save(state, tmp_path / "spconv.pth")
    one = {"framework": version}
    spec = {
        "format": "lattice-kernel-spec",
        "version": 1,
        "kernels": {
            "0.weight": one,
            "1.weight": one,
            "2.weight": {**one, "subm": True},
            "3.weight": one,
        },
        "rename": [["^0\\.", "stem."], ["^1\\.", "down."], ["^2\\.", "mix."], ["^3\\.", "up."]],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    dst = tmp_path / "weights.safetensors"
    manifest = convert_checkpoint(tmp_path / "spconv.pth", dst, tmp_path / "spec.json")
    assert set(manifest["converted"]) == {"stem.weight", "down.weight", "mix.weight", "up.weight"}
    ours = _LatticeNet()
    ours.load_state_dict(load_file(str(dst)))
    x = _cloud(4)
    with torch.no_grad():
        _assert_rows(_ours(ours(x)), _spconv_rows(net(_spconv_input(x)), 1))


# ---------------------------------------------------------------------------
# TorchSparse and MinkowskiEngine, emulated from their documented conventions.


def _offsets(framework: str, size: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """Each framework's list of neighbour offsets, in its weight-row order."""
    if framework == "torchsparse":
        # np.arange(-K // 2 + 1, K // 2 + 1): K=3 -> -1..1, K=4 -> -1..2, K=2 -> 0..1
        axis = [list(range(-k // 2 + 1, k // 2 + 1)) for k in size]
        if size[0] * size[1] * size[2] % 2:
            return [(x, y, z) for z in axis[2] for y in axis[1] for x in axis[0]]
        return [(x, y, z) for x in axis[0] for y in axis[1] for z in axis[2]]
    # MinkowskiEngine: odd kernels centred, even kernels 0..K-1; x varies fastest.
    axis = [list(range(-(k // 2), k // 2 + 1)) if k % 2 else list(range(k)) for k in size]
    return [(x, y, z) for z in axis[2] for y in axis[1] for x in axis[0]]


def _emulated_conv(
    x: SparseTensor, kernel: torch.Tensor, offsets: list[tuple[int, int, int]]
) -> torch.Tensor:
    """Stride-1 sparse conv on x's rows: out[i] = sum_k x[c_i + offset_k] @ kernel[k]."""
    span = 1 << 10
    keys = ((x.coords[:, 0].long() * span + x.coords[:, 1]) * span + x.coords[:, 2]) * span
    keys = keys + x.coords[:, 3]
    order = torch.argsort(keys)
    sorted_keys = keys[order]
    out = torch.zeros(x.num_rows, kernel.shape[-1])
    for k, (dx, dy, dz) in enumerate(offsets):
        probe = keys + (dx * span + dy) * span + dz
        pos = torch.searchsorted(sorted_keys, probe).clamp(max=len(keys) - 1)
        hit = sorted_keys[pos] == probe
        out[hit] += x.feats[order[pos[hit]]] @ kernel[k]
    return out


@pytest.mark.parametrize("version", ["torchsparse-2.0", "torchsparse-2.1"])
@pytest.mark.parametrize("size", [(3, 3, 3), (2, 2, 2), (4, 4, 4), (3, 1, 2)])
def test_torchsparse_conv_equals_subm(version: str, size: tuple[int, int, int]) -> None:
    gen = torch.Generator().manual_seed(11)
    volume = size[0] * size[1] * size[2]
    kernel = torch.randn(volume, 4, 6, generator=gen) * 0.3
    x = _cloud(5)
    want = _emulated_conv(x, kernel, _offsets("torchsparse", size))
    spec = _spec({"conv.kernel": {"framework": version, "kernel_size": list(size)}})
    weights = convert_state_dict({"conv.kernel": kernel}, spec).tensors
    ours = nn.SubmConv3d(4, 6, size, bias=False)
    ours.load_state_dict({"weight": weights["conv.kernel"]})
    with torch.no_grad():
        torch.testing.assert_close(ours(x).feats, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("size", [(3, 3, 3), (2, 2, 2), (4, 2, 2), (3, 1, 3)])
def test_minkowski_conv_phase(size: tuple[int, int, int]) -> None:
    gen = torch.Generator().manual_seed(12)
    volume = size[0] * size[1] * size[2]
    kernel = torch.randn(volume, 4, 6, generator=gen) * 0.3
    x = _cloud(6)
    want = _emulated_conv(x, kernel, _offsets("minkowski", size))
    spec = _spec({"k": {"framework": "minkowski", "kernel_size": list(size)}})
    w = convert_state_dict({"k": kernel}, spec).tensors["k"]
    odd = all(k % 2 for k in size)
    with torch.no_grad():
        if odd:
            subm = nn.SubmConv3d(4, 6, size, bias=False)
            subm.load_state_dict({"weight": w})
            got = subm(x)
        else:
            target = nn.TargetConv3d(4, 6, size, stride=1, padding=0, bias=False)
            target.load_state_dict({"weight": w})
            got = target(x, x)
            # conv3d's centred rule reads 0..K-1 on even axes and keeps the input rows
            plain = nn.Conv3d(4, 6, size, bias=False)
            plain.load_state_dict({"weight": w})
            torch.testing.assert_close(plain(x).feats, want, atol=1e-5, rtol=1e-5)
            # SubmConv3d reads k - floor((K-1)/2): the same as 0..K-1 for K = 2, but
            # other neighbours once an even axis has K >= 4.
            subm = nn.SubmConv3d(4, 6, size, bias=False)
            subm.load_state_dict({"weight": w})
            differs = not torch.allclose(subm(x).feats, want, atol=1e-3)
            assert differs == any(k % 2 == 0 and k >= 4 for k in size)
    assert torch.equal(got.coords, x.coords)
    torch.testing.assert_close(got.feats, want, atol=1e-5, rtol=1e-5)

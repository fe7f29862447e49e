"""Every recipe of ``docs/convert-checkpoint.md``, against an independent oracle.

Each test id below is one row of the recipe table (framework x version x layer
kind).  A row converts the framework's own weights with ``convert-checkpoint``
(in the framework's saved layout), rebuilds the layer with the Lattice module
the table names, and compares rows and features with the oracle:

* spconv -- the real, installed spconv 2.3.8 on CPU, one thread (its CPU
  scatter-add races); checkpoints of spconv 1.x and 2.0/2.1 are the same
  weights in RSCK / RSKC order, as those releases saved them;
* TorchSparse 2.0 / 2.1 and MinkowskiEngine -- ``framework_reference``, a
  NumPy re-derivation of each framework's kernel map and conv from its source
  code, which imports nothing of torch_lattice.

``test_every_table_row_has_a_test`` ties the doc table and this file together.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import framework_reference as ref
import numpy as np
import pytest
import spconv.pytorch as spconv
import torch
from torch_lattice import SparseTensor, canonical_order, nn, ops
from torch_lattice.convert import KernelSpec, convert_state_dict

SHAPE = [48, 48, 48]
DOC = Path(__file__).resolve().parents[3] / "docs" / "convert-checkpoint.md"
BACKED: set[str] = set()
"""Doc table rows backed by a single test of this file (see :func:`backs`)."""


def backs(*row_ids: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Record, at import time, which doc table rows a test backs."""

    def mark(test: Callable[..., None]) -> Callable[..., None]:
        BACKED.update(row_ids)
        return test

    return mark


pytestmark = pytest.mark.usefixtures("one_thread")


def _cloud(seed: int, *, stride: int = 1, rows: int = 160, channels: int = 4) -> SparseTensor:
    """Random rows well inside SHAPE (spconv drops outputs outside its grid)."""
    gen = torch.Generator().manual_seed(seed)
    xyz = torch.randint(12 // stride, 36 // stride, (rows, 3), generator=gen) * stride
    batch = torch.randint(0, 2, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    feats = torch.randn(len(coords), channels, generator=gen, dtype=torch.float64)
    return SparseTensor(coords, feats.float(), stride=stride)


def _sorted(coords: torch.Tensor, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    perm = canonical_order(coords.to(torch.int32))
    return coords.to(torch.int32)[perm], feats[perm]


def _assert_same(ours: SparseTensor, coords: Any, feats: Any) -> float:
    """Exact rows, close features; returns the max abs feature error.

    With ``LATTICE_RECIPE_ERRORS=path`` set, each test's error is appended to
    that file (how the measured errors of the doc table are collected).
    """
    want_c, want_f = _sorted(torch.as_tensor(coords), torch.as_tensor(feats, dtype=torch.float32))
    got_c, got_f = _sorted(ours.coords, ours.feats)
    assert torch.equal(got_c, want_c)
    torch.testing.assert_close(got_f, want_f, atol=1e-4, rtol=1e-4)
    err = float((got_f - want_f).abs().max()) if len(got_f) else 0.0
    log = os.environ.get("LATTICE_RECIPE_ERRORS")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
            f.write(f"{test}\t{len(got_c)}\t{err:.3g}\n")
    return err


def _convert(tensor: torch.Tensor, declaration: dict[str, Any]) -> torch.Tensor:
    spec = KernelSpec.from_json(
        {"format": "lattice-kernel-spec", "version": 2, "kernels": {"k": declaration}}
    )
    return convert_state_dict({"k": tensor}, spec).tensors["k"]


def _load(module: torch.nn.Module, weight: torch.Tensor) -> torch.nn.Module:
    module.load_state_dict({"weight": weight})
    return module


# ---------------------------------------------------------------------------
# spconv: the real library is the oracle.

SPCONV_LAYOUTS: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    # version -> (declared version, KRSC weight -> that release's saved tensor)
    "2.2": ("2.2", lambda w: w.clone()),
    "2.0": ("2.0", lambda w: w.permute(1, 2, 3, 0, 4).contiguous()),  # RSKC
    "1": ("1", lambda w: w.permute(1, 2, 3, 4, 0).contiguous()),  # RSCK
}


def _spconv_tensor(x: SparseTensor) -> Any:
    return spconv.SparseConvTensor(x.feats, x.coords.contiguous(), SHAPE, 2)


def _spconv_rows(out: Any, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    coords = out.indices.to(torch.int32).clone()
    coords[:, 1:] *= stride
    return coords, out.features


def _spconv_weight(module: Any, version: str, declaration: dict[str, Any]) -> torch.Tensor:
    declared, saved = SPCONV_LAYOUTS[version]
    w = module.weight.detach()
    if tuple(w.shape[1:4]) == (1, 1, 1) and version == "1":
        # spconv 1.x stored a 1x1x1 kernel RSCK, i.e. already (C_in, C_out).
        matmul = declaration.get("subm") or declaration.get("stride") == 1
        c_out, c_in = w.shape[0], w.shape[4]
        rsck = (w.reshape(c_in, c_out) if matmul else w.reshape(c_out, c_in).T).reshape(
            1, 1, 1, c_in, c_out
        )
        return _convert(rsck.contiguous(), {"framework": "spconv", "version": declared})
    return _convert(saved(w), {"framework": "spconv", "version": declared, **declaration})


SPCONV_FORWARD = [
    # row, spconv module, Lattice module, declaration, output stride
    (
        "spconv-subm-odd",
        lambda: spconv.SubMConv3d(4, 6, (3, 1, 5), bias=False),
        lambda: nn.SubmConv3d(4, 6, (3, 1, 5), bias=False),
        {},
        1,
    ),
    (
        "spconv-subm-dilated",
        lambda: spconv.SubMConv3d(4, 6, 3, dilation=2, bias=False),
        lambda: nn.SubmConv3d(4, 6, 3, dilation=2, bias=False),
        {},
        1,
    ),
    (
        "spconv-conv-s1",
        lambda: spconv.SparseConv3d(4, 6, (3, 2, 3), padding=(1, 0, 2), bias=False),
        lambda: nn.FullConv3d(4, 6, (3, 2, 3), padding=(1, 0, 2), bias=False),
        {},
        1,
    ),
    (
        "spconv-conv-strided",
        lambda: spconv.SparseConv3d(4, 6, 3, stride=2, padding=1, bias=False),
        lambda: nn.FullConv3d(4, 6, 3, stride=2, padding=1, bias=False),
        {},
        2,
    ),
    (
        "spconv-conv-k2s2",
        lambda: spconv.SparseConv3d(4, 6, 2, stride=2, bias=False),
        lambda: nn.FullConv3d(4, 6, 2, stride=2, bias=False),
        {},
        2,
    ),
    (
        "spconv-conv-dilated",
        lambda: spconv.SparseConv3d(4, 6, 3, stride=2, padding=2, dilation=2, bias=False),
        lambda: nn.FullConv3d(4, 6, 3, stride=2, padding=2, dilation=2, bias=False),
        {},
        2,
    ),
    (
        "spconv-1x1-s1",
        lambda: spconv.SubMConv3d(4, 6, 1, bias=False),
        lambda: nn.SubmConv3d(4, 6, 1, bias=False),
        {"subm": True},
        1,
    ),
    (
        "spconv-1x1-s1",
        lambda: spconv.SparseConv3d(4, 6, 1, bias=False),
        lambda: nn.FullConv3d(4, 6, 1, bias=False),
        {"stride": 1},
        1,
    ),
    (
        "spconv-1x1-strided",
        lambda: spconv.SparseConv3d(4, 6, 1, stride=2, bias=False),
        lambda: nn.FullConv3d(4, 6, 1, stride=2, bias=False),
        {"stride": 2},
        2,
    ),
]


@pytest.mark.parametrize("version", list(SPCONV_LAYOUTS))
@pytest.mark.parametrize(
    ("row_id", "theirs", "ours", "declaration", "stride"),
    [pytest.param(*case, id=f"{case[0]}-{i}") for i, case in enumerate(SPCONV_FORWARD)],
)
def test_spconv_forward(row_id, theirs, ours, declaration, stride, version) -> None:
    torch.manual_seed(7)
    module = theirs()
    lattice = _load(ours(), _spconv_weight(module, version, declaration))
    x = _cloud(1)
    with torch.no_grad():
        _assert_same(lattice(x), *_spconv_rows(module(_spconv_tensor(x)), stride))


@backs("spconv-transposed")
@pytest.mark.parametrize("version", list(SPCONV_LAYOUTS))
def test_spconv_transposed(version: str) -> None:
    torch.manual_seed(8)
    module = spconv.SparseConvTranspose3d(4, 6, 3, stride=2, padding=1, bias=False)
    lattice = _load(
        nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, bias=False),
        _spconv_weight(module, version, {}),
    )
    x = _cloud(2, stride=2)
    coarse = spconv.SparseConvTensor(
        x.feats, torch.cat([x.coords[:, :1], x.coords[:, 1:] // 2], 1), [24] * 3, 2
    )
    with torch.no_grad():
        _assert_same(lattice(x), *_spconv_rows(module(coarse), 1))


@backs("spconv-inverse")
@pytest.mark.parametrize("version", list(SPCONV_LAYOUTS))
@pytest.mark.parametrize("kernel", [3, 2])
def test_spconv_inverse(kernel: int, version: str) -> None:
    """SparseInverseConv3d goes back onto its paired conv's input rows."""
    torch.manual_seed(9)
    pad = 1 if kernel == 3 else 0
    down = spconv.SparseConv3d(4, 5, kernel, stride=2, padding=pad, bias=False, indice_key="d")
    inverse = spconv.SparseInverseConv3d(5, 6, kernel, bias=False, indice_key="d")
    ours_down = _load(
        nn.FullConv3d(4, 5, kernel, stride=2, padding=pad, bias=False),
        _spconv_weight(down, version, {}),
    )
    ours_up = _load(
        nn.TargetConvTranspose3d(5, 6, kernel, stride=2, padding=pad, bias=False),
        _spconv_weight(inverse, version, {}),
    )
    x = _cloud(3)
    with torch.no_grad():
        want = _spconv_rows(inverse(down(_spconv_tensor(x))), 1)
        _assert_same(ours_up(ours_down(x), x), *want)


@backs("spconv-inverse-1x1")
def test_spconv_inverse_1x1_stays_on_its_input_rows() -> None:
    """A 1x1x1 SparseInverseConv3d is spconv's 1x1 matmul on its own input rows."""
    torch.manual_seed(10)
    down = spconv.SparseConv3d(4, 5, 1, stride=2, bias=False, indice_key="d")
    inverse = spconv.SparseInverseConv3d(5, 6, 1, bias=False, indice_key="d")
    ours_down = _load(
        nn.FullConv3d(4, 5, 1, stride=2, bias=False), _spconv_weight(down, "2.2", {"stride": 2})
    )
    ours_up = _load(
        nn.SubmConv3d(5, 6, 1, bias=False), _spconv_weight(inverse, "2.2", {"stride": 1})
    )
    x = _cloud(4)
    with torch.no_grad():
        coarse = down(_spconv_tensor(x))
        want = _spconv_rows(inverse(coarse), 2)
        _assert_same(ours_up(ours_down(x)), *want)
    assert len(want[0]) < x.num_rows  # the coarse rows, not the paired conv's input


@backs("spconv-grid-edge")
def test_spconv_drops_outputs_outside_its_grid() -> None:
    """Lattice keeps every output row; spconv's are the ones inside [0, out_shape)."""
    torch.manual_seed(11)
    module = spconv.SparseConv3d(4, 6, 3, stride=1, padding=0, bias=False)
    lattice = _load(nn.FullConv3d(4, 6, 3, bias=False), _spconv_weight(module, "2.2", {}))
    gen = torch.Generator().manual_seed(12)
    xyz = torch.randint(0, 4, (40, 3), generator=gen)  # touching the grid's low corner
    coords = torch.unique(torch.cat([torch.zeros(40, 1, dtype=torch.long), xyz], 1), dim=0)
    x = SparseTensor(coords.to(torch.int32), torch.randn(len(coords), 4, generator=gen))
    with torch.no_grad():
        want = _spconv_rows(module(spconv.SparseConvTensor(x.feats, x.coords, [8] * 3, 1)), 1)
        got = lattice(x)
    inside = ((got.coords[:, 1:] >= 0) & (got.coords[:, 1:] < 6)).all(1)  # out shape 8 - 2
    assert not bool(inside.all())  # Lattice produced rows spconv cannot hold
    cropped = SparseTensor(got.coords[inside], got.feats[inside])
    _assert_same(cropped, *want)


# ---------------------------------------------------------------------------
# TorchSparse 2.0 / 2.1 and MinkowskiEngine: NumPy references from their source.


def _flat_kernel(
    seed: int, size: tuple[int, int, int], c_in: int = 4, c_out: int = 6
) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(size[0] * size[1] * size[2], c_in, c_out, generator=gen) * 0.3


def _np(x: SparseTensor) -> tuple[np.ndarray, np.ndarray]:
    return x.coords.numpy().astype(np.int64), x.feats.double().numpy()


def _stored(framework: str, version: str, kernel: torch.Tensor, stride: int) -> torch.Tensor:
    """How the framework saves a kernel of its own row order (1x1x1: 2-D in some cases)."""
    if kernel.shape[0] != 1:
        return kernel
    two_d = framework == "minkowski" or version == "2.0" or stride == 1
    return kernel[0] if two_d else kernel


SOURCES = {
    "ts20": ("torchsparse", "2.0"),
    "ts21": ("torchsparse", "2.1"),
    "me": ("minkowski", "0.5"),
}
"""Row-id prefix -> (framework, version)."""

TS_ME_FORWARD = [
    # row, kernel_size, stride, dilation, Lattice module, its keyword arguments
    ("ts20-s1-odd", (3, 3, 3), 1, 2, "SubmConv3d", {}),  # TorchSparse ignores dilation
    ("ts20-s1-even", (4, 4, 4), 1, 1, "SubmConv3d", {}),
    ("ts20-s1-even", (2, 2, 2), 1, 1, "SubmConv3d", {}),
    ("ts20-s1-mixed", (3, 1, 4), 1, 1, "SubmConv3d", {}),
    ("ts20-strided", (2, 2, 2), 2, 1, "Conv3d", {"stride": 2}),
    ("ts20-strided", (3, 3, 3), 3, 1, "Conv3d", {"stride": 3}),
    ("ts20-strided", (4, 4, 4), 4, 1, "Conv3d", {"stride": 4, "padding": 1}),
    ("ts20-1x1-s1", (1, 1, 1), 1, 1, "SubmConv3d", {}),
    ("ts20-1x1-strided", (1, 1, 1), 2, 1, "Conv3d", {"stride": 2}),
    ("ts21-s1-odd", (3, 1, 3), 1, 1, "SubmConv3d", {}),
    ("ts21-s1-even", (4, 4, 4), 1, 1, "Conv3d", {}),
    ("ts21-s1-even", (2, 2, 2), 1, 1, "Conv3d", {}),
    ("ts21-strided", (2, 2, 2), 2, 1, "Conv3d", {"stride": 2}),
    ("ts21-strided", (3, 3, 3), 3, 1, "Conv3d", {"stride": 3}),
    ("ts21-1x1-s1", (1, 1, 1), 1, 1, "SubmConv3d", {}),
    ("ts21-1x1-strided", (1, 1, 1), 2, 1, "Conv3d", {"stride": 2}),
    ("me-s1-odd", (3, 3, 3), 1, 2, "SubmConv3d", {"dilation": 2}),
    ("me-s1-even", (2, 2, 2), 1, 1, "Conv3d", {}),
    ("me-s1-even", (4, 4, 4), 1, 2, "Conv3d", {"dilation": 2}),
    ("me-s1-mixed", (4, 3, 3), 1, 1, "Conv3d", {}),
    ("me-strided", (2, 2, 2), 2, 1, "Conv3d", {"stride": 2}),
    ("me-strided", (3, 3, 3), 2, 1, "Conv3d", {"stride": 2}),
    ("me-strided", (3, 2, 4), 2, 2, "Conv3d", {"stride": 2, "dilation": 2}),
    ("me-1x1-s1", (1, 1, 1), 1, 1, "SubmConv3d", {}),
    ("me-1x1-strided", (1, 1, 1), 2, 1, "Conv3d", {"stride": 2}),
]


def _source(row_id: str) -> tuple[str, str, str]:
    """framework, version and the reference's name for a row id."""
    framework, version = SOURCES[row_id.split("-")[0]]
    return framework, version, framework if framework == "minkowski" else f"{framework}-{version}"


@pytest.mark.parametrize(
    ("row_id", "size", "stride", "dilation", "module", "kwargs"),
    [pytest.param(*case, id=f"{case[0]}-{'x'.join(map(str, case[1]))}") for case in TS_ME_FORWARD],
)
def test_torchsparse_minkowski_forward(row_id, size, stride, dilation, module, kwargs) -> None:
    framework, version, name = _source(row_id)
    kernel = _flat_kernel(len(row_id) + sum(size), size)
    x = _cloud(5)
    want_c, want_f = ref.forward_conv(
        name, *_np(x), kernel.double().numpy(), size, stride=stride, dilation=dilation
    )
    declaration = {"framework": framework, "version": version, "kernel_size": list(size)}
    lattice = getattr(nn, module)(4, 6, size, bias=False, **kwargs)
    _load(lattice, _convert(_stored(framework, version, kernel, stride), declaration))
    with torch.no_grad():
        _assert_same(lattice(x), want_c, want_f)


@backs("ts21-s1-mixed")
@pytest.mark.parametrize("size", [(3, 3, 2), (3, 1, 2)])
def test_torchsparse21_mixed_parity_is_full_conv_onto_the_input(size) -> None:
    """2.1 reads 0..K-1 on every axis of an even-volume kernel, odd axes included."""
    kernel = _flat_kernel(13, size)
    x = _cloud(6)
    want_c, want_f = ref.forward_conv("torchsparse-2.1", *_np(x), kernel.double().numpy(), size)
    declaration = {"framework": "torchsparse", "version": "2.1", "kernel_size": list(size)}
    full = _load(nn.FullConv3d(4, 6, size, bias=False), _convert(kernel, declaration))
    with torch.no_grad():
        got = ops.sparse_reindex(full(x), x)
    _assert_same(got, want_c, want_f)


TRANSPOSED = [
    # row, kernel_size, stride, padding of the Lattice transpose
    ("ts20-transposed", (2, 2, 2), 2, 0),
    ("ts20-transposed", (3, 3, 3), 3, 1),
    ("ts21-transposed", (2, 2, 2), 2, 0),
    ("me-transposed", (2, 2, 2), 2, 0),
    ("me-transposed", (3, 3, 3), 2, 1),
    ("me-transposed", (4, 3, 2), 2, (0, 1, 0)),
]


@pytest.mark.parametrize(
    ("row_id", "size", "stride", "padding"),
    [pytest.param(*case, id=f"{case[0]}-{'x'.join(map(str, case[1]))}") for case in TRANSPOSED],
)
def test_transposed_back_onto_the_fine_rows(row_id, size, stride, padding) -> None:
    framework, version, name = _source(row_id)
    fine = _cloud(7)
    coarse_coords = ref.coarsen(fine.coords.numpy().astype(np.int64), (stride,) * 3)
    gen = torch.Generator().manual_seed(14)
    coarse = SparseTensor(
        torch.as_tensor(coarse_coords, dtype=torch.int32),
        torch.randn(len(coarse_coords), 4, generator=gen),
        stride=stride,
    )
    kernel = _flat_kernel(15, size)
    want = ref.transposed_conv(
        name, *_np(coarse), kernel.double().numpy(), size, fine.coords.numpy().astype(np.int64)
    )
    declaration = {"framework": framework, "version": version, "kernel_size": list(size)}
    up = nn.TargetConvTranspose3d(4, 6, size, stride=stride, padding=padding, bias=False)
    _load(up, _convert(_stored(framework, version, kernel, 2), declaration))
    with torch.no_grad():
        _assert_same(up(coarse, fine), fine.coords, want)


@backs("me-generative")
def test_minkowski_generative_even_kernel() -> None:
    x = _cloud(8, stride=2)
    kernel = _flat_kernel(16, (2, 2, 2))
    want_c, want_f = ref.minkowski_generative(
        *_np(x), kernel.double().numpy(), (2, 2, 2), fine_stride=1
    )
    declaration = {"framework": "minkowski", "kernel_size": 2}
    gen_conv = _load(
        nn.GenerativeConvTranspose3d(4, 6, 2, stride=2, bias=False), _convert(kernel, declaration)
    )
    with torch.no_grad():
        _assert_same(gen_conv(x), want_c, want_f)


# ---------------------------------------------------------------------------
# The doc table and this file agree.


def _doc_rows() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z0-9.]+-[a-z0-9.-]+)` \|", text, flags=re.M))


def test_every_table_row_has_a_test() -> None:
    tested = BACKED | {c[0] for c in SPCONV_FORWARD + TS_ME_FORWARD + TRANSPOSED}
    rows = _doc_rows()
    assert rows, f"no recipe rows found in {DOC}"
    assert rows == tested, (
        f"rows without a test: {sorted(rows - tested)}; "
        f"tests without a row: {sorted(tested - rows)}"
    )


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


@pytest.mark.parametrize("version", ["2.1", "1"])
def test_spconv_network_through_the_cli(tmp_path: Path, version: str) -> None:
    """A saved spconv checkpoint, its spec file and ``convert-checkpoint`` end to end."""
    import json

    from safetensors.torch import load_file
    from torch_lattice.convert import main

    torch.manual_seed(10)
    net = spconv.SparseSequential(
        spconv.SubMConv3d(4, 8, 3, bias=False, indice_key="s1"),
        spconv.SparseConv3d(8, 16, 3, stride=2, padding=1, bias=False, indice_key="d1"),
        spconv.SubMConv3d(16, 16, 1, bias=False, indice_key="s2"),
        spconv.SparseInverseConv3d(16, 8, 3, bias=False, indice_key="d1"),
    )
    state = {k: v for k, v in net.state_dict().items() if k.endswith("weight")}
    if version == "1":  # the same weights as spconv 1.x stored them (RSCK)
        state = {
            k: v.reshape(1, 1, 1, v.shape[4], v.shape[0])
            if tuple(v.shape[1:4]) == (1, 1, 1)
            else v.permute(1, 2, 3, 4, 0).contiguous()
            for k, v in state.items()
        }
    else:  # spconv 2.1 on a CPU-only build saved RSKC
        state = {k: v.permute(1, 2, 3, 0, 4).contiguous() for k, v in state.items()}
    torch.save(state, tmp_path / "spconv.pth")
    one = {"framework": "spconv", "version": version, "kernel_size": 3}
    spec = {
        "format": "lattice-kernel-spec",
        "version": 2,
        "kernels": {
            "0.weight": one,
            "1.weight": one,
            "2.weight": {"framework": "spconv", "version": version, "subm": True, "kernel_size": 1},
            "3.weight": one,
        },
        "rename": [["^0\\.", "stem."], ["^1\\.", "down."], ["^2\\.", "mix."], ["^3\\.", "up."]],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    dst = tmp_path / "weights.safetensors"
    argv = [str(tmp_path / "spconv.pth"), str(dst), "--kernel-spec", str(tmp_path / "spec.json")]
    assert main(argv) == 0
    ours = _LatticeNet()
    ours.load_state_dict(load_file(str(dst)))
    x = _cloud(4)
    with torch.no_grad():
        _assert_same(ours(x), *_spconv_rows(net(_spconv_tensor(x)), 1))

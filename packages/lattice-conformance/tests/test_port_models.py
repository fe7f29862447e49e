"""Ported framework models export and replay on MLX.

``torch_lattice.port.from_torchsparse`` rebuilds TorchSparse's
``SparseResUNet42`` (the layer classes with TorchSparse's names live beside
the torch_lattice tests, in ``torchsparse_layers.py``) and
``from_spconv`` an OpenPCDet-style backbone; each ported model is exported
with ``save_lattice_model_artifact`` and run by ``mlx_lattice``: coordinates
must match exactly and features to f32 rounding.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import numpy as np
import torch
import torch_lattice
from mlx_lattice import SparseTensor as MxSparse
from mlx_lattice import canonical_order as mx_canonical_order
from mlx_lattice.artifact import load_lattice_program
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.port import from_minkowski, from_torchsparse

_TORCH_TESTS = Path(__file__).resolve().parents[2] / "torch-lattice" / "tests"


def _layers(name: str = "torchsparse_layers") -> ModuleType:
    path = _TORCH_TESTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lattice_{name}_port", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _compare(ours: torch_lattice.SparseTensor, theirs: Any) -> float:
    assert isinstance(theirs, MxSparse)
    assert tuple(theirs.stride) == ours.stride
    pt = torch_lattice.canonical_order(ours.coords)
    pm = np.array(mx_canonical_order(theirs.coords))
    np.testing.assert_array_equal(np.array(theirs.coords)[pm], ours.coords[pt].numpy())
    ft = ours.feats[pt].detach().numpy()
    fm = np.array(theirs.feats)[pm]
    np.testing.assert_allclose(fm, ft, rtol=1e-4, atol=1e-4)
    return float(np.abs(fm - ft).max())


def test_ported_sparse_resunet42_exports_and_replays_on_mlx(tmp_path: Path) -> None:
    ts = _layers()
    torch.manual_seed(3)
    model = ts.randomise(ts.SparseResUNet42(width=0.25), 4)
    ported = from_torchsparse(model, version="2.1", types=ts.TYPES).eval()
    gen = torch.Generator().manual_seed(5)
    xyz = torch.randint(0, 32, (500, 3), generator=gen)
    coords = torch.unique(torch.cat([torch.zeros(500, 1, dtype=torch.long), xyz], 1), dim=0)
    x = torch_lattice.SparseTensor(
        coords.to(torch.int32), torch.randn(len(coords), 4, generator=gen)
    )
    path = tmp_path / "resunet42.lattice"
    save_lattice_model_artifact(ported, (x,), path)
    with torch.no_grad():
        want = ported(x)
    program = load_lattice_program(path)
    got = program(MxSparse(mx.array(x.coords.numpy()), mx.array(x.feats.numpy())))
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want) == 9
    errors = [_compare(w, g) for w, g in zip(want, got, strict=True)]
    assert max(errors) < 1e-4


def test_ported_minkowski_net_exports_and_replays_on_mlx(tmp_path: Path) -> None:
    """A MinkowskiEngine tree (stand-in classes, ``minkowski_layers``) on MLX, edges and 2 items."""
    me = _layers("minkowski_layers")
    net = torch.nn.Sequential(
        me.MinkowskiConvolution(4, 8, 3),
        me.MinkowskiBatchNorm(8),
        me.MinkowskiReLU(),
        me.MinkowskiConvolution(8, 16, 2, stride=2),
        me.BasicBlock(16, 16),
        me.MinkowskiConvolutionTranspose(16, 8, 2, stride=2),
        me.MinkowskiConvolution(8, 4, 1, bias=True),
    )
    ported = from_minkowski(net, types=me.TYPES).eval()
    gen = torch.Generator().manual_seed(6)
    xyz = torch.cat(
        [
            torch.tensor([[0, 5, 5], [23, 5, 5], [5, 0, 5], [5, 23, 5], [5, 5, 0], [5, 5, 23]]),
            torch.randint(0, 24, (400, 3), generator=gen),
        ]
    )
    batch = torch.randint(0, 2, (len(xyz), 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    x = torch_lattice.SparseTensor(coords, torch.randn(len(coords), 4, generator=gen))
    path = tmp_path / "minkowski.lattice"
    save_lattice_model_artifact(ported, (x,), path)
    with torch.no_grad():
        want = ported(x)
    got = load_lattice_program(path)(
        MxSparse(mx.array(x.coords.numpy()), mx.array(x.feats.numpy()))
    )
    assert _compare(want, got) < 1e-4


def test_ported_minkunet14_replays_on_mlx(tmp_path: Path) -> None:
    """ME's MinkUNet14 (stand-in classes, narrowed) ported, exported, replayed on MLX."""
    me = _layers("minkowski_layers")
    torch.manual_seed(8)
    ported = from_minkowski(me.MinkUNet14(4, 19, width=0.125), types=me.TYPES).eval()
    gen = torch.Generator().manual_seed(9)
    xyz = torch.cat(
        [
            torch.tensor([[0, 9, 9], [31, 9, 9], [9, 0, 9], [9, 31, 9], [9, 9, 0], [9, 9, 31]]),
            torch.randint(0, 32, (700, 3), generator=gen),
        ]
    )
    batch = torch.randint(0, 2, (len(xyz), 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    x = torch_lattice.SparseTensor(coords, torch.randn(len(coords), 4, generator=gen))
    path = tmp_path / "minkunet14.lattice"
    save_lattice_model_artifact(ported, (x,), path)
    with torch.no_grad():
        want = ported(x)
    got = load_lattice_program(path)(
        MxSparse(mx.array(x.coords.numpy()), mx.array(x.feats.numpy()))
    )
    assert _compare(want, got) < 1e-4

"""The reference system's own fixtures of the extra ops, replayed on both runtimes.

``normalized_convolution``, ``pool_transpose`` and ``trilinear_upsample`` in
``../shared/upstream/fixtures`` were exported by upstream's torch producer
(on CUDA) with its expected outputs.  Each case's ``graph.mlir`` is taken as
written, its digest substituted by this dialect's (the only change the
migration makes to these graphs), verified natively, and run as an artifact
on MLX and on torch with the case's inputs; output coordinates must match
exactly and features within the manifest's tolerances.  Two of the cases
carry their coarse source coordinates in lattice units (not divisible by the
declared stride 2): they are multiplied by the stride, as replay's
``--coords lattice-units`` does.  The functional ops are checked on the same
data too, so a failure says whether the op or the artifact path broke.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx.core as mx
import mlx_lattice
import numpy as np
import pytest
import torch
import torch_lattice
from lattice_contract import SCHEMA_DIGEST
from lattice_contract.plan import import_native_plan
from mlx_lattice.artifact import LatticeProgram as MlxProgram
from safetensors.numpy import load_file
from torch_lattice.artifact import LatticeProgram as TorchProgram


def _upstream_root() -> Path:
    """``$LATTICE_UPSTREAM``, else the nearest ``shared/upstream`` above the repository."""
    import os

    if os.environ.get("LATTICE_UPSTREAM"):
        return Path(os.environ["LATTICE_UPSTREAM"])
    for parent in Path(__file__).resolve().parents[3].parents:
        if (parent / "shared" / "upstream").is_dir():
            return parent / "shared" / "upstream"
    return Path(__file__).resolve().parents[3].parent / "shared" / "upstream"


UPSTREAM = _upstream_root() / "fixtures"
UPSTREAM_DIGEST = "1380f1e819fc0eb1af587202ecec3c14ec2c981d249333c5061f0263f82072ad"
CASES = ("normalized_convolution", "pool_transpose", "trilinear_upsample")
WORST: dict[str, dict[str, float]] = {}


def _manifest() -> dict[str, dict[str, Any]]:
    path = UPSTREAM / "manifest.json"
    assert path.is_file(), f"upstream fixtures not found at {UPSTREAM}"
    return {c["name"]: c for c in json.loads(path.read_text())["cases"]}


def _inputs(case: Path, plan: Any) -> dict[str, np.ndarray]:
    """ABI arrays by name; coordinates in lattice units are scaled by their declared stride."""
    raw = load_file(str(case / "inputs.safetensors"))
    strides = {
        op.operands[0]: tuple(op.attrs["stride"])
        for op in plan.ops
        if op.definition.name == "sparse.make"
    }
    out = {}
    for arg in plan.args:
        value = raw[arg.abi_name]
        if arg.role == "sparse_coords":
            scale = np.array((1, *strides[arg.name]), dtype=np.int32)
            if np.any(value[:, 1:] % scale[1:]):
                value = value * scale
        out[arg.abi_name] = value
    return out


@pytest.mark.parametrize("name", CASES)
def test_upstream_fixture_replays_on_both_runtimes(name: str) -> None:
    spec = _manifest()[name]
    case = UPSTREAM / name
    graph = (case / "graph.mlir").read_text()
    assert UPSTREAM_DIGEST in graph
    plan = import_native_plan(graph.replace(UPSTREAM_DIGEST, SCHEMA_DIGEST))
    weights = load_file(str(case / "weights.safetensors"))
    inputs = _inputs(case, plan)
    expected = load_file(str(case / "expected.safetensors"))
    want_coords, want = expected["output.coords"], expected["output.features"]
    programs = {
        "mlx": MlxProgram(plan, {k: mx.array(v) for k, v in weights.items()}),
        "torch": TorchProgram(plan, {k: torch.from_numpy(v.copy()) for k, v in weights.items()}),
    }
    for runtime, program in programs.items():
        if runtime == "mlx":
            got = program(**{k: mx.array(v) for k, v in inputs.items()})
            coords, feats = np.asarray(got.coords), np.asarray(got.feats)
        else:
            got = program(**{k: torch.from_numpy(v.copy()) for k, v in inputs.items()})
            coords, feats = got.coords.numpy(), got.feats.numpy()
        order = np.lexsort(coords.T[::-1])
        want_order = np.lexsort(want_coords.T[::-1])
        np.testing.assert_array_equal(coords[order], want_coords[want_order])
        err = np.abs(feats[order] - want[want_order])
        WORST.setdefault(name, {})[runtime] = float(err.max())
        np.testing.assert_allclose(
            feats[order], want[want_order], rtol=spec["rtol"], atol=spec["atol"]
        )


def test_upstream_fixtures_through_the_functional_ops() -> None:
    """The same numbers from ``ops`` directly (the upstream graphs' geometry spelled out)."""
    # (ops module, SparseTensor class, NumPy -> runtime array) of each runtime.
    runtimes: list[tuple[ModuleType, Callable[..., Any], Callable[[np.ndarray], Any]]] = [
        (mlx_lattice.ops, mlx_lattice.SparseTensor, mx.array),
        (torch_lattice.ops, torch_lattice.SparseTensor, lambda a: torch.from_numpy(a.copy())),
    ]
    for lib, sparse, arr in runtimes:
        raw = load_file(str(UPSTREAM / "normalized_convolution" / "inputs.safetensors"))
        w = load_file(str(UPSTREAM / "normalized_convolution" / "weights.safetensors"))
        want = load_file(str(UPSTREAM / "normalized_convolution" / "expected.safetensors"))
        x = sparse(arr(raw["x_coords"]), arr(raw["x_features"]))
        y = lib.normalized_subm_conv3d(
            x, arr(w["conv.weight"]), arr(w["conv.bias"]), kernel_size=(3, 1, 1), eps=1e-8
        )
        np.testing.assert_allclose(np.asarray(y.feats), want["output.features"], atol=2e-3)
        for name, call in (
            ("pool_transpose", "pool_transpose3d"),
            ("trilinear_upsample", "trilinear_upsample3d"),
        ):
            raw = load_file(str(UPSTREAM / name / "inputs.safetensors"))
            want = load_file(str(UPSTREAM / name / "expected.safetensors"))
            src = raw["source_coords"] * np.array([1, 2, 1, 1], dtype=np.int32)
            s = sparse(arr(src), arr(raw["source_features"]), (2, 1, 1))
            t = sparse(arr(raw["target_coords"]), arr(raw["target_features"]))
            geometry: dict[str, Any] = {"stride": (2, 1, 1)}
            if call == "pool_transpose3d":
                geometry.update(kernel_size=(3, 1, 1), padding=(1, 0, 0))
            y = getattr(lib, call)(s, coordinates=t, **geometry)
            np.testing.assert_array_equal(np.asarray(y.coords), want["output.coords"])
            np.testing.assert_allclose(
                np.asarray(y.feats), want["output.features"], rtol=1e-5, atol=1e-6
            )


def test_zz_report_upstream_fixture_errors() -> None:
    """Print the worst |error| per upstream case and runtime (run with -s)."""
    assert set(WORST) == set(CASES), "the replay cases above did not all run"
    for name in CASES:
        print(f"{name:24s} mlx {WORST[name]['mlx']:.3g}  torch {WORST[name]['torch']:.3g}")

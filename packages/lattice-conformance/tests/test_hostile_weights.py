"""Both runtimes' bundle loaders refuse hostile weight files with the same error.

The hostile files are the contract's own table
(``lattice-contract/tests/test_safetensors_header.py``).  ``mx.load`` alone
loads ten of them (overlapping offsets, trailing bytes, a dimension of 2^32
read as 4, negative dimensions, gaps, duplicate names ...); through
``load_lattice_artifact`` both runtimes refuse every one, with the same
``WeightFileError`` and the same words, before their reader sees the file.
NaN and infinity in float weights are refused too (the policy's choice:
deployed weights must be finite).  Incomplete packed triplets and dtype or
shape drift against the graph are the contract's ``WeightContractError`` at
compile time, again with the same words on both runtimes.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import mlx_lattice.artifact as mla
import numpy as np
import pytest
import torch
import torch_lattice.artifact as tla
from lattice_contract.artifact import WeightFileError
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE


def _contract_table() -> ModuleType:
    root = Path(__file__).resolve().parents[2]
    path = root / "lattice-contract" / "tests" / "test_safetensors_header.py"
    spec = importlib.util.spec_from_file_location("lattice_safetensors_hostile", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


TABLE = _contract_table()


def _graph(dtype: str = "f32") -> str:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype=dtype)
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype=dtype, shape=(2, 1, 1, 1, 4))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=1))
    return b.build()


def _bundle(tmp_path: Path, weights: bytes, graph: str | None = None) -> Path:
    root = tmp_path / "m.lattice"
    root.mkdir()
    (root / GRAPH_FILE).write_text(graph or _graph(), encoding="utf-8")
    (root / WEIGHT_FILE).write_bytes(weights)
    return root


def _refusals(root: Path, load: str = "load_lattice_artifact") -> list[tuple[type, str]]:
    out = []
    for module in (mla, tla):
        with pytest.raises(Exception) as caught:  # the type is compared below
            getattr(module, load)(root)
        out.append((type(caught.value), str(caught.value)))
    return out


@pytest.mark.parametrize(
    ("label", "data", "key", "message"), TABLE.HOSTILE, ids=[case[0] for case in TABLE.HOSTILE]
)
def test_both_loaders_refuse_each_hostile_file_alike(
    tmp_path: Path, label: str, data: bytes, key: str | None, message: str
) -> None:
    root = _bundle(tmp_path, data)
    (mlx_error, mlx_text), (torch_error, torch_text) = _refusals(root)
    assert mlx_error is torch_error is WeightFileError
    assert mlx_text == torch_text
    assert key is None or f"entry {key!r}" in mlx_text


def _dense(value: np.ndarray[Any, Any], dtype: str = "F32") -> bytes:
    return TABLE.raw_file(
        {"w": TABLE.entry(dtype, list(value.shape), 0, value.nbytes)}, value.tobytes()
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_non_finite_float_weights_are_refused_naming_the_key(
    tmp_path: Path, bad: float, dtype: str
) -> None:
    value = np.ones((2, 1, 1, 1, 4), np.float32 if dtype == "F32" else np.float16)
    value[1, 0, 0, 0, 2] = bad
    root = _bundle(tmp_path, _dense(value, dtype), _graph(dtype.lower()))
    refusals = _refusals(root)
    assert refusals[0] == refusals[1]
    assert refusals[0][0] is WeightFileError
    assert "entry 'w': holds 1 NaN or infinite value(s)" in refusals[0][1]


def test_a_finite_hand_made_file_loads_on_both(tmp_path: Path) -> None:
    value = np.arange(8, dtype=np.float32).reshape(2, 1, 1, 1, 4)
    root = _bundle(tmp_path, _dense(value))
    np.testing.assert_array_equal(np.array(mla.load_lattice_artifact(root).weights["w"]), value)
    assert torch.equal(tla.load_lattice_artifact(root).weights["w"], torch.from_numpy(value))


def test_mlx_refuses_a_dimension_it_cannot_represent(tmp_path: Path) -> None:
    # Zero elements, so the bytes agree; MLX's 32-bit shape would still be wrong.
    data = TABLE.raw_file({"w": TABLE.entry("F32", [2**32, 0], 0, 0)})
    root = _bundle(tmp_path, data)
    with pytest.raises(WeightFileError, match=r"entry 'w': has shape \[4294967296, 0\] but MLX"):
        mla.load_lattice_artifact(root)


@pytest.mark.parametrize(
    ("label", "entries", "message"),
    [
        (
            "dtype drift",
            {"w": ("F16", (2, 1, 1, 1, 4))},
            r"weight 'w' is stored as f16 but the graph declares !lattice.weight<conv3d, f32>",
        ),
        ("shape drift", {"w": ("F32", (2, 3, 1, 1, 4))}, r"weight 'w' has shape \(2, 3, 1, 1, 4\)"),
        (
            "incomplete packed triplet",
            {"w.weight": ("U32", (2, 1, 1, 1, 4)), "w.scales": ("F16", (2, 1, 1, 1, 1))},
            r"packed weight 'w' is incomplete: missing w.biases",
        ),
    ],
)
def test_weights_that_drift_from_the_graph_fail_alike_at_compile(
    tmp_path: Path, label: str, entries: dict[str, tuple[str, tuple[int, ...]]], message: str
) -> None:
    header: dict[str, Any] = {}
    at = 0
    for name, (dtype, shape) in entries.items():
        size = int(np.prod(shape)) * TABLE_SIZES[dtype]
        header[name] = TABLE.entry(dtype, list(shape), at, at + size)
        at += size
    graph = _graph()
    if label == "incomplete packed triplet":
        b = MLIRModuleBuilder()
        x = b.add_sparse_input("x", channels=32, dtype="f16")
        pack = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}
        w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", shape=(2, 1, 1, 1, 32), packing=pack)
        b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=1))
        graph = b.build()
    root = _bundle(tmp_path, TABLE.raw_file(header, bytes(at)), graph)
    refusals = _refusals(root, "load_lattice_program")
    assert refusals[0] == refusals[1], refusals
    assert refusals[0][0].__name__ == "WeightContractError"
    assert re.search(message, refusals[0][1]), refusals


TABLE_SIZES = {"F16": 2, "F32": 4, "U32": 4}

"""Weight payloads that look valid but disagree with the graph are refused on both runtimes.

The graph carries no weight shapes (the weight file does), so three kinds of
payload used to reach the kernels: an empty conv (zero output channels; one
runtime died of SIGFPE, the other raised an unrelated reshape error), a
weight whose C_out differs from the width the graph's tensor types declare
(the program returned that other width), and packed scales whose
dequantized values overflow the scale dtype (the call returned infinity).
Each is now a ``WeightContractError`` naming the key, raised alike by both
runtimes when the program is loaded (or, for widths only a sparse value
carries, when the op first runs).  Every payload is built here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx_lattice.artifact as mla
import numpy as np
import pytest
import safetensors.numpy as stn
import torch
import torch_lattice.artifact as tla
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE
from lattice_contract.runtime import WeightContractError
from mlx_lattice import SparseTensor as MLXSparse
from torch_lattice import SparseTensor as TorchSparse


def _bundle(tmp_path: Path, builder: MLIRModuleBuilder, weights: dict[str, np.ndarray]) -> Path:
    root = tmp_path / "m.lattice"
    root.mkdir()
    (root / GRAPH_FILE).write_text(builder.build(), encoding="utf-8")
    stn.save_file(weights, str(root / WEIGHT_FILE))
    return root


def _empty_conv(tmp_path: Path) -> Path:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(2, 3, 3, 3, 4))
    bias = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(2,))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, bias=bias, kernel_size=3))
    empty = {"w": np.zeros((0, 3, 3, 3, 4), np.float32), "b": np.zeros((0,), np.float32)}
    return _bundle(tmp_path, b, empty)


def _refusals(root: Path) -> list[str]:
    texts = []
    for module in (mla, tla):
        with pytest.raises(WeightContractError) as caught:
            module.load_lattice_program(root)
        texts.append(str(caught.value))
    return texts


def test_a_conv_with_zero_output_channels_is_refused_with_the_shape_rule(tmp_path: Path) -> None:
    mlx_text, torch_text = _refusals(_empty_conv(tmp_path))
    assert mlx_text == torch_text
    assert "'w'" in mlx_text and "(0, 3, 3, 3, 4)" in mlx_text
    assert mlx_text.endswith("[rule weight.shape]")


def test_the_empty_conv_no_longer_kills_a_process_that_calls_it(tmp_path: Path) -> None:
    """In a child, so a signal today fails this test instead of the whole run."""
    root = _empty_conv(tmp_path)
    code = (
        "import sys, mlx.core as mx, numpy as np, mlx_lattice.artifact as A\n"
        "from mlx_lattice import SparseTensor as S\n"
        "from lattice_contract.runtime import WeightContractError\n"
        "try:\n"
        "    p = A.load_lattice_program(sys.argv[1])\n"
        "    c = mx.array(np.array([[0, 1, 1, 1], [0, 2, 2, 2]] * 64, np.int32))\n"
        "    p(S(c, mx.ones((128, 4))))\n"
        "except WeightContractError as e:\n"
        "    print('refused', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused") and "[rule weight.shape]" in done.stdout


def test_a_linear_wider_or_narrower_than_its_declared_type_is_refused_at_load(
    tmp_path: Path,
) -> None:
    b = MLIRModuleBuilder()
    x = b.add_input("x", "tensor<?x4xf16>")
    w = b.weight(storage_key="head", layout="linear_o_i", dtype="f16", shape=(8, 4))
    b.add_output("y", b.linear(input=x, weight=w))
    mlx_text, torch_text = _refusals(_bundle(tmp_path, b, {"head": np.ones((5, 4), np.float16)}))
    assert mlx_text == torch_text
    assert "'head' has 5 output channels" in mlx_text and "tensor<?x8xf16>" in mlx_text


def test_a_conv_whose_features_contradict_their_declared_width_fails_when_run(
    tmp_path: Path,
) -> None:
    """A sparse value's type has no width; the features read from it do."""
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(8, 1, 1, 1, 4))
    _, feats, _ = b.sparse_decompose(input=b.subm_conv3d(input=x, weight=w, kernel_size=1))
    b.add_output("f", feats)
    root = _bundle(tmp_path, b, {"w": np.ones((5, 1, 1, 1, 4), np.float32)})
    coords = np.array([[0, 0, 0, 0], [0, 1, 2, 3], [1, 5, 5, 5]], np.int32)
    feats_np = np.ones((3, 4), np.float32)
    texts = []
    calls: list[tuple[Any, Any]] = [
        (mla, MLXSparse(mx.array(coords), mx.array(feats_np))),
        (tla, TorchSparse(torch.from_numpy(coords), torch.from_numpy(feats_np))),
    ]
    for module, value in calls:
        program = module.load_lattice_program(root)
        with pytest.raises(WeightContractError) as caught:
            program(value)
        texts.append(str(caught.value))
    assert texts[0].replace("mlx", "X") == texts[1].replace("torch", "X")
    assert "produced shape (3, 5)" in texts[0] and "tensor<?x8xf32>" in texts[0]


def _packed_linear(tmp_path: Path, scale: float) -> Path:
    b = MLIRModuleBuilder()
    x = b.add_input("x", "tensor<?x32xf16>")
    packing = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}
    w = b.weight(storage_key="head", layout="linear_o_i", shape=(2, 32), packing=packing)
    b.add_output("y", b.linear(input=x, weight=w))
    payload: dict[str, np.ndarray] = {
        "head.weight": np.full((1, 2, 4), 0xFFFFFFFF, np.uint32),  # every code is 15
        "head.scales": np.full((1, 2, 1), scale, np.float16),
        "head.biases": np.zeros((1, 2, 1), np.float16),
    }
    return _bundle(tmp_path, b, payload)


def test_packed_scales_that_dequantize_to_infinity_are_refused(tmp_path: Path) -> None:
    mlx_text, torch_text = _refusals(_packed_linear(tmp_path, 65504.0))
    assert mlx_text == torch_text
    assert "'head' dequantizes to" in mlx_text and "overflows f16" in mlx_text


def test_packed_scales_that_stay_finite_still_load_and_run(tmp_path: Path) -> None:
    root = _packed_linear(tmp_path, 0.5)
    got = mla.load_lattice_program(root)(mx.ones((3, 32), dtype=mx.float16))
    assert got.shape == (3, 2) and bool(mx.all(mx.isfinite(got)))
    out = tla.load_lattice_program(root)(torch.ones((3, 32), dtype=torch.float16))
    assert tuple(out.shape) == (3, 2) and bool(torch.isfinite(out).all())

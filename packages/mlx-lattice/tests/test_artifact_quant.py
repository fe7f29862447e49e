"""Packed int4 / int8 conv and linear artifacts against their dequantized dense weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from artifact_support import MX, np_of, random_sparse, save_and_load, weight
from lattice_contract.builder import MLIRModuleBuilder
from mlx_lattice import SparseTensor, ops
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight

SETTINGS = [
    ("int4", 32, "f16"),
    ("int4", 64, "f32"),
    ("int8", 32, "f16"),
    ("int8", 128, "f32"),  # the builder writes f16 or f32 scales (upstream rejects bf16)
]


def _packing(bits: str, group: int, scale: str) -> dict[str, Any]:
    return {"bits": bits, "group_size": group, "scale_dtype": scale, "mode": "affine"}


def _exact_dequantized(packed: QuantizedWeight) -> mx.array:
    """``scale * q + bias`` evaluated exactly in f32 (no rounding to the scale dtype)."""
    wide = QuantizedWeight(
        packed.weight,
        packed.scales.astype(mx.float32),
        packed.biases.astype(mx.float32),
        packed.bits,
        packed.group_size,
        packed.shape,
    )
    return wide.dequantize()


def _close(got: mx.array, want: mx.array) -> None:
    g, w = np_of(got), np_of(want)
    scale = max(1.0, float(np.abs(w).max()))
    np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3 * scale)  # f16 output rounding


@pytest.mark.parametrize(("bits", "group", "scale"), SETTINGS)
def test_packed_conv_matches_dequantized(tmp_path: Path, bits: str, group: int, scale: str) -> None:
    rng = np.random.default_rng(11)
    c_in, c_out = 128, 16
    dense = weight(rng, c_out, 3, 3, 3, c_in, dtype="f16")
    packed = quantize_weight(dense, bits=int(bits[3:]), group_size=group, scale_dtype=MX[scale])
    bias = weight(rng, c_out, dtype="f16")

    def program(packing: dict[str, Any] | None) -> Any:
        b = MLIRModuleBuilder()
        sx = b.add_sparse_input("x", channels=c_in, dtype="f16")
        wv = b.weight(
            storage_key="enc.conv",
            layout="conv3d_o_xyz_i",
            shape=(c_out, 3, 3, 3, c_in),
            **({"packing": packing} if packing else {"dtype": "f16"}),
        )
        bv = b.weight(storage_key="enc.bias", layout="bias_c", dtype="f16", shape=(c_out,))
        b.add_output(
            "y", b.conv3d(input=sx, weight=wv, bias=bv, kernel_size=3, stride=2, padding=1)
        )
        return b

    quant = save_and_load(
        tmp_path, program(_packing(bits, group, scale)), {"enc.conv": packed, "enc.bias": bias}
    )
    x = random_sparse(rng, 60, c_in, "f16")
    got = quant(x)
    x32 = x.astype(mx.float32)
    want = ops.conv3d(
        x32, _exact_dequantized(packed), bias.astype(mx.float32), kernel_size=3, stride=2, padding=1
    )
    assert isinstance(got, SparseTensor) and got.dtype == mx.float16
    np.testing.assert_array_equal(np_of(got.coords), np_of(want.coords))
    _close(got.feats, want.feats)
    # quantization error itself is visible against the original weights
    original = ops.conv3d(x, dense, bias, kernel_size=3, stride=2, padding=1)
    assert not np.array_equal(np_of(original.feats), np_of(got.feats))


@pytest.mark.parametrize(("bits", "group", "scale"), SETTINGS)
def test_packed_linear_matches_dequantized(
    tmp_path: Path, bits: str, group: int, scale: str
) -> None:
    rng = np.random.default_rng(12)
    c_in, c_out = 128, 24
    dense = weight(rng, c_out, c_in, dtype="f16")
    packed = quantize_weight(dense, bits=int(bits[3:]), group_size=group, scale_dtype=MX[scale])
    b = MLIRModuleBuilder()
    xv = b.add_input("x", f"tensor<?x{c_in}xf16>")
    wv = b.weight(
        storage_key="head",
        layout="linear_o_i",
        shape=(c_out, c_in),
        packing=_packing(bits, group, scale),
    )
    b.add_output("y", b.linear(input=xv, weight=wv))
    program = save_and_load(tmp_path, b, {"head": packed})
    x = weight(rng, 50, c_in, dtype="f16")
    got = program(x)
    reference = ops.linear(x.astype(mx.float32), _exact_dequantized(packed))
    assert got.shape == (50, c_out) and got.dtype == mx.float16
    _close(got, reference)
    # the bundle stores the triplet exactly as packed
    entries = mx.load(str(next(tmp_path.glob("*.lattice")) / "weights.safetensors"))
    assert isinstance(entries, dict)
    assert sorted(entries) == ["head.biases", "head.scales", "head.weight"]
    assert entries["head.weight"].dtype == mx.uint32
    assert entries["head.scales"].dtype == MX[scale]
    assert isinstance(program.compiled.weights["head"].value, QuantizedWeight)


def test_scales_that_do_not_fit_the_packing_name_the_storage_key(tmp_path: Path) -> None:
    """Scales grouped by 16 under a group_size-32 packing (upstream's stored layout).

    The rejection must be a contract error naming the weight and the shape it
    needs, not a bare ValueError from deep inside the runtime's packed type.
    """
    from lattice_contract.runtime import WeightContractError

    rng = np.random.default_rng(5)
    c_in, c_out = 64, 8
    words = quantize_weight(weight(rng, c_out, c_in), bits=8, group_size=32).weight
    groups = mx.ones((1, c_out, c_in // 16), dtype=mx.float16)  # 16-wide groups: too many
    b = MLIRModuleBuilder()
    x = b.add_input("x", "tensor<?x64xf16>")
    wv = b.weight(
        storage_key="head",
        layout="linear_o_i",
        shape=(c_out, c_in),
        packing=_packing("int8", 32, "f16"),
    )
    b.add_output("y", b.linear(input=x, weight=wv))
    weights = {"head.weight": words, "head.scales": groups, "head.biases": groups}
    with pytest.raises(WeightContractError, match=r"packed weight 'head'.*group_size 32 need"):
        save_and_load(tmp_path, b, weights)

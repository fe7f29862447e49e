"""Packed affine weights in upstream's stored layout: layout, dequantization, matmul, validation."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np
import pytest
from mlx_lattice.ops.feature import linear
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight, quantized_matmul
from numpy.typing import NDArray


def data(shape: tuple[int, ...], seed: int = 0) -> NDArray[np.float32]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def unpack(words: NDArray[np.uint32], bits: int) -> NDArray[np.int64]:
    """Independent unpacking: element j of a word sits in bits [j*bits, (j+1)*bits)."""
    per = 32 // bits
    shifts = np.arange(per, dtype=np.uint64) * bits
    q = (words[..., None].astype(np.uint64) >> shifts) & ((1 << bits) - 1)
    return q.reshape(*words.shape[:-1], words.shape[-1] * per).astype(np.int64)


def manual_taps(qw: QuantizedWeight) -> NDArray[np.float64]:
    """``(K, C_out, padded C_in)`` from the stored arrays by the documented layout."""
    words, scales, biases = (np.array(a.astype(mx.float32) if a.dtype != mx.uint32 else a)
                             for a in (qw.weight, qw.scales, qw.biases))  # fmt: skip
    if words.shape[0] > 1:  # K > 1 is stored (K, words, C_out)
        words, scales, biases = (a.transpose(0, 2, 1) for a in (words, scales, biases))
    q = unpack(words, qw.bits)
    g = qw.group_size
    return np.repeat(scales, g, axis=-1).astype(np.float64) * q + np.repeat(biases, g, axis=-1)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group_size", [32, 64])
def test_conv_weight_is_stored_tap_major_and_transposed(bits: int, group_size: int) -> None:
    w = mx.array(data((6, 3, 2, 3, 100)))  # C_in = 100 is padded to a multiple of the group
    qw = quantize_weight(w, bits=bits, group_size=group_size)
    padded = -(-100 // group_size) * group_size
    assert qw.weight.shape == (18, padded * bits // 32, 6)  # (K, words, C_out) for K > 1
    assert qw.scales.shape == qw.biases.shape == (18, padded // group_size, 6)
    assert qw.shape == (6, 3, 2, 3, 100) and qw.taps == 18 and qw.out_channels == 6
    assert qw.padded_in_channels == padded
    taps = manual_taps(qw)  # (K, C_out, padded)
    manual = taps[:, :, :100].transpose(1, 0, 2).reshape(6, 3, 2, 3, 100)
    np.testing.assert_allclose(np.array(qw.dequantize()), manual, rtol=1e-6, atol=1e-6)
    step = np.abs(np.repeat(np.array(qw.scales).transpose(0, 2, 1), group_size, axis=-1))
    err = np.abs(taps[:, :, :100] - np.array(w).reshape(6, 18, 100).transpose(1, 0, 2))
    assert np.all(err <= step[:, :, :100] + 1e-5)  # within one step of its group


def test_linear_weight_is_one_tap_matrix() -> None:
    qw = quantize_weight(mx.array(data((5, 64))), bits=4, group_size=32)
    assert qw.weight.shape == (1, 5, 8) and qw.scales.shape == (1, 5, 2) and qw.taps == 1
    np.testing.assert_allclose(np.array(qw.dequantize()), manual_taps(qw)[0], atol=1e-6)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_quantized_linear_equals_dequantized_dense(bits: int, dtype: mx.Dtype) -> None:
    x = mx.array(data((33, 40), 1)).astype(dtype)
    w = mx.array(data((20, 40), 2)).astype(dtype)
    b = mx.array(data((20,), 3)).astype(dtype)
    qw = quantize_weight(w, bits=bits, group_size=32)
    assert qw.dtype == dtype
    got = linear(x, qw, b)
    assert got.dtype == dtype
    x64, b64 = (np.array(a.astype(mx.float32)).astype(np.float64) for a in (x, b))
    ref = x64 @ manual_taps(qw)[0][:, :40].T + b64
    tol = {mx.float32: 1e-5, mx.float16: 2e-3, mx.bfloat16: 1.6e-2}[dtype]
    err = np.abs(np.array(got.astype(mx.float32)) - ref)
    assert np.max(err) <= tol * np.max(np.abs(ref))
    dense = linear(x, qw.dequantize().astype(dtype), b)
    err = np.abs(np.array(dense.astype(mx.float32)) - ref)
    assert np.max(err) <= 4 * tol * np.max(np.abs(ref))


def test_scale_dtype_option() -> None:
    qw = quantize_weight(mx.array(data((4, 64))), bits=8, group_size=64, scale_dtype=mx.float16)
    assert qw.scales.dtype == qw.biases.dtype == mx.float16
    assert qw.dequantize().dtype == mx.float32  # computed in f32, as the matmul uses it


def make(**changes: object) -> QuantizedWeight:
    base = quantize_weight(mx.array(data((4, 64))), bits=4, group_size=32)
    fields = {
        "weight": base.weight,
        "scales": base.scales,
        "biases": base.biases,
        "bits": 4,
        "group_size": 32,
    }
    fields.update(changes)
    return QuantizedWeight(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: make(bits=3), ValueError, "bits must be 4 or 8"),
        (lambda: make(group_size=16), ValueError, "group_size"),
        (lambda: make(weight=mx.zeros((1, 4, 8), dtype=mx.int32)), TypeError, "uint32"),
        (lambda: make(scales=mx.zeros((1, 4, 2), dtype=mx.int32)), TypeError, "scales"),
        (lambda: make(biases=mx.zeros((1, 4, 2), dtype=mx.float16)), TypeError, "scale_dtype"),
        (lambda: make(scales=mx.zeros((1, 4, 3)), biases=mx.zeros((1, 4, 3))), ValueError, "need"),
        (lambda: make(biases=mx.zeros((1, 4, 3))), ValueError, "must match"),
        (lambda: make(weight=mx.zeros((4, 8), dtype=mx.uint32)), ValueError, r"\(K, C_out"),
        (lambda: make(shape=(4, 65)), ValueError, "cannot hold"),
        (lambda: quantize_weight(mx.zeros((48,)), bits=4, group_size=32), ValueError, "linear"),
        (lambda: linear(mx.zeros((2, 16)), make()), ValueError, "cannot hold C_in = 16"),
        (lambda: make().tap_rows(1), IndexError, "1 taps"),
        (lambda: quantized_matmul(mx.zeros((2, 65)), make()), ValueError, "64 wide"),
    ],
)
def test_bad_packed_weights(call: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()

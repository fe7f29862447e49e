"""Packed affine weights: layout, dequantization, quantized linear, validation."""

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


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group_size", [32, 64])
def test_conv_weight_packing_keeps_leading_axes(bits: int, group_size: int) -> None:
    w = mx.array(data((6, 3, 2, 3, 128)))
    qw = quantize_weight(w, bits=bits, group_size=group_size)
    assert qw.weight.shape == (6, 3, 2, 3, 128 * bits // 32)
    assert qw.scales.shape == qw.biases.shape == (6, 3, 2, 3, 128 // group_size)
    assert qw.shape == (6, 3, 2, 3, 128) and qw.in_channels == 128 and qw.out_channels == 6
    # Dequantization by hand from the documented format equals dequantize().
    q = unpack(np.array(qw.weight), bits)
    scales = np.repeat(np.array(qw.scales), group_size, axis=-1)
    biases = np.repeat(np.array(qw.biases), group_size, axis=-1)
    manual = scales * q + biases
    np.testing.assert_allclose(np.array(qw.dequantize()), manual, rtol=1e-6, atol=1e-6)
    # and it is a faithful quantization of w: error within one step of its group.
    step = np.repeat(np.abs(np.array(qw.scales)), group_size, axis=-1)
    assert np.all(np.abs(manual - np.array(w)) <= step + 1e-5)


def test_tap_matrix_matches_slicing_the_dense_weight() -> None:
    w = mx.array(data((5, 2, 3, 2, 64)))
    qw = quantize_weight(w, bits=4, group_size=32)
    dense = np.array(qw.dequantize()).reshape(5, 12, 64)
    for tap in (0, 5, 11):
        sub = qw.tap_matrix(tap)
        assert sub.shape == (5, 64)
        np.testing.assert_array_equal(np.array(sub.dequantize()), dense[:, tap, :])
    with pytest.raises(IndexError, match="12 taps"):
        qw.tap_matrix(12)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_quantized_linear_equals_dequantized_dense(bits: int, dtype: mx.Dtype) -> None:
    x = mx.array(data((33, 64), 1)).astype(dtype)
    w = mx.array(data((20, 64), 2)).astype(dtype)
    b = mx.array(data((20,), 3)).astype(dtype)
    qw = quantize_weight(w, bits=bits, group_size=32)
    assert qw.dtype == dtype
    got = linear(x, qw, b)
    assert got.dtype == dtype
    # Reference in float64 from the packed words, the stored scales and the stored input.
    q = unpack(np.array(qw.weight), bits)
    f64 = [np.array(a.astype(mx.float32)).astype(np.float64) for a in (qw.scales, qw.biases, x, b)]
    scales, biases, x64, b64 = f64
    w64 = np.repeat(scales, 32, axis=-1) * q + np.repeat(biases, 32, axis=-1)
    ref = x64 @ w64.T + b64
    tol = {mx.float32: 1e-5, mx.float16: 2e-3, mx.bfloat16: 1.6e-2}[dtype]
    err = np.abs(np.array(got.astype(mx.float32)) - ref)
    assert np.max(err) <= tol * np.max(np.abs(ref))
    # and it agrees with the dense op on the dequantized weight (scale-dtype rounding aside).
    dense = linear(x, qw.dequantize(), b)
    err = np.abs(np.array(dense.astype(mx.float32)) - ref)
    assert np.max(err) <= 4 * tol * np.max(np.abs(ref))


def test_scale_dtype_option() -> None:
    qw = quantize_weight(mx.array(data((4, 64))), bits=8, group_size=64, scale_dtype=mx.float16)
    assert qw.scales.dtype == qw.biases.dtype == mx.float16
    assert qw.dequantize().dtype == mx.float16


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
        (lambda: make(weight=mx.zeros((4, 8), dtype=mx.int32)), TypeError, "uint32"),
        (lambda: make(scales=mx.zeros((4, 2), dtype=mx.int32)), TypeError, "scales"),
        (lambda: make(biases=mx.zeros((4, 2), dtype=mx.float16)), TypeError, "scale_dtype"),
        (lambda: make(scales=mx.zeros((4, 3)), biases=mx.zeros((4, 3))), ValueError, "groups"),
        (lambda: make(biases=mx.zeros((4, 3))), ValueError, "must match"),
        (lambda: make(scales=mx.zeros((5, 2)), biases=mx.zeros((5, 2))), ValueError, "leading"),
        (lambda: make(weight=mx.zeros((8,), dtype=mx.uint32)), ValueError, "rank"),
        (lambda: quantize_weight(mx.zeros((4, 48)), bits=4, group_size=32), ValueError, "multiple"),
        (lambda: quantize_weight(mx.zeros((48,)), bits=4, group_size=32), ValueError, "rank"),
        (lambda: linear(mx.zeros((2, 32)), make()), ValueError, r"\(C_out, 32\)"),
        (
            lambda: quantized_matmul(mx.zeros((2, 64)), make().matrix().tap_matrix(0)),
            ValueError,
            "rank 5",
        ),
    ],
)
def test_bad_packed_weights(call: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()

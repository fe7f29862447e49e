"""Packed int4 / int8 affine weights in upstream's (mlx-lattice 0.6) payload layout.

A float weight is seen as its ``K`` tap matrices ``W_k`` of shape ``(C_out,
C_in)`` in tap order (``K = Kx*Ky*Kz`` for a conv weight ``(C_out, Kx, Ky, Kz,
C_in)``; a linear weight ``(C_out, C_in)`` is ``K = 1``).  ``C_in`` is padded
with zeros to a multiple of ``group_size`` and every row is packed by
``mx.quantize`` (``W = scale * q + bias``, codes little-endian in uint32
words).  The stored arrays -- the safetensors entries ``<key>.weight``,
``<key>.scales``, ``<key>.biases`` -- are ``(K, C_out, words)`` and ``(K, C_out,
groups)`` when K = 1, and ``(K, words, C_out)`` and ``(K, groups, C_out)`` when
K > 1.  Tap ``k``'s rows are handed to ``mx.quantized_matmul`` directly, with
the input padded to the packed width.

The stored arrays do not say the kernel's three sizes nor how much of the
padded ``C_in`` is real: a :class:`QuantizedWeight` read from a file learns
them from the op that uses it; one made by :func:`quantize_weight` remembers
its logical ``shape``.
"""

from __future__ import annotations

import math
from typing import Any

import mlx.core as mx
from lattice_contract.dialect import (
    GROUP_SIZES,
    QUANT_BITS,
)
from lattice_contract.frontend import Attrs, PackedWeight, implement
from lattice_contract.frontend import signatures as sig

__all__ = [
    "GROUP_SIZES",
    "QUANT_BITS",
    "QuantizedWeight",
    "quantize_weight",
    "quantized_matmul",
]

_SCALE_DTYPES = (mx.float16, mx.bfloat16, mx.float32)


class QuantizedWeight(PackedWeight[mx.array]):
    """A packed affine int4 / int8 weight on MLX (:class:`~lattice_contract.frontend.PackedWeight`).

    Tap ``k``'s rows go to ``mx.quantized_matmul`` directly.
    """

    array_type = mx.array
    array_name = "an mx.array"

    @property
    def dtype(self) -> mx.Dtype:
        """The float type dequantization produces (the scale dtype)."""
        return self.scales.dtype

    def tap_rows(self, tap: int) -> tuple[mx.array, mx.array, mx.array]:
        """``(words, scales, biases)`` of tap ``tap`` as ``(C_out, n)`` rows, MLX's layout."""
        if not 0 <= tap < self.taps:
            raise IndexError(f"tap {tap} out of range for a packing of {self.taps} taps")
        parts = (self.weight[tap], self.scales[tap], self.biases[tap])
        if self.taps == 1:
            return parts
        return (parts[0].T, parts[1].T, parts[2].T)

    def dequantize_as(self, shape: tuple[int, ...]) -> mx.array:
        """The float weight of logical ``shape``, computed and returned in f32.

        ``shape`` is ``(C_out, C_in)`` or ``(C_out, Kx, Ky, Kz, C_in)``.  f32 is
        what :func:`quantized_matmul` multiplies with (scales widened exactly).
        """
        self.check_shape(shape, "dequantize")
        taps = []
        for k in range(self.taps):
            words, scales, biases = self.tap_rows(k)
            taps.append(
                mx.dequantize(
                    words,
                    scales.astype(mx.float32),
                    biases.astype(mx.float32),
                    group_size=self.group_size,
                    bits=self.bits,
                )
            )
        dense = mx.stack(taps)[:, :, : shape[-1]]  # (K, C_out, C_in)
        return dense.transpose(1, 0, 2).reshape(shape)

    def dequantize(self) -> mx.array:
        """The f32 weight in its logical shape (known when made by :func:`quantize_weight`)."""
        return self.dequantize_as(self.logical_shape())


def _quantize_weight(w: Any, scale_dtype: Any, attrs: Attrs) -> QuantizedWeight:
    bits, group_size = attrs["bits"], attrs["group_size"]
    if not isinstance(w, mx.array) or w.dtype not in _SCALE_DTYPES:
        raise TypeError("quantize_weight expects a float mx.array (f16, bf16 or f32)")
    if w.ndim not in (2, 5):
        raise ValueError(
            "quantize_weight packs a linear (C_out, C_in) or conv (C_out, Kx, Ky, Kz, C_in) "
            f"weight, got shape {tuple(w.shape)}"
        )
    if scale_dtype is not None:
        if scale_dtype not in _SCALE_DTYPES:
            raise TypeError(f"scale_dtype must be f16, bf16 or f32, got {scale_dtype}")
        w = w.astype(scale_dtype)
    c_out, c_in = int(w.shape[0]), int(w.shape[-1])
    k = math.prod(w.shape[1:-1]) if w.ndim == 5 else 1
    padded = -(-c_in // group_size) * group_size
    rows = w.reshape(c_out, k, c_in).transpose(1, 0, 2)
    if padded != c_in:
        rows = mx.pad(rows, [(0, 0), (0, 0), (0, padded - c_in)])
    packed, scales, biases = mx.quantize(
        rows.reshape(k * c_out, padded), group_size=group_size, bits=bits
    )
    parts = [a.reshape(k, c_out, a.shape[-1]) for a in (packed, scales, biases)]
    if k > 1:  # upstream stores K > 1 tap matrices transposed: (K, n, C_out)
        parts = [mx.contiguous(a.transpose(0, 2, 1)) for a in parts]
    return QuantizedWeight(
        parts[0], parts[1], parts[2], bits=bits, group_size=group_size, shape=tuple(w.shape)
    )


quantize_weight: sig.QuantizeWeight[mx.array, mx.Dtype, QuantizedWeight] = implement(
    "quantize_weight", _quantize_weight
)


def quantized_matmul(x: mx.array, weight: QuantizedWeight, tap: int = 0) -> mx.array:
    """``x @ W_tap.T`` in f32 for tap ``tap`` of a packed weight (tap 0 of a linear weight).

    The input is zero-padded to the packed width and widened to f32 with the
    scales, so the sum runs in f32 whatever the storage dtype; the caller
    casts the result back.
    """
    padded = weight.padded_in_channels
    c_in = int(x.shape[-1])
    if c_in > padded or padded - c_in >= weight.group_size:
        raise ValueError(
            f"quantized_matmul: input has {c_in} channels, the packed weight is {padded} wide "
            f"(C_in padded to group_size {weight.group_size})"
        )
    rows = x.astype(mx.float32)
    if padded != c_in:
        rows = mx.pad(rows, [(0, 0)] * (rows.ndim - 1) + [(0, padded - c_in)])
    words, scales, biases = weight.tap_rows(tap)
    return mx.quantized_matmul(
        rows,
        words,
        scales.astype(mx.float32),
        biases.astype(mx.float32),
        transpose=True,
        group_size=weight.group_size,
        bits=weight.bits,
    )

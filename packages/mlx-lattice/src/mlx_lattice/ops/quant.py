"""Packed int4 / int8 affine weights in MLX's format.

A packed weight stores a float weight ``W`` of logical shape ``(..., C_in)`` as
groups of ``group_size`` consecutive input channels, each with a scale and a
bias: ``W = scale * q + bias`` with ``q`` unsigned in ``[0, 2^bits)``.  The
``q`` values are packed into uint32 words along the last axis, element ``j`` of
a word in bits ``[j * bits, (j + 1) * bits)`` -- exactly the output of
``mx.quantize``, so ``mx.quantized_matmul`` consumes it directly.  Leading axes
are kept: a conv weight ``(C_out, Kx, Ky, Kz, C_in)`` packs to
``(C_out, Kx, Ky, Kz, C_in * bits / 32)`` with scales and biases
``(C_out, Kx, Ky, Kz, C_in / group_size)``; a linear weight ``(C_out, C_in)``
to ``(C_out, C_in * bits / 32)``.  These are the three safetensors entries
``<key>.weight``, ``<key>.scales``, ``<key>.biases`` of an artifact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx
from lattice_contract.options import GROUP_SIZES, QUANT_BITS, check_quantization

__all__ = [
    "GROUP_SIZES",
    "QUANT_BITS",
    "QuantizedWeight",
    "quantize_weight",
    "quantized_matmul",
]

_SCALE_DTYPES = (mx.float16, mx.bfloat16, mx.float32)


@dataclass(frozen=True)
class QuantizedWeight:
    """A packed affine int4 / int8 weight: ``weight`` (uint32 words), ``scales``, ``biases``.

    Construction validates the triplet (dtypes, matching leading axes, the
    packed and grouped widths agreeing on one ``C_in``), so a malformed
    safetensors triplet is rejected before any op runs.
    """

    weight: mx.array
    scales: mx.array
    biases: mx.array
    bits: int
    group_size: int

    def __post_init__(self) -> None:
        bits, group = check_quantization(self.bits, self.group_size)
        for name in ("weight", "scales", "biases"):
            if not isinstance(getattr(self, name), mx.array):
                raise TypeError(f"QuantizedWeight.{name} must be an mx.array")
        w, s, b = self.weight, self.scales, self.biases
        if w.dtype != mx.uint32:
            raise TypeError(f"QuantizedWeight.weight must hold uint32 words, got {w.dtype}")
        if s.dtype not in _SCALE_DTYPES:
            raise TypeError(f"QuantizedWeight.scales must be f16, bf16 or f32, got {s.dtype}")
        if b.dtype != s.dtype:
            raise TypeError(
                f"QuantizedWeight.biases dtype {b.dtype} differs from scales dtype {s.dtype}; "
                "both must use the packing's scale_dtype"
            )
        if w.ndim < 2:
            raise ValueError(f"QuantizedWeight.weight must have rank >= 2, got {tuple(w.shape)}")
        if tuple(s.shape) != tuple(b.shape):
            raise ValueError(
                f"QuantizedWeight.scales {tuple(s.shape)} and biases {tuple(b.shape)} must match"
            )
        if s.ndim != w.ndim or tuple(s.shape[:-1]) != tuple(w.shape[:-1]):
            raise ValueError(
                f"QuantizedWeight: scales {tuple(s.shape)} must keep the weight's leading axes "
                f"{tuple(w.shape[:-1])}"
            )
        c_in = w.shape[-1] * 32 // bits
        if s.shape[-1] * group != c_in:
            raise ValueError(
                f"QuantizedWeight: {w.shape[-1]} words of {bits}-bit values hold {c_in} input "
                f"channels, but {s.shape[-1]} groups of {group} hold {s.shape[-1] * group}"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        """Logical (unpacked) shape, e.g. ``(C_out, Kx, Ky, Kz, C_in)``."""
        return (*self.weight.shape[:-1], self.weight.shape[-1] * 32 // self.bits)

    @property
    def ndim(self) -> int:
        """Logical rank (same as the packed rank)."""
        return self.weight.ndim

    @property
    def in_channels(self) -> int:
        """C_in: the last logical axis."""
        return self.shape[-1]

    @property
    def out_channels(self) -> int:
        """C_out: the first axis."""
        return self.shape[0]

    @property
    def dtype(self) -> mx.Dtype:
        """The float type dequantization produces (the scale dtype)."""
        return self.scales.dtype

    def dequantize(self) -> mx.array:
        """The float weight ``scale * q + bias`` in the logical shape, in the scale dtype."""
        flat = self.matrix()
        dense = mx.dequantize(
            flat.weight, flat.scales, flat.biases, group_size=self.group_size, bits=self.bits
        )
        return dense.reshape(self.shape)

    def _map(self, fn: Callable[[mx.array], mx.array]) -> QuantizedWeight:
        """The same packing with ``fn`` applied to the words, scales and biases alike."""
        return QuantizedWeight(
            fn(self.weight), fn(self.scales), fn(self.biases), self.bits, self.group_size
        )

    def matrix(self) -> QuantizedWeight:
        """The same packing viewed as a 2-D ``(prod(leading axes), C_in)`` matrix."""
        return self._map(lambda a: a.reshape(-1, a.shape[-1]))

    def tap_matrix(self, tap: int) -> QuantizedWeight:
        """The ``(C_out, C_in)`` packed slice of flattened kernel tap ``tap``.

        For a conv weight ``(C_out, Kx, Ky, Kz, C_in)`` the taps are numbered
        ``(kx * Ky + ky) * Kz + kz`` (``lattice_contract.kernel`` order).  Slicing
        whole rows of words is exact because groups never straddle taps.
        """
        if self.ndim != 5:
            raise ValueError(f"tap_matrix needs a conv weight of rank 5, got shape {self.shape}")
        volume = math.prod(self.shape[1:4])
        if not 0 <= tap < volume:
            raise IndexError(f"tap {tap} out of range for a kernel of {volume} taps")
        return self._map(lambda a: a.reshape(a.shape[0], volume, a.shape[-1])[:, tap, :])


def quantize_weight(
    w: mx.array, *, bits: int, group_size: int, scale_dtype: mx.Dtype | None = None
) -> QuantizedWeight:
    """Pack a float weight ``(..., C_in)`` with ``mx.quantize`` along C_in, keeping leading axes.

    ``scale_dtype`` (default: ``w``'s dtype) is the type scales and biases are
    computed and stored in; the weight is converted to it first so that MLX
    derives scales in the declared type.
    """
    bits, group_size = check_quantization(bits, group_size)
    if not isinstance(w, mx.array) or w.dtype not in _SCALE_DTYPES:
        raise TypeError("quantize_weight expects a float mx.array (f16, bf16 or f32)")
    if w.ndim < 2:
        raise ValueError(f"quantize_weight needs a weight of rank >= 2, got {tuple(w.shape)}")
    c_in = w.shape[-1]
    if c_in % group_size:
        raise ValueError(
            f"C_in = {c_in} is not a multiple of group_size = {group_size}; pick a group size "
            "that divides the input channels or keep this weight dense"
        )
    if scale_dtype is not None:
        if scale_dtype not in _SCALE_DTYPES:
            raise TypeError(f"scale_dtype must be f16, bf16 or f32, got {scale_dtype}")
        w = w.astype(scale_dtype)
    packed, scales, biases = mx.quantize(w.reshape(-1, c_in), group_size=group_size, bits=bits)
    lead = tuple(w.shape[:-1])
    return QuantizedWeight(
        packed.reshape(*lead, packed.shape[-1]),
        scales.reshape(*lead, scales.shape[-1]),
        biases.reshape(*lead, biases.shape[-1]),
        bits=bits,
        group_size=group_size,
    )


def quantized_matmul(x: mx.array, weight: QuantizedWeight) -> mx.array:
    """``x @ W.T`` in f32 for a packed 2-D ``W`` of logical shape ``(C_out, C_in)``.

    The input and the scales are widened to f32 (exactly), so the sum runs in
    f32 whatever the storage dtype; the caller casts the result back.  A rank-5
    conv weight is not accepted here: take ``weight.tap_matrix(k)`` first.
    """
    if weight.ndim != 2:
        raise ValueError(
            f"quantized_matmul needs a 2-D packed weight (C_out, C_in), got logical shape "
            f"{weight.shape}; use tap_matrix(k) for conv taps"
        )
    if x.shape[-1] != weight.in_channels:
        raise ValueError(
            f"quantized_matmul: input has {x.shape[-1]} channels, weight expects "
            f"{weight.in_channels}"
        )
    return mx.quantized_matmul(
        x.astype(mx.float32),
        weight.weight,
        weight.scales.astype(mx.float32),
        weight.biases.astype(mx.float32),
        transpose=True,
        group_size=weight.group_size,
        bits=weight.bits,
    )

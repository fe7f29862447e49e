"""Packed int4 / int8 affine weights in upstream's (mlx-lattice 0.6) payload layout, on torch.

A float weight is seen as its ``K`` tap matrices ``W_k`` of shape ``(C_out,
C_in)`` in tap order (``K = Kx*Ky*Kz`` for a conv weight ``(C_out, Kx, Ky, Kz,
C_in)``; a linear weight ``(C_out, C_in)`` is ``K = 1``).  ``C_in`` is padded
with zeros to a multiple of ``group_size``; each row is cut into groups of
``group_size`` input channels with a scale and a bias, ``w = scale * q + bias``
with unsigned codes ``q`` in ``[0, 2^bits)``, packed little-endian into uint32
words (element ``j`` of a word in bits ``[j*bits, (j+1)*bits)``), which is
what ``mx.quantize`` writes.  The three stored arrays are

- ``weight``: ``(K, C_out, words)`` when K = 1, ``(K, words, C_out)`` when K > 1;
- ``scales`` / ``biases``: ``(K, C_out, groups)`` when K = 1, ``(K, groups,
  C_out)`` when K > 1.

The stored arrays do not say the kernel's three sizes nor how much of the
padded ``C_in`` is real: a :class:`QuantizedWeight` read from a file learns
them from the op that uses it (:meth:`QuantizedWeight.dequantize_as`); one made
by :func:`quantize_weight` remembers its logical ``shape``.  The codes match
``mx.quantize`` bit for bit for f32 weights; for f16/bf16 weights a code can
differ by one where the two round a half-way value differently, which changes
nothing downstream because every consumer decodes the stored words.

torch's uint32 supports few kernels, so words are manipulated as int64 and
only viewed as uint32 at the boundary.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract.dialect import (
    GROUP_SIZES,
    QUANT_BITS,
    check_logical_shape,
)
from lattice_contract.frontend import Attrs, PackedWeight, implement
from lattice_contract.frontend import signatures as sig

__all__ = ["GROUP_SIZES", "QUANT_BITS", "QuantizedWeight", "dequantize", "quantize_weight"]

_SCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _words_to_int64(words: torch.Tensor) -> torch.Tensor:
    return words.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _int64_to_words(values: torch.Tensor) -> torch.Tensor:
    # Two's-complement truncation keeps the low 32 bits; the view reinterprets them.
    return values.to(torch.int32).view(torch.uint32)


class QuantizedWeight(PackedWeight[torch.Tensor]):
    """A packed affine weight on torch (see :class:`~lattice_contract.frontend.quant.PackedWeight`).

    Decoded with integer tensor ops on any device (:meth:`tap_matrices`).
    """

    array_type = torch.Tensor
    array_name = "a torch.Tensor"

    @property
    def dtype(self) -> torch.dtype:
        """The scale dtype (what dequantization rounds to before compute)."""
        return self.scales.dtype

    @property
    def device(self) -> torch.device:
        """Device of the payload."""
        return self.weight.device

    def _rows(self, a: torch.Tensor) -> torch.Tensor:
        """``(K, C_out, n)`` view of a stored array (K > 1 stores ``(K, n, C_out)``)."""
        return a if self.taps == 1 else a.transpose(1, 2)

    def codes(self) -> torch.Tensor:
        """The unsigned codes q, int64, ``(K, C_out, padded C_in)``."""
        per_word = 32 // self.bits
        words = _words_to_int64(self._rows(self.weight))
        shifts = torch.arange(per_word, device=words.device, dtype=torch.int64) * self.bits
        q = (words[..., None] >> shifts) & ((1 << self.bits) - 1)
        return q.reshape(*words.shape[:-1], -1)

    def tap_matrices(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``scale * q + bias`` as ``(K, C_out, padded C_in)``, computed in f32."""
        q = self.codes().to(torch.float32)
        groups = q.reshape(*q.shape[:-1], -1, self.group_size)
        scales = self._rows(self.scales).to(torch.float32)
        biases = self._rows(self.biases).to(torch.float32)
        w = groups * scales[..., None] + biases[..., None]
        return w.reshape(q.shape).to(dtype)

    def dequantize_as(
        self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """The dense weight of logical ``shape`` (linear or conv3d_o_xyz_i layout).

        Raises ValueError naming the mismatch when the packing cannot hold that shape.
        """
        check_logical_shape(shape, self.geometry(), self.group_size)
        taps = self.tap_matrices(dtype)[:, :, : shape[-1]]  # (K, C_out, C_in)
        return taps.permute(1, 0, 2).reshape(shape)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The dense weight in its logical shape (known when made by :func:`quantize_weight`)."""
        return self.dequantize_as(self.logical_shape(), dtype)

    def to(self, device: torch.device | str) -> QuantizedWeight:
        """The same packing on another device."""
        return QuantizedWeight(
            self.weight.to(device),
            self.scales.to(device),
            self.biases.to(device),
            self.bits,
            self.group_size,
            self.shape,
        )


def dequantize(weight: QuantizedWeight | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A dense weight in ``dtype``: packed weights are dequantized, dense ones converted."""
    if isinstance(weight, QuantizedWeight):
        return weight.dequantize(dtype)
    return weight.to(dtype)


def _quantize_weight(w: Any, scale_dtype: Any, attrs: Attrs) -> QuantizedWeight:
    bits, group_size = attrs["bits"], attrs["group_size"]
    if not isinstance(w, torch.Tensor) or w.dtype not in (*_SCALE_DTYPES, torch.float64):
        raise TypeError("quantize_weight expects a float torch.Tensor")
    if w.ndim not in (2, 5):
        raise ValueError(
            "quantize_weight packs a linear (C_out, C_in) or conv (C_out, Kx, Ky, Kz, C_in) "
            f"weight, got shape {tuple(w.shape)}"
        )
    sdtype = scale_dtype if scale_dtype is not None else w.dtype
    if sdtype not in _SCALE_DTYPES:
        raise TypeError(f"scale_dtype must be float16, bfloat16 or float32, got {sdtype}")
    c_out, c_in = int(w.shape[0]), int(w.shape[-1])
    k = int(w[0, ..., 0].numel())
    padded = -(-c_in // group_size) * group_size
    rows = w.detach().to(sdtype).to(torch.float32).reshape(c_out, k, c_in).permute(1, 0, 2)
    rows = torch.nn.functional.pad(rows, (0, padded - c_in))
    n_bins = (1 << bits) - 1
    g = rows.reshape(k, c_out, -1, group_size)
    w_max = g.amax(dim=-1)
    w_min = g.amin(dim=-1)
    mask = w_min.abs() > w_max.abs()
    scales = torch.clamp((w_max - w_min) / n_bins, min=1e-7)
    scales = torch.where(mask, scales, -scales)
    edge = torch.where(mask, w_min, w_max)
    q0 = torch.round(edge / scales)
    scales = torch.where(q0 != 0, edge / torch.where(q0 != 0, q0, 1.0), scales)
    biases = torch.where(q0 == 0, torch.zeros_like(edge), edge)
    scales_s = scales.to(sdtype)
    biases_s = biases.to(sdtype)
    q = torch.round((g - biases_s.float()[..., None]) / scales_s.float()[..., None])
    q = q.clamp(0, n_bins).to(torch.int64).reshape(k, c_out, padded // (32 // bits), 32 // bits)
    shifts = torch.arange(32 // bits, device=w.device, dtype=torch.int64) * bits
    words = _int64_to_words((q << shifts).sum(dim=-1))
    if k > 1:  # upstream stores K > 1 tap matrices transposed: (K, words, C_out)
        words, scales_s, biases_s = (
            a.transpose(1, 2).contiguous() for a in (words, scales_s, biases_s)
        )
    return QuantizedWeight(
        words, scales_s, biases_s, bits, group_size, tuple(int(d) for d in w.shape)
    )


quantize_weight: sig.QuantizeWeight[torch.Tensor, torch.dtype, QuantizedWeight] = implement(
    "quantize_weight",
    _quantize_weight,
    """Scales follow MLX's affine rule: the group's edge of larger magnitude is
    represented exactly, the step is ``(max - min) / (2^bits - 1)``.  Scales
    and biases are rounded to ``scale_dtype`` first and the codes are chosen
    against the rounded values, so the dequantized weight is the best this
    packing can express for the stored scale.""",
)

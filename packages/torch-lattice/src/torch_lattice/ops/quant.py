"""Packed int4 / int8 affine weights in MLX's format, on torch.

A float weight of logical shape ``(..., C_in)`` is cut into groups of
``group_size`` consecutive input channels; each group stores a scale and a
bias and unsigned codes ``q`` in ``[0, 2^bits)`` with ``w = scale * q + bias``.
Codes are packed into uint32 words along the last axis, element ``j`` of a
word occupying bits ``[j*bits, (j+1)*bits)`` (little-endian within the word),
which is the layout ``mx.quantize`` writes; so an artifact written here loads
unchanged into MLX's quantized kernels.  The codes themselves match
``mx.quantize`` bit for bit for f32 weights; for f16/bf16 weights a code can
differ by one where the two round a half-way value differently, which changes
nothing downstream because every consumer decodes the stored words.  Leading
axes are kept: a conv weight ``(C_out, Kx, Ky, Kz, C_in)`` packs to
``(C_out, Kx, Ky, Kz, C_in*bits/32)`` uint32 with scales and biases
``(C_out, Kx, Ky, Kz, C_in/group_size)``.

torch's uint32 supports few kernels, so words are manipulated as int64 and
only viewed as uint32 at the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from lattice_contract.options import GROUP_SIZES, QUANT_BITS, check_quantization

__all__ = ["GROUP_SIZES", "QUANT_BITS", "QuantizedWeight", "dequantize", "quantize_weight"]

_SCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _words_to_int64(words: torch.Tensor) -> torch.Tensor:
    return words.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _int64_to_words(values: torch.Tensor) -> torch.Tensor:
    # Two's-complement truncation keeps the low 32 bits; the view reinterprets them.
    return values.to(torch.int32).view(torch.uint32)


@dataclass(frozen=True)
class QuantizedWeight:
    """A packed affine weight: ``weight`` (uint32 words), ``scales``, ``biases``, bits, group size.

    Construction checks the triplet (dtypes, matching leading axes, packed and
    grouped widths agreeing on one C_in) so a malformed safetensors triplet is
    rejected before any op runs.
    """

    weight: torch.Tensor
    scales: torch.Tensor
    biases: torch.Tensor
    bits: int
    group_size: int

    def __post_init__(self) -> None:
        bits, group = check_quantization(self.bits, self.group_size)
        for name in ("weight", "scales", "biases"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise TypeError(f"QuantizedWeight.{name} must be a torch.Tensor")
        w, s, b = self.weight, self.scales, self.biases
        if w.dtype != torch.uint32:
            raise TypeError(f"QuantizedWeight.weight must hold uint32 words, got {w.dtype}")
        if s.dtype not in _SCALE_DTYPES:
            raise TypeError(f"QuantizedWeight.scales must be f16, bf16 or f32, got {s.dtype}")
        if b.dtype != s.dtype:
            raise TypeError(
                f"QuantizedWeight.biases dtype {b.dtype} differs from scales dtype {s.dtype}"
            )
        if w.ndim < 2:
            raise ValueError(f"QuantizedWeight.weight must have rank >= 2, got {tuple(w.shape)}")
        if s.shape != b.shape or s.ndim != w.ndim or s.shape[:-1] != w.shape[:-1]:
            raise ValueError(
                f"QuantizedWeight: scales {tuple(s.shape)} and biases {tuple(b.shape)} must "
                f"match each other and keep the weight's leading axes {tuple(w.shape[:-1])}"
            )
        c_in = w.shape[-1] * 32 // bits
        if s.shape[-1] * group != c_in:
            raise ValueError(
                f"QuantizedWeight: {w.shape[-1]} words of {bits}-bit codes hold {c_in} input "
                f"channels, but {s.shape[-1]} groups of {group} hold {s.shape[-1] * group}"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        """Logical (unpacked) shape, e.g. ``(C_out, Kx, Ky, Kz, C_in)``."""
        return (*self.weight.shape[:-1], self.weight.shape[-1] * 32 // self.bits)

    @property
    def ndim(self) -> int:
        """Logical rank."""
        return int(self.weight.ndim)

    @property
    def dtype(self) -> torch.dtype:
        """The scale dtype (what dequantization rounds to before compute)."""
        return self.scales.dtype

    @property
    def device(self) -> torch.device:
        """Device of the payload."""
        return self.weight.device

    def codes(self) -> torch.Tensor:
        """The unsigned codes q, int64, in the logical shape."""
        per_word = 32 // self.bits
        words = _words_to_int64(self.weight)
        shifts = torch.arange(per_word, device=words.device, dtype=torch.int64) * self.bits
        q = (words[..., None] >> shifts) & ((1 << self.bits) - 1)
        return q.reshape(self.shape)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``scale * q + bias`` in the logical shape, computed in f32, returned as ``dtype``."""
        q = self.codes().to(torch.float32)
        groups = q.reshape(*q.shape[:-1], -1, self.group_size)
        w = (
            groups * self.scales.to(torch.float32)[..., None]
            + self.biases.to(torch.float32)[..., None]
        )
        return w.reshape(self.shape).to(dtype)

    def to(self, device: torch.device | str) -> QuantizedWeight:
        """The same packing on another device."""
        return QuantizedWeight(
            self.weight.to(device),
            self.scales.to(device),
            self.biases.to(device),
            self.bits,
            self.group_size,
        )


def dequantize(weight: QuantizedWeight | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A dense weight in ``dtype``: packed weights are dequantized, dense ones converted."""
    if isinstance(weight, QuantizedWeight):
        return weight.dequantize(dtype)
    return weight.to(dtype)


def quantize_weight(
    w: torch.Tensor,
    *,
    bits: int,
    group_size: int,
    scale_dtype: torch.dtype | None = None,
) -> QuantizedWeight:
    """Pack a float weight ``(..., C_in)`` along C_in, keeping its leading axes.

    Scales follow MLX's affine rule: the group's edge of larger magnitude is
    represented exactly, the step is ``(max - min) / (2^bits - 1)``.  Scales
    and biases are rounded to ``scale_dtype`` (default ``w.dtype``) first and
    the codes are chosen against the rounded values, so the dequantized weight
    is the best this packing can express for the stored scale.
    """
    bits, group_size = check_quantization(bits, group_size)
    if not isinstance(w, torch.Tensor) or w.dtype not in (*_SCALE_DTYPES, torch.float64):
        raise TypeError("quantize_weight expects a float torch.Tensor")
    if w.ndim < 2:
        raise ValueError(f"quantize_weight needs a weight of rank >= 2, got {tuple(w.shape)}")
    c_in = int(w.shape[-1])
    if c_in % group_size:
        raise ValueError(
            f"C_in = {c_in} is not a multiple of group_size = {group_size}; pick a group size "
            "that divides the input channels or keep this weight dense"
        )
    sdtype = scale_dtype if scale_dtype is not None else w.dtype
    if sdtype not in _SCALE_DTYPES:
        raise TypeError(f"scale_dtype must be float16, bfloat16 or float32, got {sdtype}")
    n_bins = (1 << bits) - 1
    g = w.detach().to(sdtype).to(torch.float32).reshape(*w.shape[:-1], -1, group_size)
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
    q = q.clamp(0, n_bins).to(torch.int64).reshape(*w.shape[:-1], c_in // (32 // bits), 32 // bits)
    shifts = torch.arange(32 // bits, device=w.device, dtype=torch.int64) * bits
    words = (q << shifts).sum(dim=-1)
    return QuantizedWeight(_int64_to_words(words), scales_s, biases_s, bits, group_size)

"""From-scratch NumPy references of TorchSparse's and MinkowskiEngine's convolutions.

Neither framework installs on this machine, so each is re-derived here from
its source code, kept apart from ``torch_lattice`` (nothing here imports it):
the kernel offsets, the order in which the weight rows enumerate them, the
output support and which input each (output, tap) pair reads.  The converter
and the Lattice ops are then checked against these references, and spconv
(installed) is checked against itself.

Sources read (file, function):

* TorchSparse 2.0 -- ``torchsparse/nn/utils/kernel.py``, ``get_kernel_offsets``:
  per axis ``np.arange(-K // 2 + 1, K // 2 + 1) * tensor_stride`` (Python floor
  division: K = 3 gives -1..1, K = 4 gives -1..2, K = 2 gives 0..1); rows x
  fastest when the volume is odd, z fastest when it is even; ``dilation`` is
  not used by the kernel map.  ``torchsparse/nn/functional/downsample.py``,
  ``spdownsample``: strided outputs at ``floor(c / (t*s)) * (t*s)``.
  ``torchsparse/nn/functional/conv.py``: a transposed conv reuses the
  strided conv's map with inputs and outputs swapped.
* TorchSparse 2.1 -- ``torchsparse/nn/functional/conv/kmap/build_kmap.py``,
  ``build_kernel_map``: the default ``kmap_mode = "hashmap_on_the_fly"``
  goes to ``kmap/func/hashmap_on_the_fly.py``,
  ``build_kmap_implicit_GEMM_hashmap_on_the_fly``, which hands the kernel
  offsets to the CUDA kernels ``build_kernel_map_subm_hashmap`` /
  ``build_kernel_map_downsample_hashmap``: an even-volume kernel reads
  ``0..K-1`` on every axis, an odd one is centred as in 2.0 (this file takes
  that behaviour as recorded for the real library, whose CUDA code does not
  build here);
  the ``if generative: raise ValueError`` at the top of that branch of
  ``build_kernel_map`` refuses generative convs (they need ``kmap_mode =
  "hashmap"``, ``kmap/func/hashmap.py``).  Row order as 2.0.
* MinkowskiEngine 0.5.4 -- ``src/kernel_region.hpp`` (``kernel_region``,
  HYPER_CUBE): per axis the offsets ``-(K//2)..K//2`` for odd K and
  ``0..K-1`` for even K, times dilation and tensor stride, x fastest;
  ``src/coordinate_map.hpp`` (``stride``): strided outputs at
  ``floor(c / (t*s)) * (t*s)``; ``MinkowskiEngine/MinkowskiConvolution.py``:
  ``MinkowskiConvolutionTranspose`` reuses the strided map reversed and
  ``MinkowskiGenerativeConvolutionTranspose`` creates every ``c + off(k)``.

Coordinates are physical ``(batch, x, y, z)`` int rows; kernels are ``(K,
C_in, C_out)`` in the framework's own row order.  Loops run over taps only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

Ints = NDArray[np.int64]
Floats = NDArray[np.float64]

_SPAN = 1 << 16
_BIAS = 1 << 15


def _keys(coords: Ints) -> Ints:
    c = coords.astype(np.int64)
    return (((c[:, 0] * _SPAN + c[:, 1] + _BIAS) * _SPAN + c[:, 2] + _BIAS) * _SPAN) + (
        c[:, 3] + _BIAS
    )


def _lookup(table: Ints, probe: Ints) -> Ints:
    """Row of each probe coordinate in ``table`` or -1."""
    keys = _keys(table)
    order = np.argsort(keys)
    sorted_keys = keys[order]
    want = _keys(probe)
    pos = np.clip(np.searchsorted(sorted_keys, want), 0, len(keys) - 1)
    return np.where(sorted_keys[pos] == want, order[pos], -1)


def _axis_offsets(framework: str, size: int) -> list[int]:
    if framework == "torchsparse-2.0":
        return list(range(-size // 2 + 1, size // 2 + 1))
    if framework == "minkowski":
        return list(range(-(size // 2), size // 2 + 1)) if size % 2 else list(range(size))
    raise ValueError(framework)


def kernel_offsets(framework: str, kernel_size: Sequence[int]) -> Ints:
    """``(K, 3)`` logical offsets in the framework's weight-row order."""
    kx, ky, kz = kernel_size
    volume = kx * ky * kz
    if framework == "torchsparse-2.1":
        # hashmap_on_the_fly: even volumes read 0..K-1 on every axis.
        axes = (
            [list(range(k)) for k in kernel_size]
            if volume % 2 == 0
            else [_axis_offsets("torchsparse-2.0", k) for k in kernel_size]
        )
    else:
        axes = [_axis_offsets(framework, k) for k in kernel_size]
    x_fastest = framework == "minkowski" or volume % 2 == 1
    if x_fastest:
        rows = [(x, y, z) for z in axes[2] for y in axes[1] for x in axes[0]]
    else:
        rows = [(x, y, z) for x in axes[0] for y in axes[1] for z in axes[2]]
    return np.asarray(rows, dtype=np.int64)


def coarsen(coords: Ints, step: Sequence[int]) -> Ints:
    """``floor(c / step) * step`` per axis, unique rows (first-occurrence order)."""
    c = coords.astype(np.int64).copy()
    s = np.asarray(step, dtype=np.int64)
    c[:, 1:] = np.floor_divide(c[:, 1:], s) * s
    _, first = np.unique(_keys(c), return_index=True)
    return c[np.sort(first)]


def _gather_conv(
    out_coords: Ints, coords: Ints, feats: Floats, kernel: Floats, offsets_physical: Ints
) -> Floats:
    out = np.zeros((len(out_coords), kernel.shape[2]))
    for k, off in enumerate(offsets_physical):
        probe = out_coords.copy()
        probe[:, 1:] += off
        src = _lookup(coords, probe)
        hit = src >= 0
        out[hit] += feats[src[hit]] @ kernel[k]
    return out


def forward_conv(
    framework: str,
    coords: Ints,
    feats: Floats,
    kernel: Floats,
    kernel_size: Sequence[int],
    *,
    stride: int = 1,
    tensor_stride: int = 1,
    dilation: int = 1,
) -> tuple[Ints, Floats]:
    """A (strided or stride-1) forward conv: ``out[o] = sum_k x[o + off(k)] @ W[k]``.

    ``dilation`` only matters for MinkowskiEngine (TorchSparse ignores it).
    """
    offsets = kernel_offsets(framework, kernel_size)
    d = dilation if framework == "minkowski" else 1
    step = tensor_stride * stride
    out_coords = coords.astype(np.int64) if stride == 1 else coarsen(coords, (step,) * 3)
    return out_coords, _gather_conv(out_coords, coords, feats, kernel, offsets * d * tensor_stride)


def transposed_conv(
    framework: str,
    coarse_coords: Ints,
    feats: Floats,
    kernel: Floats,
    kernel_size: Sequence[int],
    fine_coords: Ints,
    *,
    fine_tensor_stride: int = 1,
    dilation: int = 1,
) -> Floats:
    """The transposed conv onto the paired strided conv's input (``fine_coords``).

    Pairs are the strided conv's pairs reversed: coarse ``o`` feeds fine
    ``c = o + off(k)`` with weight row ``k``.
    """
    offsets = kernel_offsets(framework, kernel_size)
    d = dilation if framework == "minkowski" else 1
    out = np.zeros((len(fine_coords), kernel.shape[2]))
    for k, off in enumerate(offsets * d * fine_tensor_stride):
        probe = coarse_coords.astype(np.int64).copy()
        probe[:, 1:] += off
        dst = _lookup(fine_coords, probe)
        hit = dst >= 0
        np.add.at(out, dst[hit], feats[hit] @ kernel[k])
    return out


def minkowski_generative(
    coords: Ints, feats: Floats, kernel: Floats, kernel_size: Sequence[int], *, fine_stride: int
) -> tuple[Ints, Floats]:
    """``MinkowskiGenerativeConvolutionTranspose``: every ``c + off(k)`` at the fine stride."""
    offsets = kernel_offsets("minkowski", kernel_size) * fine_stride
    created = np.concatenate([coords.astype(np.int64) + np.r_[0, off] for off in offsets])
    _, first = np.unique(_keys(created), return_index=True)
    out_coords = created[np.sort(first)]
    out = np.zeros((len(out_coords), kernel.shape[2]))
    for k, off in enumerate(offsets):
        dst = _lookup(out_coords, coords.astype(np.int64) + np.r_[0, off])
        np.add.at(out, dst, feats @ kernel[k])
    return out_coords, out

"""Each framework's kernel layout and tap order, and the rewrite to Lattice's.

Lattice has one weight layout, ``conv3d_o_xyz_i`` = ``(C_out, Kx, Ky, Kz,
C_in)`` with the taps flattened z fastest (``lattice_contract.dialect.kernel``).
Every source kernel is first brought to ``(K, C_in, C_out)`` rows in the
source's own tap order, then its rows are permuted into canonical order.

Source layouts (taps ``(a0, a1, a2)`` in source axis order, sizes ``(K0, K1,
K2)``, volume K):

* TorchSparse 2.0 / 2.1: ``(K, C_in, C_out)``, first axis fastest for odd K
  and last axis fastest for even K (``torchsparse/nn/utils/kernel.py``,
  ``get_kernel_offsets``).  2.0 stores every ``1x1x1`` kernel 2-D as
  ``(C_in, C_out)``; 2.1 only stride-1 ones.
* MinkowskiEngine: ``(K, C_in, C_out)``, first axis fastest at every size;
  stride-1 ``1x1x1`` kernels may be ``(C_in, C_out)``.
* spconv: a dense ``(K0, K1, K2)`` block, last axis fastest, saved as KRSC
  ``(C_out, K0, K1, K2, C_in)`` (2.2 on, and 2.1 layers of at most 32 taps
  on CUDA builds), RSKC ``(K0, K1, K2, C_out, C_in)`` (2.0 always; 2.1 layers
  of more than 32 taps or CPU-only builds) or RSCK ``(K0, K1, K2, C_in,
  C_out)`` (1.x).  A ``1x1x1`` SubMConv3d, or any stride-1 ``1x1x1`` conv,
  runs as ``x @ W.view(C_in, C_out)`` in 2.x (``spconv/pytorch/conv.py``,
  ``SparseConvolution._conv_forward``), so its buffer really is ``(C_in,
  C_out)`` memory.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from lattice_contract.dialect import Triple, kernel_taps

from .spec import ConversionError, KernelDeclaration

__all__ = ["canonical_row_permutation", "convert_kernel"]

_AXIS_NAMES = "xyz"

_LAYOUTS = {
    "torchsparse": (
        "(K, C_in, C_out); taps first-axis fastest for odd K, last-axis fastest for even K"
    ),
    "torchsparse-2d": "(C_in, C_out) (1x1x1 kernel stored without the K axis)",
    "minkowski": "(K, C_in, C_out); taps first-axis fastest",
    "minkowski-2d": "(C_in, C_out) (1x1x1 kernel stored without the K axis)",
    "KRSC": "(C_out, K0, K1, K2, C_in); taps last-axis fastest (KRSC)",
    "RSKC": "(K0, K1, K2, C_out, C_in); taps last-axis fastest (RSKC)",
    "RSCK": "(K0, K1, K2, C_in, C_out); taps last-axis fastest (RSCK)",
    "spconv-1x1": "1x1x1 buffer read as (C_in, C_out) by spconv's 1x1 matmul",
    "bias": "(C_out,)",
    "bias-1c": "(1, C_out)",
}


def _source_row(framework: str, tap: Triple, size: Triple) -> int:
    """Row of a source tap (source axis order) in the framework's flattened kernel."""
    a0, a1, a2 = tap
    k0, k1, k2 = size
    first_fastest = a0 + k0 * (a1 + k1 * a2)
    last_fastest = (a0 * k1 + a1) * k2 + a2
    if framework == "torchsparse":
        return first_fastest if (k0 * k1 * k2) % 2 == 1 else last_fastest
    if framework == "minkowski":
        return first_fastest
    return last_fastest  # spconv: a dense (K0, K1, K2) block, last axis fastest


def _canonical_size(kernel_size: Triple, axes: str) -> Triple:
    cols = [axes.index(name) for name in _AXIS_NAMES]
    return (kernel_size[cols[0]], kernel_size[cols[1]], kernel_size[cols[2]])


def canonical_row_permutation(
    framework: str, kernel_size: Triple, axes: str = "xyz", *, flip: bool = False
) -> list[int]:
    """``perm[r]`` = the source row that becomes canonical row ``r``.

    ``kernel_size`` is in the source's axis order; ``axes[j]`` names the
    Lattice axis of source spatial column ``j``.  ``flip`` reverses every
    axis (canonical tap ``k`` takes source tap ``K - 1 - k``), which is what a
    TorchSparse 2.1 generative conv needs.
    """
    if framework not in ("torchsparse", "minkowski", "spconv"):
        raise ConversionError(f"unknown framework {framework!r}")
    source_of_axis = [axes.index(name) for name in _AXIS_NAMES]  # lattice axis -> source column
    perm: list[int] = []
    for tap in kernel_taps(_canonical_size(kernel_size, axes)):  # canonical order, z fastest
        source_tap = [0, 0, 0]
        for lattice_axis, column in enumerate(source_of_axis):
            source_tap[column] = tap[lattice_axis]
        perm.append(
            _source_row(framework, (source_tap[0], source_tap[1], source_tap[2]), kernel_size)
        )
    return perm[::-1] if flip else perm


def convert_kernel(
    key: str, tensor: torch.Tensor, declaration: KernelDeclaration
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Convert one declared tensor to its canonical layout; return it and its manifest record."""
    shape = tuple(int(s) for s in tensor.shape)
    if not torch.is_floating_point(tensor):
        raise ConversionError(
            f"{key}: declared as a {declaration.source} {declaration.role} but has "
            f"dtype {tensor.dtype}; only floating tensors are weights"
        )
    record: dict[str, Any] = {
        "source_key": key,
        "framework": declaration.source,
        "role": declaration.role,
        "shape_before": list(shape),
    }
    if declaration.role == "bias":
        if len(shape) == 1:
            layout = "bias"
        elif len(shape) == 2 and shape[0] == 1:
            layout = "bias-1c"
        else:
            raise ConversionError(
                f"{key}: a bias must be (C_out,) or (1, C_out), got shape {list(shape)}"
            )
        out = tensor.reshape(-1).contiguous()
        record.update(
            source_layout=_LAYOUTS[layout],
            shape_after=list(out.shape),
            row_permutation=None,
            channel_transform="none",
        )
        return out, record

    size, layout, how, rows, transform = _kernel_rows(key, tensor, declaration)
    perm = canonical_row_permutation(
        declaration.framework, size, declaration.axes, flip=declaration.flip
    )
    csize = _canonical_size(size, declaration.axes)
    _, c_in, c_out = rows.shape
    index = torch.tensor(perm, dtype=torch.long, device=rows.device)
    out = rows.index_select(0, index).reshape(*csize, c_in, c_out).permute(4, 0, 1, 2, 3)
    record.update(
        source_layout=_LAYOUTS[layout],
        layout_decided_by=how,
        shape_after=list(out.shape),
        kernel_size=list(size),
        canonical_kernel_size=list(csize),
        axes=declaration.axes,
        flip=declaration.flip,
        row_permutation=perm,
        channel_transform=transform,
    )
    return out.contiguous(), record


def _kernel_rows(
    key: str, tensor: torch.Tensor, d: KernelDeclaration
) -> tuple[Triple, str, str, torch.Tensor, str]:
    """Bring a source kernel to ``(K_rows, C_in, C_out)`` in source row order.

    Returns the source kernel size, the layout name, what decided the layout,
    the rows and the channel transform applied.
    """
    shape = tuple(int(s) for s in tensor.shape)
    if d.framework in ("torchsparse", "minkowski"):
        return _flattened_rows(key, tensor, d, shape)
    if len(shape) != 5:
        raise ConversionError(
            f"{key}: a spconv kernel is 5-D (KRSC, RSKC or RSCK), got shape {list(shape)}"
        )
    layout, how = _spconv_layout(key, shape, d)
    if layout == "KRSC":
        c_out, k0, k1, k2, c_in = shape
    elif layout == "RSKC":
        k0, k1, k2, c_out, c_in = shape
    else:
        k0, k1, k2, c_in, c_out = shape
    size = (k0, k1, k2)
    volume = k0 * k1 * k2
    if size == (1, 1, 1) and d.version != "1":
        if d.stride is None and not d.subm:
            raise ConversionError(
                f"{key}: a spconv 2.x 1x1x1 kernel is read as (C_in, C_out) when the conv "
                f"has stride 1 or is a SubMConv3d, and as (C_out, C_in) otherwise; "
                f'declare "stride" (and "subm": true for SubMConv3d) for this key'
            )
        if d.subm or d.stride == (1, 1, 1):
            rows = tensor.reshape(1, c_in, c_out)
            return size, "spconv-1x1", how, rows, "buffer viewed as (C_in, C_out)"
    if layout == "KRSC":
        rows = tensor.reshape(c_out, volume, c_in).permute(1, 2, 0)
    elif layout == "RSKC":
        rows = tensor.reshape(volume, c_out, c_in).permute(0, 2, 1)
    else:
        rows = tensor.reshape(volume, c_in, c_out)
    return size, layout, how, rows, "none"


def _spconv_layout(key: str, shape: tuple[int, ...], d: KernelDeclaration) -> tuple[str, str]:
    """The saved layout of a 5-D spconv kernel and what decided it."""
    sizes = {"KRSC": shape[1:4], "RSKC": shape[0:3], "RSCK": shape[0:3]}
    fixed = {"1": "RSCK", "2.0": "RSKC", "2.2": "KRSC"}.get(d.version or "")
    layout: str | None = d.layout if d.layout is not None else fixed
    how = "declared" if d.layout is not None else f"version {d.version}"
    if layout is not None:
        if d.kernel_size is not None and sizes[layout] != d.kernel_size:
            raise ConversionError(
                f"{key}: the spec declares kernel_size {list(d.kernel_size)} but a {layout} "
                f"kernel of shape {list(shape)} has kernel size {list(sizes[layout])}"
                + ("" if d.layout is not None else _layout_hint(d))
            )
        return layout, how
    release = "2.1" if d.version == "2.1" else "2.x (release not declared)"
    if d.kernel_size is None:
        raise ConversionError(
            f"{key}: spconv {release} saved kernels as KRSC (C_out, K0, K1, K2, C_in) or RSKC "
            f"(K0, K1, K2, C_out, C_in); the shape {list(shape)} alone cannot say which. "
            f'Declare "kernel_size" (the layout is then read from the shape) or "layout"'
        )
    fits = [name for name in ("KRSC", "RSKC") if sizes[name] == d.kernel_size]
    if not fits:
        raise ConversionError(
            f"{key}: kernel_size {list(d.kernel_size)} fits neither KRSC nor RSKC for a "
            f"spconv kernel of shape {list(shape)}"
        )
    if len(fits) == 2 and math.prod(d.kernel_size) > 1:
        raise ConversionError(
            f"{key}: shape {list(shape)} with kernel_size {list(d.kernel_size)} reads both as "
            f"KRSC and as RSKC (C_out equals a kernel extent), and the two give different "
            f'weights; declare "layout". spconv 2.1 saved RSKC for layers of more than 32 '
            f"taps or on CPU-only builds, KRSC otherwise"
        )
    return fits[0], "detected from the shape"


def _layout_hint(d: KernelDeclaration) -> str:
    if d.version == "2.2":
        return (
            '; if this checkpoint comes from spconv 2.0 or 2.1, declare that "version" '
            "(they saved (K0, K1, K2, C_out, C_in) for some or all layers)"
        )
    return ""


def _flattened_rows(
    key: str, tensor: torch.Tensor, d: KernelDeclaration, shape: tuple[int, ...]
) -> tuple[Triple, str, str, torch.Tensor, str]:
    """TorchSparse and MinkowskiEngine: ``(K, C_in, C_out)`` or a 2-D ``1x1x1``."""
    family, source = d.framework, d.source
    if len(shape) == 2:
        if d.kernel_size is not None and math.prod(d.kernel_size) != 1:
            raise ConversionError(
                f"{key}: a 2-D {source} kernel {list(shape)} is a 1x1x1 kernel stored as "
                f"(C_in, C_out), but the spec declares kernel_size {list(d.kernel_size)}"
            )
        return (1, 1, 1), family + "-2d", "shape", tensor.unsqueeze(0), "none"
    if len(shape) != 3:
        raise ConversionError(
            f"{key}: a {source} kernel must be (K, C_in, C_out) or (C_in, C_out), "
            f"got shape {list(shape)}"
        )
    if shape[0] == 1 and d.kernel_size is None:
        size: Triple = (1, 1, 1)
    elif d.kernel_size is None:
        raise ConversionError(
            f"{key}: the flattened {source} kernel {list(shape)} does not say its kernel "
            f'shape ({shape[0]} taps); declare "kernel_size" for this key'
        )
    else:
        size = d.kernel_size
    if math.prod(size) != shape[0]:
        raise ConversionError(
            f"{key}: kernel_size {list(size)} has {math.prod(size)} taps but the {source} "
            f"kernel has {shape[0]} rows (shape {list(shape)})"
        )
    if family == "torchsparse" and d.version == "2.0" and shape[0] == 1:
        raise ConversionError(
            f"{key}: TorchSparse 2.0 stores 1x1x1 kernels as (C_in, C_out), but this "
            f"one is {list(shape)}; the checkpoint is probably TorchSparse 2.1 "
            f'(declare "version": "2.1")'
        )
    return size, family, "framework", tensor, "none"

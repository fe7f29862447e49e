"""What both runtimes share of the grid ops ``sparse_crop`` and ``sparse_to_dense``.

The keyword declarations (their docstrings are the ops' help text), the checks
of a box and of a dense layout, and spconv's output-shape formulas, which the
spconv port uses to place the bounds.  The array code is each runtime's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Required, TypedDict

from lattice_contract.dialect import DENSE_LAYOUTS, Triple, as_triple, dense_layout, int_triple
from lattice_contract.frontend.op_attrs import REQUIRED, Attr, IntOrTriple

__all__ = [
    "SparseCropAttrs",
    "SparseToDenseAttrs",
    "check_crop_box",
    "dense_axes",
    "dense_shape",
    "spconv_conv_out",
    "spconv_transpose_out",
]


def _any_triple(value: object, name: str, op: str) -> Triple:
    return as_triple(value, name)  # type: ignore[arg-type]


def _positive_triple(value: object, name: str, op: str) -> Triple:
    return int_triple(value, name, minimum=1)  # type: ignore[arg-type]


def _positive_int(value: object, name: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{op}: {name} must be an int >= 1, got {value!r}")
    return value


def _layout(value: object, name: str, op: str) -> str:
    return dense_layout(value, op)


class SparseCropAttrs(TypedDict, total=False):
    """The rows whose physical coordinates lie in ``lower <= c < upper`` on every axis.

    Rows keep their order, stride and features; the batch index is not bounded.
    This is spconv's grid bound: a strided, pooled or transposed spconv layer
    keeps an output only inside its output spatial shape, so its box is
    ``[0, out_shape * stride)`` per axis.  ``lower`` and ``upper`` are in
    physical units (multiples of the value's stride); an empty box is refused,
    an empty result is not.
    """

    lower: Required[Annotated[IntOrTriple, Attr("three ints (x, y, z)", _any_triple, REQUIRED)]]
    upper: Required[Annotated[IntOrTriple, Attr("three ints (x, y, z)", _any_triple, REQUIRED)]]


class SparseToDenseAttrs(TypedDict, total=False):
    """The value scattered into a zero dense array of a static grid (spconv's ``dense()``).

    Row ``(b, x, y, z)`` at stride ``t`` lands at grid cell ``(x/tx, y/ty, z/tz)``
    of batch item ``b``; cells without a row are zero.  ``spatial_shape`` is the
    grid's (X, Y, Z) in cells of the value's stride; ``layout`` orders the
    result: ``b_c_z_y_x`` is spconv's ``dense()`` of ``(b, z, y, x)`` indices,
    ``b_cz_y_x`` also folds depth into channels as OpenPCDet's height
    compression does (channel ``c * Z + z``).  A row outside the grid or with
    ``b >= batch_size`` is an error naming it (spconv raises there too).
    """

    spatial_shape: Required[
        Annotated[IntOrTriple, Attr("three ints >= 1 (X, Y, Z)", _positive_triple, REQUIRED)]
    ]
    batch_size: Required[Annotated[int, Attr("int >= 1", _positive_int, REQUIRED)]]
    layout: Annotated[str, Attr(" | ".join(repr(v) for v in DENSE_LAYOUTS), _layout, "b_c_z_y_x")]


def check_crop_box(lower: Triple, upper: Triple, stride: Triple, op: str = "sparse_crop") -> None:
    """Refuse an empty box or one off the stride's lattice (rules crop.box, crop.stride)."""
    if any(lo >= hi for lo, hi in zip(lower, upper, strict=True)):
        raise ValueError(
            f"{op}: box lower = {lower}, upper = {upper} is empty; every axis needs lower < upper"
        )
    for name, box in (("lower", lower), ("upper", upper)):
        if any(v % t for v, t in zip(box, stride, strict=True)):
            raise ValueError(
                f"{op}: {name} = {box} is not a multiple of the value's stride {stride}; "
                "write the box in physical units (grid cells times the stride)"
            )


def dense_axes(layout: str) -> tuple[str, ...]:
    """The result axes of ``layout``: ``b``, ``c``, ``x``, ``y``, ``z`` (``cz`` folded)."""
    return tuple(layout.split("_"))


def dense_shape(layout: str, batch: int, channels: int, spatial: Triple) -> tuple[int, ...]:
    """The result shape of ``sparse_to_dense`` (``spatial`` is X, Y, Z)."""
    x, y, z = spatial
    size = {"b": batch, "c": channels, "x": x, "y": y, "z": z, "cz": channels * z}
    return tuple(size[a] for a in dense_axes(layout))


def spconv_conv_out(shape: Sequence[int], k: Triple, s: Triple, p: Triple, d: Triple) -> Triple:
    """spconv's output spatial shape of a SparseConv3d or pool, per axis (any one order).

    ``floor((in + 2p - d(k-1) - 1) / s) + 1`` (``spconv.pytorch.ops.get_conv_output_size``).
    """
    out = tuple(
        (n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
        for n, kk, ss, pp, dd in zip(shape, k, s, p, d, strict=True)
    )
    return (out[0], out[1], out[2])


def spconv_transpose_out(
    shape: Sequence[int], k: Triple, s: Triple, p: Triple, output_padding: Triple
) -> Triple:
    """spconv's output spatial shape of a SparseConvTranspose3d, per axis.

    ``(in - 1) s - 2p + k + output_padding`` (``get_deconv_output_size``): spconv
    2.3.8 leaves dilation out of it, and so does this.
    """
    out = tuple(
        (n - 1) * ss - 2 * pp + kk + op
        for n, kk, ss, pp, op in zip(shape, k, s, p, output_padding, strict=True)
    )
    return (out[0], out[1], out[2])

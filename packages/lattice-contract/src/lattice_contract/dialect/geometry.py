"""Output geometry of the sparse conv and pool relations, written once for both runtimes.

Both runtimes' kernel maps (``mlx_lattice.kernel_map``, ``torch_lattice.kernel_map``)
take from here the three things that fix *where* an op's outputs lie, so that
the formulas exist once (docs/semantics.md gives them per op):

* the **output stride**: ``t * s`` for the forward family (``conv3d``,
  ``full_conv3d``, pools), ``t / s`` for the transposed family, which needs ``s``
  to divide ``t`` (:func:`forward_stride`, :func:`transposed_stride`,
  :func:`stride_divides`, :func:`output_stride`).  This is the one Python
  statement of the rule: the builder's result types, both runtimes and the
  dense reference call it, and a test checks the C++ verifier against it;
* the **tap shifts**, per tap in :mod:`lattice_contract.dialect.kernel` row order, that
  turn each relation into one addition per tap (:func:`centred_shifts`,
  :func:`full_shifts`, :func:`transposed_shifts`);
* the **coordinate bounds** of a generated support, from the input's logical
  bounds and the op's :class:`~lattice_contract.dialect.values.Window`, which size the
  runtimes' packed-key spaces
  (:func:`full_output_bounds`, :func:`transposed_output_bounds`).

It also holds the **coordinate-span policy**: a support whose bounding box
(batch, x, y, z extents, in logical units) holds 2^62 cells or more cannot be
indexed by either runtime's packed 64-bit keys, and both refuse it where the
value is constructed (``SparseTensor(...)``), with :class:`CoordinateSpanError`
and one message, rather than at its first conv.  Trusted values
(``SparseTensor.trusted``), which skip every check that needs a look at the
rows, meet the same error at their first op that indexes them.

Everything is in logical units (physical / stride) per axis, with K taps,
dilation d, op stride s and padding p.  Bounds are 4-tuples ``(batch, x, y, z)``;
the batch bound passes through unchanged.  These are plain-integer helpers
called once per op (never per row), so they cost nothing in a hot path.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice_contract.dialect.kernel import Triple, centred_tap_offsets, tap_offsets
from lattice_contract.dialect.types import StrideRule
from lattice_contract.dialect.values import Window

__all__ = [
    "SPAN_CELL_LIMIT",
    "Bounds",
    "CoordinateSpanError",
    "centred_shifts",
    "check_coordinate_span",
    "coordinate_span_error",
    "disjoint_windows",
    "forward_stride",
    "full_output_bounds",
    "full_shifts",
    "indexed_equals_centred",
    "is_submanifold_relation",
    "output_stride",
    "span_cells",
    "stride_divides",
    "transposed_output_bounds",
    "transposed_shifts",
    "transposed_stride",
]

Bounds = tuple[int, int, int, int]
"""Inclusive per-column bound of (batch, x, y, z) rows."""


SPAN_CELL_LIMIT = 1 << 62
"""Cells a support's bounding box must stay below (packed keys stay clear of int64's limits)."""


class CoordinateSpanError(ValueError):
    """The coordinates span a box too large to index (see the span policy above)."""


def span_cells(low: Sequence[int], high: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """Per-column extents of the inclusive box ``[low, high]`` and their product."""
    extents = tuple(max(int(h) - int(v) + 1, 1) for v, h in zip(low, high, strict=True))
    cells = 1
    for e in extents:
        cells *= e
    return extents, cells


def coordinate_span_error(extents: Sequence[int]) -> CoordinateSpanError:
    """The span policy's error, worded once for both runtimes."""
    return CoordinateSpanError(
        f"coordinates span a box of (batch, x, y, z) extents {tuple(extents)} in logical "
        f"units, 2^62 cells or more, which no runtime can index; translate the coordinates "
        f"so that they lie closer together, or split far-apart batch items into separate calls"
    )


def check_coordinate_span(low: Sequence[int], high: Sequence[int]) -> None:
    """Raise :class:`CoordinateSpanError` unless the box ``[low, high]`` is indexable."""
    extents, cells = span_cells(low, high)
    if cells >= SPAN_CELL_LIMIT:
        raise coordinate_span_error(extents)


def forward_stride(input_stride: Sequence[int], op_stride: Sequence[int]) -> Triple:
    """Output stride ``t * s`` of ``conv3d``, ``full_conv3d`` and the pools."""
    return (
        input_stride[0] * op_stride[0],
        input_stride[1] * op_stride[1],
        input_stride[2] * op_stride[2],
    )


def stride_divides(input_stride: Sequence[int], op_stride: Sequence[int]) -> bool:
    """Whether ``s`` divides ``t`` on every axis: the precondition of :func:`transposed_stride`."""
    return not any(t % s for t, s in zip(input_stride, op_stride, strict=True))


def transposed_stride(input_stride: Sequence[int], op_stride: Sequence[int], op: str) -> Triple:
    """Output stride ``t / s`` of a transposed or upsampling op; ValueError unless s divides t."""
    if not stride_divides(input_stride, op_stride):
        raise ValueError(
            f"{op}: stride {tuple(op_stride)} must divide the input stride "
            f"{tuple(input_stride)} on every axis (the output stride is input stride / stride)"
        )
    return (
        input_stride[0] // op_stride[0],
        input_stride[1] // op_stride[1],
        input_stride[2] // op_stride[2],
    )


def output_stride(
    rule: StrideRule, input_stride: Sequence[int], op_stride: Sequence[int] | None, op: str
) -> Triple:
    """The output stride an op's schema :class:`StrideRule` gives from its input's stride.

    ``multiply``: :func:`forward_stride`; ``divide``: :func:`transposed_stride`
    (ValueError unless s divides t); ``input``: the input's own stride
    (``op_stride`` unused).  The other rules (``attribute``, ``lhs``,
    ``target``, ``none``) do not derive from an input and a stride: ValueError.
    """
    if rule is StrideRule.input:
        return (int(input_stride[0]), int(input_stride[1]), int(input_stride[2]))
    if rule not in (StrideRule.multiply, StrideRule.divide):
        raise ValueError(f"{op}: stride rule {rule.value!r} does not follow from an input stride")
    if op_stride is None:
        raise ValueError(f"{op}: the {rule.value} stride rule needs a stride attribute")
    if rule is StrideRule.multiply:
        return forward_stride(input_stride, op_stride)
    return transposed_stride(input_stride, op_stride, op)


def centred_shifts(kernel_size: Triple, padding: Triple, dilation: Triple) -> list[Triple]:
    """Per tap ``off_c(k) - p``: tap k of output o reads input ``c = o*s + shift`` (conv3d)."""
    return [
        (off[0] - padding[0], off[1] - padding[1], off[2] - padding[2])
        for off in centred_tap_offsets(kernel_size, dilation)
    ]


def full_shifts(kernel_size: Triple, padding: Triple, dilation: Triple) -> list[Triple]:
    """Per tap ``p - k*d``: input c reaches ``o = (c + shift) / s`` where exact (full_conv3d).

    The same shift serves a transposed op evaluated at a target's rows, which
    reads input ``c = (o + shift) / s``.
    """
    return [
        (padding[0] - off[0], padding[1] - off[1], padding[2] - off[2])
        for off in tap_offsets(kernel_size, dilation)
    ]


def transposed_shifts(kernel_size: Triple, padding: Triple, dilation: Triple) -> list[Triple]:
    """Per tap ``k*d - p``: input c emits output ``o = c*s + shift`` (conv_transpose3d)."""
    return [
        (off[0] - padding[0], off[1] - padding[1], off[2] - padding[2])
        for off in tap_offsets(kernel_size, dilation)
    ]


def full_output_bounds(
    lo: Sequence[int], hi: Sequence[int], window: Window
) -> tuple[Bounds, Bounds]:
    """Bounds of every ``o = floor((c + p - k*d) / s)`` for c within ``[lo, hi]``."""

    kernel_size, op_stride, padding, dilation = window

    def low(a: int) -> int:
        return (lo[1 + a] + padding[a] - (kernel_size[a] - 1) * dilation[a]) // op_stride[a]

    def high(a: int) -> int:
        return (hi[1 + a] + padding[a]) // op_stride[a]

    return (lo[0], low(0), low(1), low(2)), (hi[0], high(0), high(1), high(2))


def transposed_output_bounds(
    lo: Sequence[int], hi: Sequence[int], window: Window
) -> tuple[Bounds, Bounds]:
    """Bounds of every ``o = c*s - p + k*d`` for c within ``[lo, hi]``."""

    kernel_size, op_stride, padding, dilation = window

    def low(a: int) -> int:
        return lo[1 + a] * op_stride[a] - padding[a]

    def high(a: int) -> int:
        return hi[1 + a] * op_stride[a] - padding[a] + (kernel_size[a] - 1) * dilation[a]

    return (lo[0], low(0), low(1), low(2)), (hi[0], high(0), high(1), high(2))


def is_submanifold_relation(kernel_size: Triple, op_stride: Triple, padding: Triple) -> bool:
    """Whether ``conv3d``'s relation is ``subm_conv3d``'s: s = 1, p = 0 and every K odd."""
    return (
        tuple(op_stride) == (1, 1, 1)
        and tuple(padding) == (0, 0, 0)
        and all(k % 2 == 1 for k in kernel_size)
    )


def indexed_equals_centred(kernel_size: Triple) -> bool:
    """Whether the centred offset rule is the indexed one on every axis (each K even or 1).

    Then a strided ``conv3d`` and ``full_conv3d`` share one relation, and a
    transposed op back onto the conv's input can reuse the conv's map.
    """
    return all(k % 2 == 0 or k == 1 for k in kernel_size)


def disjoint_windows(kernel_size: Triple, op_stride: Triple, dilation: Triple) -> bool:
    """Whether no two (input, tap) pairs of a transposed op reach one output: ``(K-1)*d < s``."""
    return all((kernel_size[a] - 1) * dilation[a] < op_stride[a] for a in range(3))

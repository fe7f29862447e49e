"""lattice_contract.dialect.geometry against the relations written out from their definitions.

Each relation is enumerated by brute force over a small box of input
coordinates and every tap (per axis, straight from docs/semantics.md), and the
helper's shifts and bounds must reproduce exactly the outputs it reaches.
"""

from __future__ import annotations

import itertools

import pytest
from lattice_contract.dialect import Triple, Window, geometry, kernel_taps

CASES: list[tuple[Triple, Triple, Triple, Triple]] = [
    ((3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1)),
    ((2, 3, 4), (2, 1, 3), (1, 0, 2), (1, 2, 1)),
    ((3, 1, 2), (2, 2, 2), (0, 1, 0), (2, 1, 1)),
    ((5, 2, 1), (3, 1, 2), (2, 0, 0), (1, 1, 3)),
]


def _centred(k: int, size: int, d: int) -> int:
    return (k - size // 2) * d if size % 2 else k * d


@pytest.mark.parametrize(("kernel", "stride", "padding", "dilation"), CASES)
def test_shifts_follow_the_definitions(
    kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> None:
    taps = kernel_taps(kernel)
    centred = geometry.centred_shifts(kernel, padding, dilation)
    full = geometry.full_shifts(kernel, padding, dilation)
    transposed = geometry.transposed_shifts(kernel, padding, dilation)
    for tap, c_shift, f_shift, t_shift in zip(taps, centred, full, transposed, strict=True):
        for a in range(3):
            assert c_shift[a] == _centred(tap[a], kernel[a], dilation[a]) - padding[a]
            assert f_shift[a] == padding[a] - tap[a] * dilation[a]
            assert t_shift[a] == tap[a] * dilation[a] - padding[a]


@pytest.mark.parametrize(("kernel", "stride", "padding", "dilation"), CASES)
def test_output_bounds_are_the_tight_box_of_the_reached_outputs(
    kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> None:
    lo, hi = (0, -3, 1, -7), (2, 4, 5, -2)
    inputs = list(itertools.product(*(range(lo[a], hi[a] + 1) for a in range(4))))
    full_out, transposed_out = set(), set()
    for c in inputs:
        for tap in kernel_taps(kernel):
            num = [c[1 + a] + padding[a] - tap[a] * dilation[a] for a in range(3)]
            # full_conv3d: c = o*s - p + k*d, only where the division is exact.
            if all(num[a] % stride[a] == 0 for a in range(3)):
                full_out.add((c[0], *(num[a] // stride[a] for a in range(3))))
            transposed_out.add(
                (
                    c[0],
                    *(c[1 + a] * stride[a] - padding[a] + tap[a] * dilation[a] for a in range(3)),
                )
            )
    t_lo, t_hi = geometry.transposed_output_bounds(
        lo, hi, Window(kernel, stride, padding, dilation)
    )
    assert t_lo == tuple(min(o[a] for o in transposed_out) for a in range(4))
    assert t_hi == tuple(max(o[a] for o in transposed_out) for a in range(4))
    f_lo, f_hi = geometry.full_output_bounds(lo, hi, Window(kernel, stride, padding, dilation))
    # The full box is floor-divided, so it may be wider than the exact outputs, never narrower.
    assert all(f_lo[a] <= min(o[a] for o in full_out) for a in range(4))
    assert all(f_hi[a] >= max(o[a] for o in full_out) for a in range(4))


def test_strides_and_predicates() -> None:
    assert geometry.forward_stride((2, 1, 4), (3, 2, 1)) == (6, 2, 4)
    assert geometry.transposed_stride((4, 6, 2), (2, 3, 1), "conv_transpose3d") == (2, 2, 2)
    with pytest.raises(ValueError, match=r"conv_transpose3d: stride \(2, 2, 2\) must divide"):
        geometry.transposed_stride((1, 1, 1), (2, 2, 2), "conv_transpose3d")
    assert geometry.is_submanifold_relation((3, 1, 5), (1, 1, 1), (0, 0, 0))
    assert not geometry.is_submanifold_relation((3, 2, 3), (1, 1, 1), (0, 0, 0))
    assert not geometry.is_submanifold_relation((3, 3, 3), (1, 1, 1), (1, 0, 0))
    assert geometry.indexed_equals_centred((2, 1, 4))
    assert not geometry.indexed_equals_centred((2, 3, 4))
    assert geometry.disjoint_windows((2, 2, 2), (2, 2, 2), (1, 1, 1))
    assert not geometry.disjoint_windows((3, 2, 2), (2, 2, 2), (1, 1, 1))

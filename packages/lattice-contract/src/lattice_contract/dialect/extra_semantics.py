"""Geometry, weights, defaults and messages shared by both runtimes' newer ops.

The normalised convolutions, the two upsampling ops, ``embedding_lookup`` and
``elementwise`` exist on MLX and on torch; what fixes their numbers and their
error words lives here, once.

``pool_transpose3d`` and ``trilinear_upsample3d`` are both weighted means over
the pairs of a transposed relation (input row c reaches output row o through
tap k when ``o = c*s - p + k*d``), so both runtimes run them on their
transposed kernel maps.  Trilinear upsampling by a stride s is that relation
with kernel ``2s - 1``, padding ``s - 1`` and dilation 1 per axis: tap k puts
coarse row c at distance ``|k - (s - 1)| < s`` from the fine row, and its hat
weight ``1 - |k - (s - 1)| / s`` is a constant of the tap.  Fixing those
numbers here, once, keeps the two runtimes' supports and weights identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from lattice_contract.dialect.kernel import Triple, kernel_taps
from lattice_contract.dialect.schema import ELEMENTWISE_KINDS
from lattice_contract.dialect.values import Window

__all__ = [
    "ELEMENTWISE_KINDS",
    "NORMALIZED_EPS",
    "TRILINEAR_MIN_WEIGHT",
    "Resampling",
    "check_elementwise_kind",
    "embedding_index_error",
    "resampling",
    "trilinear_tap_weights",
    "trilinear_window",
]

NORMALIZED_EPS = 1e-8
"""Default ``eps`` of the normalised convolutions (the reference system's)."""

TRILINEAR_MIN_WEIGHT = 1e-12
"""Clamp of the renormalising denominator of ``trilinear_upsample3d``."""


def trilinear_window(stride: Triple) -> Window:
    """The transposed-relation window whose pairs are exactly the hat's support."""
    return Window(
        (2 * stride[0] - 1, 2 * stride[1] - 1, 2 * stride[2] - 1),
        stride,
        (stride[0] - 1, stride[1] - 1, stride[2] - 1),
        (1, 1, 1),
    )


def trilinear_tap_weights(stride: Triple) -> tuple[float, ...]:
    """Hat weight of every tap of :func:`trilinear_window`, in tap-row order.

    Per axis ``1 - |k - (s - 1)| / s`` (1 at the coarse row's own position,
    falling linearly to ``1/s`` one step short of the next coarse row); the
    3-D weight is the product.
    """
    kernel = trilinear_window(stride).kernel_size
    weights = []
    for tap in kernel_taps(kernel):
        w = 1.0
        for k, s in zip(tap, stride, strict=True):
            w *= 1.0 - abs(k - (s - 1)) / s
        weights.append(w)
    return tuple(weights)


class Resampling(NamedTuple):
    """How ``pool_transpose3d`` or ``trilinear_upsample3d`` weighs the pairs of its relation.

    Output row o is ``sum_k w_k x[c] / max(sum_k w_k, min_weight)`` over the
    pairs ``(c, k)`` of ``window``'s transposed relation; ``tap_weights``
    None means every pair weighs 1.
    """

    window: Window
    tap_weights: tuple[float, ...] | None
    min_weight: float


def resampling(op: str, attrs: Mapping[str, Any]) -> Resampling:
    """The weighting of an upsampling op from its normalised attributes.

    ``pool_transpose3d``: the plain mean over its window's pairs (a row no
    coarse row reaches has sum 0 and weight 0, so the clamp at 1 gives 0);
    ``trilinear_upsample3d``: the hat weights of its stride, renormalised.
    """
    if op == "trilinear_upsample3d":
        s = attrs["stride"]
        return Resampling(trilinear_window(s), trilinear_tap_weights(s), TRILINEAR_MIN_WEIGHT)
    window = Window(attrs["kernel_size"], attrs["stride"], attrs["padding"], attrs["dilation"])
    return Resampling(window, None, 1.0)


def embedding_index_error(position: int, index: int, rows: int) -> IndexError:
    """The error of an out-of-range ``embedding_lookup`` index, worded once for both runtimes."""
    return IndexError(
        f"embedding_lookup: index {index} (position {position}) is out of range for an "
        f"embedding table of {rows} rows; indices must lie in [0, {rows})"
    )


def check_index_vector(op: str, dtype_ok: bool, dtype: object, shape: tuple[int, ...]) -> None:
    """The dtype and rank rules of an index vector, worded once for both runtimes."""
    if not dtype_ok:
        raise TypeError(f"{op}: indices must be int32 (or int64), got {dtype}")
    if len(shape) != 1:
        raise ValueError(f"{op}: indices must have shape (N,), got {shape}")


def check_elementwise_kind(kind: object) -> str:
    """The ``elementwise`` kind, or a ValueError listing the kinds."""
    if not isinstance(kind, str) or kind not in ELEMENTWISE_KINDS:
        raise ValueError(
            f"elementwise: kind must be one of {', '.join(map(repr, ELEMENTWISE_KINDS))}, "
            f"got {kind!r}"
        )
    return kind

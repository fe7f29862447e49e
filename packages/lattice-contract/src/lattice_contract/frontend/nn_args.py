"""Constructor parameter handling of both runtimes' ``nn`` modules, once.

``mlx_lattice.nn`` and ``torch_lattice.nn`` mirror each other class for class
with the same parameter names (the artifact's storage keys).  What a
constructor does with its arguments before any array exists (checking channel
counts, normalising the geometry, the default initialisation bound, parsing an
activation's kind and parameters, the repr) depends on no array library, so
it lives here and both runtimes call it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from lattice_contract.dialect import (
    ActivationKind,
    GeluApprox,
    Triple,
    as_enum,
    positive_int,
    window,
)

__all__ = [
    "ActivationParams",
    "ConvParams",
    "activation_params",
    "conv_params",
    "conv_repr",
    "linear_params",
]


class ConvParams(NamedTuple):
    """A conv module's checked channel counts and geometry, and its initialisation bound."""

    in_channels: int
    out_channels: int
    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple
    init_bound: float
    """Half-width of torch's default uniform init, ``1 / sqrt(C_in * kernel volume)``."""

    @property
    def weight_shape(self) -> tuple[int, ...]:
        """``(C_out, Kx, Ky, Kz, C_in)``: the ``conv3d_o_xyz_i`` layout, transposed convs too."""
        return (self.out_channels, *self.kernel_size, self.in_channels)


def conv_params(
    in_channels: object,
    out_channels: object,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
) -> ConvParams:
    """Check a conv module's arguments; see :class:`ConvParams`."""
    c_in = positive_int(in_channels, "in_channels")
    c_out = positive_int(out_channels, "out_channels")
    k, s, p, d = window(kernel_size, stride, padding, dilation)
    return ConvParams(c_in, c_out, k, s, p, d, 1.0 / math.sqrt(c_in * math.prod(k)))


def conv_repr(
    in_channels: int, out_channels: int, geometry: Mapping[str, object], has_bias: bool
) -> str:
    """``"C_in, C_out, kernel_size=..., ..., bias=..."``: the repr both runtimes print."""
    parts = [f"{in_channels}, {out_channels}"]
    parts += [f"{name}={value}" for name, value in geometry.items()]
    parts.append(f"bias={has_bias}")
    return ", ".join(parts)


def linear_params(in_features: object, out_features: object) -> tuple[int, int, float]:
    """``(C_in, C_out, init bound 1/sqrt(C_in))`` of a ``Linear`` module."""
    c_in = positive_int(in_features, "in_features")
    c_out = positive_int(out_features, "out_features")
    return c_in, c_out, 1.0 / math.sqrt(c_in)


class ActivationParams(NamedTuple):
    """An ``Activation`` module's parsed ``lattice.activation`` attributes."""

    kind: ActivationKind
    approximate: GeluApprox
    alpha: float
    beta: float
    threshold: float


def activation_params(
    kind: ActivationKind | str,
    approximate: GeluApprox | str,
    alpha: object,
    beta: object,
    threshold: object,
) -> ActivationParams:
    """Parse an activation's kind and parameters (enum values or their spellings).

    Used by both runtimes' functional ``activation`` and their ``Activation``
    modules: the parameters must be finite numbers, and softplus needs a
    non-zero ``beta``.
    """
    numbers = []
    for name, value in (("alpha", alpha), ("beta", beta), ("threshold", threshold)):
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise ValueError(f"activation: {name} must be a finite number, got {value!r}")
        numbers.append(float(value))
    parsed = as_enum(kind, ActivationKind, "kind")
    if parsed is ActivationKind.softplus and numbers[1] == 0:
        raise ValueError("activation: softplus needs beta != 0")
    return ActivationParams(
        parsed, as_enum(approximate, GeluApprox, "approximate"), numbers[0], numbers[1], numbers[2]
    )

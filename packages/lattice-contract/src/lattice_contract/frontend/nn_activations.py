"""The activation modules of both runtimes, declared once: one row per class.

Each named activation is a row of this table: its class name, the
``lattice.activation`` kind it fixes, its constructor parameters with their
defaults (and which activation attribute each one sets), and its docstring.
:class:`Activation` holds what every row shares: parsing the kind and the
parameters (:func:`lattice_contract.frontend.nn_args.activation_params`, the same
checks the functional ``activation`` makes) and the repr.  Each runtime puts
its module base behind each row and writes the one ``activation`` call in
its ``Activation`` class (see :mod:`lattice_contract.frontend.nn_layers`).
"""

from __future__ import annotations

from typing import ClassVar

from lattice_contract.dialect import ActivationKind, GeluApprox
from lattice_contract.frontend.nn_args import activation_params
from lattice_contract.frontend.nn_layers import Layer

__all__ = [
    "ELU",
    "GELU",
    "Activation",
    "Hardswish",
    "Identity",
    "LeakyReLU",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Softplus",
    "Tanh",
]


class Activation(Layer):
    """Any ``lattice.activation`` kind with its parameters (the named subclasses fix ``kind``).

    Applied to a sparse value it transforms the features and keeps the
    support; applied to a dense array it acts on each row.
    """

    functional_op = "activation"

    def __init__(
        self,
        kind: ActivationKind | str,
        *,
        approximate: GeluApprox | str = GeluApprox.none,
        alpha: float = 0.01,
        beta: float = 1.0,
        threshold: float = 20.0,
    ) -> None:
        super().__init__()
        self.kind, self.approximate, self.alpha, self.beta, self.threshold = activation_params(
            kind, approximate, alpha, beta, threshold
        )

    def extra_repr(self) -> str:
        return f"kind={self.kind.value}"


class _Fixed(Activation):
    """A row without constructor parameters: only its ``kind``."""

    fixed_kind: ClassVar[ActivationKind]

    def __init__(self, inplace: bool = False) -> None:
        # ``inplace`` is torch's memory hint (``nn.ReLU(True)`` in TorchSparse and torch
        # code); a sparse activation returns a new value either way, so it is accepted.
        super().__init__(self.fixed_kind)


# ---------------------------------------------------------------- the table, one row a class


class ReLU(_Fixed):
    """``max(x, 0)``."""

    fixed_kind = ActivationKind.relu


class LeakyReLU(Activation):
    """``x`` where ``x >= 0``, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(ActivationKind.leaky_relu, alpha=negative_slope)


class GELU(Activation):
    """Gaussian error linear unit, exact (``approximate="none"``) or the tanh approximation."""

    def __init__(self, approximate: GeluApprox | str = GeluApprox.none) -> None:
        super().__init__(ActivationKind.gelu, approximate=approximate)


class SiLU(_Fixed):
    """``x * sigmoid(x)``."""

    fixed_kind = ActivationKind.silu


class Sigmoid(_Fixed):
    """Logistic sigmoid ``1 / (1 + exp(-x))``."""

    fixed_kind = ActivationKind.sigmoid


class Tanh(_Fixed):
    """Hyperbolic tangent."""

    fixed_kind = ActivationKind.tanh


class Softplus(Activation):
    """``log1p(exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(ActivationKind.softplus, beta=beta, threshold=threshold)


class ELU(Activation):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__(ActivationKind.elu, alpha=alpha)


class Hardswish(_Fixed):
    """``x * relu6(x + 3) / 6``."""

    fixed_kind = ActivationKind.hardswish


class Identity(_Fixed):
    """Returns its input unchanged (kept as an explicit op in artifacts)."""

    fixed_kind = ActivationKind.identity

"""Feature-only modules: Linear, norms, activations, softmax.

Applied to a :class:`~mlx_lattice.SparseTensor` they transform its feature rows
and keep its support (and kernel-map cache); applied to a dense array they act
on its last axis directly.  Parameter names follow torch:
Linear ``weight`` ``(C_out, C_in)`` / ``bias``; BatchNorm ``weight``, ``bias``,
``running_mean``, ``running_var`` (frozen: inference statistics); LayerNorm
``weight``, ``bias``; RMSNorm ``weight``.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.options import positive_int
from lattice_contract.schema import ActivationKind, GeluApprox
from lattice_contract.shared_nn import activation_params, linear_params

from mlx_lattice.nn.module import (
    Features,
    LatticeModule,
    WeightedModule,
    map_features,
)
from mlx_lattice.ops.feature import (
    activation,
    batch_norm,
    layer_norm,
    linear,
    rms_norm,
    softmax,
)

__all__ = [
    "ELU",
    "GELU",
    "Activation",
    "BatchNorm",
    "Hardswish",
    "Identity",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "RMSNorm",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
]


class Linear(WeightedModule):
    """``x @ weight.T + bias`` on feature rows (``lattice.linear``), summed in f32."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        c_in, c_out, bound = linear_params(in_features, out_features)
        self.in_features, self.out_features = c_in, c_out
        self.weight = mx.random.uniform(-bound, bound, (c_out, c_in))
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (c_out,))

    def __call__(self, x: Features) -> Features:
        weight, bias = self.weight_operand(), self.bias_operand()
        return map_features(x, lambda f: linear(f, weight, bias))

    def _extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={'bias' in self}"


class BatchNorm(LatticeModule):
    """Inference batch norm with frozen running statistics (``lattice.batch_norm``)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        c = positive_int(num_features, "num_features")
        self.num_features, self.eps = c, float(eps)
        self.weight = mx.ones((c,))
        self.bias = mx.zeros((c,))
        self.running_mean = mx.zeros((c,))
        self.running_var = mx.ones((c,))
        self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def __call__(self, x: Features) -> Features:
        return map_features(
            x,
            lambda f: batch_norm(
                f, self.weight, self.bias, self.running_mean, self.running_var, eps=self.eps
            ),
        )

    def _extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class LayerNorm(LatticeModule):
    """Per-row normalisation over channels (``lattice.layer_norm``)."""

    def __init__(self, num_features: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        c = positive_int(num_features, "num_features")
        self.num_features, self.eps = c, float(eps)
        self.weight = mx.ones((c,))
        if bias:
            self.bias = mx.zeros((c,))

    def __call__(self, x: Features) -> Features:
        bias = self.get("bias")
        return map_features(x, lambda f: layer_norm(f, self.weight, bias, eps=self.eps))

    def _extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class RMSNorm(LatticeModule):
    """Per-row root-mean-square normalisation (``lattice.rms_norm``)."""

    def __init__(self, num_features: int, eps: float = 1e-6) -> None:
        super().__init__()
        c = positive_int(num_features, "num_features")
        self.num_features, self.eps = c, float(eps)
        self.weight = mx.ones((c,))

    def __call__(self, x: Features) -> Features:
        return map_features(x, lambda f: rms_norm(f, self.weight, eps=self.eps))

    def _extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class Softmax(LatticeModule):
    """Softmax over the channels of each row (``lattice.softmax``)."""

    def __call__(self, x: Features) -> Features:
        return map_features(x, softmax)


class Activation(LatticeModule):
    """Any ``lattice.activation`` kind with its parameters (the named subclasses fix ``kind``)."""

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

    def __call__(self, x: Features) -> Features:
        return map_features(
            x,
            lambda f: activation(
                f,
                kind=self.kind,
                approximate=self.approximate,
                alpha=self.alpha,
                beta=self.beta,
                threshold=self.threshold,
            ),
        )

    def _extra_repr(self) -> str:
        return f"kind={self.kind.value}"


class ReLU(Activation):
    """``max(x, 0)``."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.relu)


class LeakyReLU(Activation):
    """``x`` for positive x, ``negative_slope * x`` otherwise."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__(ActivationKind.leaky_relu, alpha=negative_slope)


class GELU(Activation):
    """GELU, exact (``approximate="none"``) or the tanh approximation."""

    def __init__(self, approximate: GeluApprox | str = GeluApprox.none) -> None:
        super().__init__(ActivationKind.gelu, approximate=approximate)


class SiLU(Activation):
    """``x * sigmoid(x)``."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.silu)


class Sigmoid(Activation):
    """Logistic sigmoid."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.sigmoid)


class Tanh(Activation):
    """Hyperbolic tangent."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.tanh)


class Softplus(Activation):
    """``log1p(exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(ActivationKind.softplus, beta=beta, threshold=threshold)


class ELU(Activation):
    """``x`` for positive x, ``alpha * (exp(x) - 1)`` otherwise."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__(ActivationKind.elu, alpha=alpha)


class Hardswish(Activation):
    """``x * relu6(x + 3) / 6``."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.hardswish)


class Identity(Activation):
    """Returns its input unchanged."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.identity)

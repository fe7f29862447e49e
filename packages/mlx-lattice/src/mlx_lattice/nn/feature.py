"""Feature-only modules: Linear, norms, activations, softmax.

Applied to a :class:`~mlx_lattice.SparseTensor` they transform its feature rows
and keep its support (and kernel-map cache); applied to a dense array they act
on its last axis directly.  Parameter names follow torch:
Linear ``weight`` ``(C_out, C_in)`` / ``bias``; BatchNorm ``weight``, ``bias``,
``running_mean``, ``running_var`` (frozen: inference statistics); LayerNorm
``weight``, ``bias``; RMSNorm ``weight``.  ``Softmax`` and the activations
are declared once for both runtimes (:mod:`lattice_contract.nn_activations`).
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract import nn_activations, nn_layers
from lattice_contract.options import positive_int
from lattice_contract.shared_nn import linear_params

from mlx_lattice.nn.module import (
    Features,
    LatticeModule,
    WeightedModule,
    map_features,
)
from mlx_lattice.ops.feature import batch_norm, layer_norm, linear, rms_norm


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


class Softmax(nn_layers.Softmax, LatticeModule): ...


class Activation(nn_activations.Activation, LatticeModule): ...


class ReLU(nn_activations.ReLU, Activation): ...


class LeakyReLU(nn_activations.LeakyReLU, Activation): ...


class GELU(nn_activations.GELU, Activation): ...


class SiLU(nn_activations.SiLU, Activation): ...


class Sigmoid(nn_activations.Sigmoid, Activation): ...


class Tanh(nn_activations.Tanh, Activation): ...


class Softplus(nn_activations.Softplus, Activation): ...


class ELU(nn_activations.ELU, Activation): ...


class Hardswish(nn_activations.Hardswish, Activation): ...


class Identity(nn_activations.Identity, Activation): ...

"""Modules with parameters over feature rows: Linear, the norms, Embedding.

Applied to a :class:`~mlx_lattice.SparseTensor` they transform its feature rows
and keep its support (and kernel-map cache); applied to a dense array they act
on its last axis directly.  Parameter names follow torch:
Linear ``weight`` ``(C_out, C_in)`` / ``bias``; BatchNorm ``weight``, ``bias``,
``running_mean``, ``running_var`` (frozen: inference statistics); LayerNorm
``weight``, ``bias``; RMSNorm ``weight``; Embedding ``weight``
``(num_embeddings, C)``.  All but BatchNorm are declared once for both
runtimes (:mod:`lattice_contract.frontend.nn_features`); the MLX classes create the
arrays and write their ``__call__`` (one :mod:`mlx_lattice.ops` call).
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.frontend import nn_features

from mlx_lattice import ops
from mlx_lattice.nn.module import (
    Features,
    LatticeModule,
    WeightedModule,
    map_features,
)


class Linear(nn_features.Linear, WeightedModule):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        bound = self._configure(in_features, out_features)
        c_in, c_out = self.in_features, self.out_features
        self.weight = mx.random.uniform(-bound, bound, (c_out, c_in))
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (c_out,))

    def __call__(self, x: Features) -> Features:
        """Project a dense array's rows, or a sparse value's features (packed or dense weight)."""
        return map_features(x, lambda f: ops.linear(f, self.weight_operand(), self.bias_operand()))


class BatchNorm(LatticeModule):
    """Inference batch norm with frozen running statistics (``lattice.batch_norm``)."""

    def __init__(self, num_features: int, eps: float = nn_features.BATCH_NORM_EPS) -> None:
        super().__init__()
        self.num_features, self.eps = nn_features.norm_params(
            num_features, eps, type(self).__name__
        )
        c = self.num_features
        self.weight = mx.ones((c,))
        self.bias = mx.zeros((c,))
        self.running_mean = mx.zeros((c,))
        self.running_var = mx.ones((c,))
        self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def __call__(self, x: Features) -> Features:
        return map_features(
            x,
            lambda f: ops.batch_norm(
                f, self.weight, self.bias, self.running_mean, self.running_var, eps=self.eps
            ),
        )

    def _extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class LayerNorm(nn_features.LayerNorm, LatticeModule):
    def __init__(
        self, num_features: int, eps: float = nn_features.LAYER_NORM_EPS, bias: bool = True
    ) -> None:
        super().__init__()
        c = self._configure(num_features, eps)
        self.weight = mx.ones((c,))
        if bias:
            self.bias = mx.zeros((c,))

    def __call__(self, x: Features) -> Features:
        """Normalise a dense array's rows, or a sparse value's features."""
        return map_features(
            x, lambda f: ops.layer_norm(f, self.weight, self.bias_operand(), eps=self.eps)
        )


class RMSNorm(nn_features.RMSNorm, LatticeModule):
    def __init__(self, num_features: int, eps: float = nn_features.RMS_NORM_EPS) -> None:
        super().__init__()
        self.weight = mx.ones((self._configure(num_features, eps),))

    def __call__(self, x: Features) -> Features:
        """Normalise a dense array's rows, or a sparse value's features."""
        return map_features(x, lambda f: ops.rms_norm(f, self.weight, eps=self.eps))


class Embedding(nn_features.Embedding, LatticeModule):
    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.weight = mx.random.normal(self._configure(num_embeddings, embedding_dim))

    def __call__(self, indices: mx.array) -> mx.array:
        """The table's rows at ``indices``."""
        return ops.embedding_lookup(indices, self.weight)

"""mlx-lattice 0.6's per-purpose op names, written once over a runtime's contract ops.

mlx-lattice 0.6 spelt one function per activation (``relu``, ``gelu``...),
per pooling mode (``max_pool3d``, ``global_avg_pool``...) and per binary op
(``sparse_add``...), where Lattice has one op with a keyword (``activation``,
``pool3d``, ``global_pool``, ``sparse_binary``).  Each name here is exactly
that op with the keyword fixed, so code written for 0.6 computes what the
contract op computes; nothing here is new arithmetic.  Both runtimes bind
:class:`UpstreamOps` to their own ops and export :data:`UPSTREAM_OP_NAMES`.

An activation takes a dense ``(N, C)`` array, as the contract op does, or a
sparse value, whose features it maps (0.6 accepted both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["UPSTREAM_OP_NAMES", "UpstreamOps"]

UPSTREAM_OP_NAMES: tuple[str, ...] = (
    "avg_pool3d",
    "elu",
    "gelu",
    "global_avg_pool",
    "global_max_pool",
    "global_sum_pool",
    "hardswish",
    "leaky_relu",
    "max_pool3d",
    "relu",
    "sigmoid",
    "silu",
    "softplus",
    "sparse_add",
    "sparse_cat_aligned",
    "sparse_maximum",
    "sparse_minimum",
    "sparse_mul",
    "sparse_sub",
    "sum_pool3d",
    "tanh",
)
"""The 0.6 names each runtime's ``ops`` package adds (as its extra names)."""


class _Sparse(Protocol):
    @property
    def feats(self) -> Any:
        """The feature rows."""

    def with_feats(self, feats: Any) -> Any:
        """Same support, new features."""


S = TypeVar("S")
A = TypeVar("A")


class UpstreamOps(Generic[S, A]):
    """The 0.6 names over one runtime's ``activation``, pooling and algebra ops."""

    def __init__(
        self,
        activation: Callable[..., A],
        pool3d: Callable[..., S],
        global_pool: Callable[..., A],
        sparse_binary: Callable[..., S],
        sparse_cat: Callable[..., S],
    ) -> None:
        self._activation = activation
        self._pool3d = pool3d
        self._global_pool = global_pool
        self._binary = sparse_binary
        self._cat = sparse_cat

    def _act(self, x: Any, kind: str, **attrs: Any) -> Any:
        if hasattr(x, "with_feats"):  # a sparse value: map its features, keep its support
            sparse: _Sparse = x
            return sparse.with_feats(self._activation(sparse.feats, kind=kind, **attrs))
        return self._activation(x, kind=kind, **attrs)

    # -- activations: ``activation(x, kind=...)`` -----------------------------------

    def relu(self, x: Any) -> Any:
        """``activation(x, kind="relu")``."""
        return self._act(x, "relu")

    def gelu(self, x: Any, approximate: str = "none") -> Any:
        """``activation(x, kind="gelu", approximate=...)``."""
        return self._act(x, "gelu", approximate=approximate)

    def silu(self, x: Any) -> Any:
        """``activation(x, kind="silu")``."""
        return self._act(x, "silu")

    def sigmoid(self, x: Any) -> Any:
        """``activation(x, kind="sigmoid")``."""
        return self._act(x, "sigmoid")

    def tanh(self, x: Any) -> Any:
        """``activation(x, kind="tanh")``."""
        return self._act(x, "tanh")

    def hardswish(self, x: Any) -> Any:
        """``activation(x, kind="hardswish")``."""
        return self._act(x, "hardswish")

    def leaky_relu(self, x: Any, negative_slope: float = 0.01) -> Any:
        """``activation(x, kind="leaky_relu", alpha=negative_slope)``."""
        return self._act(x, "leaky_relu", alpha=negative_slope)

    def elu(self, x: Any, alpha: float = 1.0) -> Any:
        """``activation(x, kind="elu", alpha=alpha)``."""
        return self._act(x, "elu", alpha=alpha)

    def softplus(self, x: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
        """``activation(x, kind="softplus", beta=..., threshold=...)``."""
        return self._act(x, "softplus", beta=beta, threshold=threshold)

    # -- pooling: ``pool3d`` / ``global_pool`` with the mode fixed --------------------

    def max_pool3d(self, x: S, kernel_size: Any, stride: Any = 1, **geometry: Any) -> S:
        """``pool3d(x, mode="max", ...)`` (``padding``, ``dilation`` as there)."""
        return self._pool3d(x, kernel_size=kernel_size, stride=stride, mode="max", **geometry)

    def avg_pool3d(self, x: S, kernel_size: Any, stride: Any = 1, **geometry: Any) -> S:
        """``pool3d(x, mode="avg", ...)``: the mean over the active inputs of each window."""
        return self._pool3d(x, kernel_size=kernel_size, stride=stride, mode="avg", **geometry)

    def sum_pool3d(self, x: S, kernel_size: Any, stride: Any = 1, **geometry: Any) -> S:
        """``pool3d(x, mode="sum", ...)``."""
        return self._pool3d(x, kernel_size=kernel_size, stride=stride, mode="sum", **geometry)

    def global_avg_pool(self, x: S, batch_size: int = -1) -> A:
        """``global_pool(x, mode="avg")``: one dense row per batch item."""
        return self._global_pool(x, mode="avg", batch_size=batch_size)

    def global_max_pool(self, x: S, batch_size: int = -1) -> A:
        """``global_pool(x, mode="max")``."""
        return self._global_pool(x, mode="max", batch_size=batch_size)

    def global_sum_pool(self, x: S, batch_size: int = -1) -> A:
        """``global_pool(x, mode="sum")``."""
        return self._global_pool(x, mode="sum", batch_size=batch_size)

    # -- coordinate-aligned algebra: ``sparse_binary`` / ``sparse_cat`` ---------------

    def sparse_add(self, lhs: S, rhs: S, join: str = "inner") -> S:
        """``sparse_binary(lhs, rhs, op="add", join=...)``."""
        return self._binary(lhs, rhs, op="add", join=join)

    def sparse_sub(self, lhs: S, rhs: S, join: str = "inner") -> S:
        """``sparse_binary(lhs, rhs, op="sub", join=...)``."""
        return self._binary(lhs, rhs, op="sub", join=join)

    def sparse_mul(self, lhs: S, rhs: S, join: str = "inner") -> S:
        """``sparse_binary(lhs, rhs, op="mul", join=...)``."""
        return self._binary(lhs, rhs, op="mul", join=join)

    def sparse_maximum(self, lhs: S, rhs: S, join: str = "inner") -> S:
        """``sparse_binary(lhs, rhs, op="maximum", join=...)``."""
        return self._binary(lhs, rhs, op="maximum", join=join)

    def sparse_minimum(self, lhs: S, rhs: S, join: str = "inner") -> S:
        """``sparse_binary(lhs, rhs, op="minimum", join=...)``."""
        return self._binary(lhs, rhs, op="minimum", join=join)

    def sparse_cat_aligned(self, lhs: S, rhs: S, join: str = "inner") -> S:
        """``sparse_cat(lhs, rhs, join=...)``: channels concatenated on aligned coordinates."""
        return self._cat(lhs, rhs, join=join)

"""The weighted feature modules of both runtimes, declared once: Linear, norms, Embedding.

Applied to a sparse value they transform its feature rows and keep its
support; applied to a dense array they act on each row.  The parameter
names follow torch and are the artifact's storage keys: Linear ``weight``
``(C_out, C_in)`` and ``bias``; LayerNorm ``weight`` and ``bias``; RMSNorm
``weight``; Embedding ``weight`` ``(num_embeddings, C)``.  Each runtime
writes the constructor (its library creates the parameters, with its own
conventions such as torch's ``device=``/``dtype=``), calling ``_configure``
for the checked sizes, and its own ``forward`` (MLX: ``__call__``) with the
op call; the checks, repr, docstring and op name are these.
"""

from __future__ import annotations

from lattice_contract.dialect import positive_float, positive_int
from lattice_contract.frontend.nn_args import linear_params
from lattice_contract.frontend.nn_layers import Weighted

__all__ = [
    "BATCH_NORM_EPS",
    "LAYER_NORM_EPS",
    "RMS_NORM_EPS",
    "Embedding",
    "LayerNorm",
    "Linear",
    "RMSNorm",
    "norm_params",
]

BATCH_NORM_EPS = 1e-5
"""``BatchNorm``'s default ``eps`` (torch's ``BatchNorm1d``'s).  The module itself is
each runtime's: torch's trains (batch statistics, running updates), MLX's is frozen."""

LAYER_NORM_EPS = 1e-5
"""``LayerNorm``'s default ``eps`` (torch's)."""

RMS_NORM_EPS = 1e-6
"""``RMSNorm``'s default ``eps``."""


class Linear(Weighted):
    """``x @ weight.T + bias`` on feature rows (``lattice.linear``), summed in f32.

    ``weight`` is ``(C_out, C_in)``, initialised as torch's: uniform in
    ``+-1/sqrt(C_in)``.
    """

    functional_op = "linear"

    in_features: int
    out_features: int

    def _configure(self, in_features: object, out_features: object) -> float:
        """Check and store the feature counts; the init bound comes back."""
        self.in_features, self.out_features, bound = linear_params(in_features, out_features)
        return bound

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self._has_bias()}"


def norm_params(num_features: object, eps: object, module: str) -> tuple[int, float]:
    """A normalisation module's checked channel count and ``eps`` (BatchNorm's too).

    ``eps`` must be a positive finite number, checked here at construction so
    that ``RMSNorm(8, eps=0)`` fails where it is written, naming ``module``,
    instead of at the first forward with the array library's words.
    """
    return positive_int(num_features, "num_features"), positive_float(eps, "eps", module)


class _RowNorm(Weighted):
    """A per-row normalisation over the channels, with its ``eps``."""

    num_features: int
    eps: float

    def _configure(self, num_features: object, eps: float) -> int:
        """Check and store the channel count and ``eps``; the channel count comes back."""
        self.num_features, self.eps = norm_params(num_features, eps, type(self).__name__)
        return self.num_features

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class LayerNorm(_RowNorm):
    """Normalise each row over its channels, then ``* weight + bias`` (``lattice.layer_norm``)."""

    functional_op = "layer_norm"


class RMSNorm(_RowNorm):
    """``x / sqrt(mean(x^2) + eps) * weight`` over each row's channels (``lattice.rms_norm``)."""

    functional_op = "rms_norm"


class Embedding(Weighted):
    """A learned table ``weight`` (num_embeddings, C) read by ``lattice.embedding_lookup``.

    ``m(indices)`` maps an int32 index vector to ``weight[indices]``; an index
    out of range is an error naming it.  Initialised N(0, 1) like
    ``torch.nn.Embedding``.
    """

    functional_op = "embedding_lookup"

    num_embeddings: int
    embedding_dim: int

    def _configure(self, num_embeddings: object, embedding_dim: object) -> tuple[int, int]:
        """Check and store the table's size; ``(rows, channels)`` comes back."""
        self.num_embeddings = positive_int(num_embeddings, "num_embeddings")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim")
        return self.num_embeddings, self.embedding_dim

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"

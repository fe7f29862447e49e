"""Modules with parameters or training state over feature rows, and ``Sequential``.

Feature modules accept a dense (N, C) tensor or a SparseTensor; on a sparse
value they transform the features and keep the support with ``with_feats``
(the contract's ``sparse.decompose`` → op → ``sparse.with_features``).
Parameter and buffer names are artifact storage keys: ``Linear.weight/bias``,
``BatchNorm.weight/bias/running_mean/running_var``, ``LayerNorm.weight/bias``,
``RMSNorm.weight``, ``Embedding.weight`` (num_embeddings, C).  ``Linear``,
the norms and ``Embedding`` are declared once for both runtimes
(:mod:`lattice_contract.frontend.nn_features`): this file creates their torch
parameters and writes their ``forward`` (one :mod:`torch_lattice.ops` call).
``BatchNorm`` (which trains), ``Dropout`` and ``Sequential`` are torch's own.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import torch
import torch.nn.functional as F
from lattice_contract.frontend import nn_features

from torch_lattice import ops
from torch_lattice.nn._amp import autocast_operands
from torch_lattice.nn.base import Module, Weighted, on_feats
from torch_lattice.sparse import SparseTensor


class Linear(nn_features.Linear, Weighted):
    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        bound = self._configure(in_features, out_features)
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(
            torch.empty(self.out_features, self.in_features, **factory)
        )
        self.bias: torch.nn.Parameter | None
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(self.out_features, **factory))
        else:
            self.register_parameter("bias", None)
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        """Project a dense tensor's rows, or a sparse value's features."""

        def project(f: torch.Tensor) -> torch.Tensor:
            with autocast_operands(f, self.weight, self.bias) as (f, weight, bias):
                return ops.linear(f, weight, bias)

        return on_feats(x, project)


class BatchNorm(torch.nn.Module):
    """Batch norm over feature rows, with ``torch.nn.BatchNorm1d``'s state and update rule.

    Training: normalise with the batch statistics of the active rows (biased
    variance) and update ``running_mean`` / ``running_var`` (unbiased) with
    ``momentum`` -- or, with ``momentum=None``, the cumulative average over
    ``num_batches_tracked`` batches -- as ``torch.nn.BatchNorm1d`` does.  The
    state dict therefore has BatchNorm1d's five entries and loads one
    directly (a state dict without ``num_batches_tracked`` loads too, as in
    torch).  Statistics are computed in f32 whatever the parameter dtype, so
    ``.half()`` / ``.bfloat16()`` models and autocast train without
    overflowing the variance.  Eval: the frozen ``ops.batch_norm`` with the
    running statistics, which is what an artifact stores (scale = weight,
    bias, mean = running_mean, var = running_var; ``num_batches_tracked`` is
    training state and never exported).
    """

    def __init__(
        self,
        num_features: int,
        eps: float = nn_features.BATCH_NORM_EPS,
        momentum: float | None = 0.1,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_features, self.eps = nn_features.norm_params(
            num_features, eps, type(self).__name__
        )
        self.momentum = momentum
        c, factory = self.num_features, {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.ones(c, **factory))
        self.bias = torch.nn.Parameter(torch.zeros(c, **factory))
        self.register_buffer("running_mean", torch.zeros(c, **factory))
        self.register_buffer("running_var", torch.ones(c, **factory))
        self.register_buffer(
            "num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device)
        )

    running_mean: torch.Tensor
    running_var: torch.Tensor
    num_batches_tracked: torch.Tensor

    def _load_from_state_dict(
        self,
        state_dict: dict[str, Any],
        prefix: str,
        local_metadata: dict[str, Any],
        strict: bool,
        missing_keys: list[str],
        unexpected_keys: list[str],
        error_msgs: list[str],
    ) -> None:
        # Older checkpoints (and artifacts' weights) have no counter: start at 0, as torch does.
        key = prefix + "num_batches_tracked"
        if key not in state_dict:
            state_dict[key] = torch.tensor(0, dtype=torch.long)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def _check_features(self, f: torch.Tensor) -> None:
        if f.ndim != 2 or f.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm({self.num_features}) needs features (N, {self.num_features}), "
                f"got {tuple(f.shape)}"
            )

    @overload
    def _count_batch(self, on_device: Literal[False] = False) -> float: ...
    @overload
    def _count_batch(self, on_device: Literal[True]) -> float | torch.Tensor: ...
    def _count_batch(self, on_device: bool = False) -> float | torch.Tensor:
        """Count one training batch; the running statistics' update factor for it.

        ``momentum``, or with ``momentum=None`` the cumulative average's
        ``1 / num_batches_tracked``, as ``torch.nn.BatchNorm1d`` does;
        ``on_device`` keeps that average's factor a device tensor (no host
        read, which a captured training step's CUDA graph cannot make).
        """
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            if self.momentum is not None:
                return float(self.momentum)
            if on_device:
                return 1.0 / self.num_batches_tracked.to(torch.float32)
        return 1.0 / float(self.num_batches_tracked)

    def _features(self, f: torch.Tensor) -> torch.Tensor:
        if not self.training:
            # The module's own tensors, uncast: the op reads half features with f32
            # statistics in one pass (rounding f32 statistics to f16 first would lose
            # precision, and four casts a call cost launches).
            return ops.batch_norm(
                f, self.weight, self.bias, self.running_mean, self.running_var, eps=self.eps
            )
        self._check_features(f)
        if f.shape[0] < 2:
            raise ValueError(
                "BatchNorm in training mode needs at least 2 rows to estimate variance"
            )
        factor = self._count_batch()
        dtype = torch.float64 if f.dtype == torch.float64 else torch.float32
        # F.batch_norm updates the statistics in place and needs them in the
        # compute dtype; half buffers get an f32 working copy written back.
        mean, var = self.running_mean, self.running_var
        if mean.dtype != dtype:
            mean, var = mean.to(dtype), var.to(dtype)
        # Half features go in as they are, with f32 parameters and statistics (as
        # torch.nn.BatchNorm1d under autocast): torch sums the statistics in f32 and
        # rounds the output once to the features' dtype, and autograd keeps the half
        # input only.  Widening them first kept an f32 copy of every activation for
        # the backward pass (twice the memory of the half network).
        y = F.batch_norm(
            f,
            mean,
            var,
            self.weight.to(dtype),
            self.bias.to(dtype),
            training=True,
            momentum=factor,
            eps=self.eps,
        )
        if mean is not self.running_mean:
            with torch.no_grad():
                self.running_mean.copy_(mean)
                self.running_var.copy_(var)
        return y

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        if self.training and isinstance(x, SparseTensor) and x.support.active is not None:
            return x.with_feats(self._padded_features(x.feats, x.support.active))
        return on_feats(x, self._features)

    def _padded_features(self, f: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Training on a padded support (a captured training step): the live rows' statistics.

        Rows at and past ``live`` (an int32 device count) are padding, which
        torch's batch norm would count; the Triton kernels sum the live rows
        only, update the running statistics on the device (no host read: the
        step is one CUDA graph) and keep the padding's output at zero.
        """
        from torch_lattice.triton.batch_norm import masked_batch_norm  # padded: Triton runs

        self._check_features(f)
        factor = self._count_batch(on_device=True)
        return masked_batch_norm(
            f, live, self.weight, self.bias, self.running_mean, self.running_var, factor, self.eps
        )

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class Dropout(torch.nn.Module):
    """Zero each feature with probability ``p`` while training (scaled by ``1/(1-p)``).

    In eval mode it returns its input unchanged -- the very same object -- so
    an exported artifact has no op for it, as ``torch.nn.Dropout`` has no
    effect at inference.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0 or isinstance(p, bool):
            raise ValueError(f"Dropout: p must be in [0, 1), got {p!r}")
        self.p = float(p)

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return on_feats(x, lambda f: F.dropout(f, self.p, training=True))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerNorm(nn_features.LayerNorm, Module):
    def __init__(
        self,
        num_features: int,
        eps: float = nn_features.LAYER_NORM_EPS,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        c = self._configure(num_features, eps)
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.ones(c, **factory))
        self.bias = torch.nn.Parameter(torch.zeros(c, **factory))

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        """Normalise a dense tensor's rows, or a sparse value's features."""
        return on_feats(x, lambda f: ops.layer_norm(f, self.weight, self.bias, eps=self.eps))


class RMSNorm(nn_features.RMSNorm, Module):
    def __init__(
        self,
        num_features: int,
        eps: float = nn_features.RMS_NORM_EPS,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        c = self._configure(num_features, eps)
        self.weight = torch.nn.Parameter(torch.ones(c, device=device, dtype=dtype))

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        """Normalise a dense tensor's rows, or a sparse value's features."""
        return on_feats(x, lambda f: ops.rms_norm(f, self.weight, eps=self.eps))


class Sequential(torch.nn.Sequential):
    """``torch.nn.Sequential`` for single-input sparse layers (names: ``0.weight``, ...)."""


class Embedding(nn_features.Embedding, Module):
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        size = self._configure(num_embeddings, embedding_dim)
        self.weight = torch.nn.Parameter(torch.empty(*size, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Standard normal entries (``torch.nn.Embedding``'s default)."""
        torch.nn.init.normal_(self.weight)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        """The table's rows at ``indices``."""
        return ops.embedding_lookup(indices, self.weight)

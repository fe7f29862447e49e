"""Pooling, feature, point and algebra modules, and ``Sequential``.

Feature modules accept a dense (N, C) tensor or a SparseTensor; on a sparse
value they transform the features and keep the support with ``with_feats``
(the contract's ``sparse.decompose`` → op → ``sparse.with_features``).
Parameter and buffer names are artifact storage keys: ``Linear.weight/bias``,
``BatchNorm.weight/bias/running_mean/running_var``, ``LayerNorm.weight/bias``,
``RMSNorm.weight``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, overload

import torch
import torch.nn.functional as F
from lattice_contract.kernel import as_triple
from lattice_contract.options import as_enum, resolve_batch_size, voxel_grid, window
from lattice_contract.schema import (
    ActivationKind,
    BinaryOp,
    GeluApprox,
    Interpolation,
    Join,
    PoolMode,
    VoxelReduction,
)
from lattice_contract.shared_nn import activation_params, linear_params

from torch_lattice import ops
from torch_lattice.nn._amp import run_autocast
from torch_lattice.sparse import SparseTensor

__all__ = [
    "ELU",
    "GELU",
    "Activation",
    "AvgPool3d",
    "BatchNorm",
    "Devoxelize",
    "Dropout",
    "FullAvgPool3d",
    "FullMaxPool3d",
    "FullSumPool3d",
    "GlobalPool",
    "Hardswish",
    "Identity",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool3d",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "SparseAdd",
    "SparseBinary",
    "SparseCat",
    "SparseReindex",
    "SumPool3d",
    "Tanh",
    "Voxelize",
]

Triple = tuple[int, int, int]


@overload
def _on_feats(x: SparseTensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> SparseTensor: ...
@overload
def _on_feats(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor: ...
def _on_feats(
    x: SparseTensor | torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]
) -> SparseTensor | torch.Tensor:
    if isinstance(x, SparseTensor):
        return x.with_feats(fn(x.feats))
    return fn(x)


# --------------------------------------------------------------------------- pooling


class _Pool3d(torch.nn.Module):
    mode: PoolMode
    _op: ClassVar[Callable[..., SparseTensor]] = staticmethod(ops.pool3d)

    def __init__(
        self,
        kernel_size: int | Triple,
        stride: int | Triple | None = None,
        padding: int | Triple = 0,
        dilation: int | Triple = 1,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = window(
            kernel_size, stride, padding, dilation
        )

    def forward(self, x: SparseTensor) -> SparseTensor:
        return type(self)._op(
            x,
            mode=self.mode,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}"
        )


class MaxPool3d(_Pool3d):
    """Max over each window's active inputs on the coarsened support (``lattice.pool3d``).

    The stride defaults to the kernel size, as in torch; windows follow the
    centred rule of ``conv3d``.
    """

    mode = PoolMode.max


class AvgPool3d(_Pool3d):
    """Mean over each window's active inputs (divides by their count); ``lattice.pool3d``."""

    mode = PoolMode.avg


class SumPool3d(_Pool3d):
    """Sum over each window's active inputs; ``lattice.pool3d``."""

    mode = PoolMode.sum


class FullMaxPool3d(MaxPool3d):
    """spconv's max pool (``lattice.full_pool3d``): the indexed relation, growing support."""

    _op = staticmethod(ops.full_pool3d)


class FullAvgPool3d(AvgPool3d):
    """spconv-style mean pool (``lattice.full_pool3d``): the indexed relation."""

    _op = staticmethod(ops.full_pool3d)


class FullSumPool3d(SumPool3d):
    """spconv-style sum pool (``lattice.full_pool3d``): the indexed relation."""

    _op = staticmethod(ops.full_pool3d)


class GlobalPool(torch.nn.Module):
    """Per-batch reduction to a dense (B, C) tensor.

    ``batch_size=-1`` (the default; ``None`` means the same) infers B as the
    largest batch index + 1 at call time, and is what an exported artifact
    records, so one artifact serves any batch.  A positive value fixes B; 0
    gives an empty result.
    """

    def __init__(self, mode: PoolMode | str = PoolMode.avg, batch_size: int | None = -1) -> None:
        super().__init__()
        self.mode = as_enum(mode, PoolMode, "mode")
        resolve_batch_size(-1 if batch_size is None else batch_size, None, "GlobalPool")
        self.batch_size = -1 if batch_size is None else batch_size

    def forward(self, x: SparseTensor) -> torch.Tensor:
        return ops.global_pool(x, mode=self.mode, batch_size=self.batch_size)


# --------------------------------------------------------------------------- features


class Linear(torch.nn.Module):
    """``x @ weight^T + bias`` on features; weight (C_out, C_in)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features, bound = linear_params(in_features, out_features)
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features, **factory))
        self.bias: torch.nn.Parameter | None
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_features, **factory))
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
        return _on_feats(x, lambda f: run_autocast(f, self.weight, self.bias, ops.linear))

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


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
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.ones(num_features, **factory))
        self.bias = torch.nn.Parameter(torch.zeros(num_features, **factory))
        self.register_buffer("running_mean", torch.zeros(num_features, **factory))
        self.register_buffer("running_var", torch.ones(num_features, **factory))
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

    def _count_batch(self) -> float:
        """Count one training batch; the running statistics' update factor for it.

        ``momentum``, or with ``momentum=None`` the cumulative average's
        ``1 / num_batches_tracked``, as ``torch.nn.BatchNorm1d`` does.
        """
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
        if self.momentum is None:
            return 1.0 / float(self.num_batches_tracked)
        return float(self.momentum)

    def _features(self, f: torch.Tensor) -> torch.Tensor:
        if not self.training:
            dtype = f.dtype
            return ops.batch_norm(
                f,
                self.weight.to(dtype),
                self.bias.to(dtype),
                self.running_mean.to(dtype),
                self.running_var.to(dtype),
                eps=self.eps,
            )
        if f.ndim != 2 or f.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm({self.num_features}) needs features (N, {self.num_features}), "
                f"got {tuple(f.shape)}"
            )
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
        y = F.batch_norm(
            f.to(dtype),
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
        return y.to(f.dtype)

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        return _on_feats(x, self._features)

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
        return _on_feats(x, lambda f: F.dropout(f, self.p, training=True))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerNorm(torch.nn.Module):
    """Normalise each row over its channels, then ``* weight + bias``."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.ones(num_features, **factory))
        self.bias = torch.nn.Parameter(torch.zeros(num_features, **factory))

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        return _on_feats(x, lambda f: ops.layer_norm(f, self.weight, self.bias, eps=self.eps))


class RMSNorm(torch.nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over each row's channels."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-6,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(num_features, device=device, dtype=dtype))

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        return _on_feats(x, lambda f: ops.rms_norm(f, self.weight, eps=self.eps))


class Activation(torch.nn.Module):
    """Any contract activation by kind (``relu``, ``gelu``, ...), torch's parameter conventions."""

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

    def _features(self, f: torch.Tensor) -> torch.Tensor:
        return ops.activation(
            f,
            kind=self.kind,
            approximate=self.approximate,
            alpha=self.alpha,
            beta=self.beta,
            threshold=self.threshold,
        )

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        return _on_feats(x, self._features)

    def extra_repr(self) -> str:
        return f"kind={self.kind.value}"


class ReLU(Activation):
    """max(x, 0)."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.relu)


class LeakyReLU(Activation):
    """x where x >= 0, else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__(ActivationKind.leaky_relu, alpha=negative_slope)


class GELU(Activation):
    """Gaussian error linear unit, exact or tanh-approximated."""

    def __init__(self, approximate: GeluApprox | str = GeluApprox.none) -> None:
        super().__init__(ActivationKind.gelu, approximate=approximate)


class SiLU(Activation):
    """x * sigmoid(x)."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.silu)


class Sigmoid(Activation):
    """1 / (1 + exp(-x))."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.sigmoid)


class Tanh(Activation):
    """tanh(x)."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.tanh)


class Softplus(Activation):
    """log1p(exp(beta*x)) / beta, linear above the threshold."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(ActivationKind.softplus, beta=beta, threshold=threshold)


class ELU(Activation):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__(ActivationKind.elu, alpha=alpha)


class Hardswish(Activation):
    """x * relu6(x + 3) / 6."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.hardswish)


class Identity(Activation):
    """The identity (kept as an explicit op in artifacts)."""

    def __init__(self) -> None:
        super().__init__(ActivationKind.identity)


class Softmax(torch.nn.Module):
    """Softmax over each row's channels."""

    @overload
    def forward(self, x: SparseTensor) -> SparseTensor: ...
    @overload
    def forward(self, x: torch.Tensor) -> torch.Tensor: ...
    def forward(self, x: SparseTensor | torch.Tensor) -> SparseTensor | torch.Tensor:
        return _on_feats(x, ops.softmax)


# --------------------------------------------------------------------------- points


class Voxelize(torch.nn.Module):
    """Points (P, 3) f32 + features + batch index → voxels ``floor((p - origin) / voxel_size)``.

    The result sits at ``stride`` (coordinates ``cell * stride``), rows in
    first-occurrence order (``lattice.voxelize``).
    """

    def __init__(
        self,
        voxel_size: float | tuple[float, float, float],
        reduction: VoxelReduction | str = VoxelReduction.mean,
        *,
        origin: float | tuple[float, float, float] = 0.0,
        stride: int | Triple = 1,
    ) -> None:
        super().__init__()
        self.voxel_size, self.origin = voxel_grid(voxel_size, origin, "Voxelize")
        self.reduction = as_enum(reduction, VoxelReduction, "reduction")
        self.stride = as_triple(stride, "stride")

    def forward(
        self,
        points: torch.Tensor,
        features: torch.Tensor,
        batch: torch.Tensor,
        active_rows: torch.Tensor | int | None = None,
    ) -> SparseTensor:
        return ops.voxelize(
            points,
            features,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            reduction=self.reduction,
            stride=self.stride,
        )


class Devoxelize(torch.nn.Module):
    """Sparse voxels read back at points (nearest, linear or trilinear) → dense (P, C).

    Called as ``forward(x, points, batch)``; ``lattice.devoxelize``.
    """

    def __init__(
        self,
        voxel_size: float | tuple[float, float, float],
        interpolation: Interpolation | str = Interpolation.linear,
        *,
        origin: float | tuple[float, float, float] = 0.0,
    ) -> None:
        super().__init__()
        self.voxel_size, self.origin = voxel_grid(voxel_size, origin, "Devoxelize")
        self.interpolation = as_enum(interpolation, Interpolation, "interpolation")

    def forward(
        self,
        x: SparseTensor,
        points: torch.Tensor,
        batch: torch.Tensor,
        active_rows: torch.Tensor | int | None = None,
    ) -> torch.Tensor:
        return ops.devoxelize(
            points,
            x,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            interpolation=self.interpolation,
        )


# --------------------------------------------------------------------------- algebra


class SparseBinary(torch.nn.Module):
    """Elementwise op of two coordinate-aligned values (missing side = zeros)."""

    def __init__(self, op: BinaryOp | str, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.op = as_enum(op, BinaryOp, "op")
        self.join = as_enum(join, Join, "join")

    def forward(self, lhs: SparseTensor, rhs: SparseTensor) -> SparseTensor:
        return ops.sparse_binary(lhs, rhs, op=self.op, join=self.join)


class SparseAdd(SparseBinary):
    """lhs + rhs on aligned rows; the default outer join keeps every row of both."""

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__(BinaryOp.add, join)


class SparseCat(torch.nn.Module):
    """Channel concatenation ``[lhs | rhs]`` (skip connections); missing side = zeros."""

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.join = as_enum(join, Join, "join")

    def forward(self, lhs: SparseTensor, rhs: SparseTensor) -> SparseTensor:
        return ops.sparse_cat(lhs, rhs, join=self.join)


class SparseReindex(torch.nn.Module):
    """Features moved onto a target's rows (zeros where absent)."""

    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        return ops.sparse_reindex(x, target)


class Sequential(torch.nn.Sequential):
    """``torch.nn.Sequential`` for single-input sparse layers (names: ``0.weight``, ...)."""

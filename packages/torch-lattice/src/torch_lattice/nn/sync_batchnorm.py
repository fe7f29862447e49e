"""``SyncBatchNorm``: batch statistics over every rank's rows in a distributed run.

Under DistributedDataParallel each process sees only its shard of the
global batch, and for sparse data the shards have different row counts (a
LiDAR sweep has 20k voxels, an indoor room 150k).  Averaging per-rank means
would weigh a 20k-row rank like a 150k-row one; here the ranks all-reduce
*sums and counts* instead, in two passes:

1. ``[sum_r x, n_r]`` -> the global count ``n`` and mean;
2. ``sum_r (x - mean)^2`` -> the global biased variance (two passes, not
   ``E[x^2] - mean^2``, so large means cannot cancel the variance away).

Statistics are accumulated in float32 (float64 for float64 features),
counts in float64.  Half (f16/bf16) features, as ``torch.autocast`` hands
them over, are read as they are: the normalisation is one pass with the f32
statistics, rounded once to the features' dtype, and autograd keeps only
the half input and the per-channel statistics -- the memory
``torch.nn.BatchNorm1d`` keeps under autocast.  Widening the rows to f32
first and normalising with autograd ops kept two f32 (N, C) tensors per
layer for the backward pass (the centred and the normalised rows: four
times the bf16 activation's bytes), which is what mixed precision is meant
to save.

The backward pass is batch norm's over the union of all ranks' rows: each
rank sums ``dy`` and ``dy * (x - mean)`` per channel, one all-reduce adds
the ranks' sums, and the input gradient is formed with the global count, so
the gradient of each rank's input includes the other ranks' losses exactly
as in one process over the whole batch.  The weight and bias gradients are
the rank's own share, as for every other parameter: DistributedDataParallel
adds the shares.

The running statistics are updated from the global mean and unbiased
variance, so they are identical on every rank, and evaluation is the plain
``BatchNorm`` -- an exported model holds one ``batch_norm`` op with those
statistics.  Outside a process group (or with one rank) the layer is exactly
``BatchNorm``.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from lattice_contract.frontend import nn_features
from torch.autograd.function import once_differentiable

from torch_lattice.nn.feature import BatchNorm

__all__ = ["SyncBatchNorm"]


class _SyncNormalise(torch.autograd.Function):
    """``(x - mean) * rsqrt(var + eps) * weight + bias`` with statistics over all ranks' rows.

    ``mean`` and ``var`` are the global statistics (float32, or float64 for
    float64 features), computed without autograd; this function carries
    their dependence on every rank's rows in its backward pass.  It saves the
    features as they are (half under autocast) and per-channel vectors only.
    Both passes run with autocast off: their arithmetic is in the statistics'
    dtype by construction and must not be re-cast.
    """

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        mean: torch.Tensor,
        var: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor,
        eps: float,
        count: float,
        group: Any,
    ) -> torch.Tensor:
        ctx.count, ctx.group = count, group
        ctx.save_for_backward(x, mean, torch.rsqrt(var + eps), weight)
        if x.shape[0] == 0:  # no rows here; the backward still joins the collective
            return torch.empty_like(x)
        # One pass over the rows: torch's inference batch norm reads half features
        # with the f32 statistics, computes in f32 and rounds once to x's dtype.
        with torch.autocast(x.device.type, enabled=False):
            return F.batch_norm(x, mean, var, weight, bias, False, 0.0, eps)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x, mean, invstd, weight = ctx.saved_tensors
        acc, c = mean.dtype, x.shape[1]
        with torch.autocast(x.device.type, enabled=False):
            # Per-rank sums in the statistics' dtype; the f32 rows are transient.
            sum_dy = dy.sum(dim=0, dtype=acc)
            centred = x - mean
            sum_dy_xmu = (centred * dy).sum(dim=0, dtype=acc)
            # This rank's share of the parameter gradients (DDP adds the shares).
            dweight, dbias = sum_dy_xmu * invstd, sum_dy
            total = torch.cat([sum_dy, sum_dy_xmu])
            dist.all_reduce(total, op=dist.ReduceOp.SUM, group=ctx.group)
            mean_dy = total[:c] / ctx.count
            proj = total[c:] * invstd.square() / ctx.count
            # dx = (dy - mean(dy) - (x - mean) * mean(dy * (x - mean)) / var) * w / std,
            # the means over every rank's rows, computed in place in the transient.
            dx = centred.mul_(proj).neg_().add_(dy).sub_(mean_dy).mul_(invstd * weight)
        return dx.to(x.dtype), None, None, dweight, dbias, None, None, None


class SyncBatchNorm(BatchNorm):
    """:class:`BatchNorm` whose training statistics span all ranks of ``process_group``.

    Every rank must call it the same number of times per step and run the
    backward pass through it (both hold collectives); a rank with no rows
    still takes part.  Reading the global row count costs one host
    synchronisation per layer in training.  Convert a model with
    :meth:`convert_sync_batchnorm` before wrapping it in
    ``DistributedDataParallel``.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = nn_features.BATCH_NORM_EPS,
        momentum: float | None = 0.1,
        process_group: Any = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(num_features, eps=eps, momentum=momentum, device=device, dtype=dtype)
        self.process_group = process_group

    def _world_size(self) -> int:
        if not (dist.is_available() and dist.is_initialized()):
            return 1
        return int(dist.get_world_size(self.process_group))

    def _synchronised(self, f: torch.Tensor) -> torch.Tensor:
        if f.ndim != 2 or f.shape[1] != self.num_features:
            raise ValueError(
                f"SyncBatchNorm({self.num_features}) needs features (N, {self.num_features}), "
                f"got {tuple(f.shape)}"
            )
        acc = torch.float64 if f.dtype == torch.float64 else torch.float32
        group = self.process_group
        with torch.no_grad():
            # Reductions that accumulate in f32 straight from half rows.
            local = torch.tensor([float(f.shape[0])], dtype=torch.float64, device=f.device)
            head = torch.cat([f.sum(dim=0, dtype=acc).to(torch.float64), local])
            dist.all_reduce(head, op=dist.ReduceOp.SUM, group=group)
            count = float(head[-1].item())
            if count < 2:
                raise ValueError(
                    "SyncBatchNorm in training mode needs at least 2 rows over all ranks to "
                    f"estimate variance, got {int(count)}"
                )
            mean = (head[:-1] / count).to(acc)
            squares = torch.sub(f, mean).square_().sum(dim=0).to(torch.float64)
            dist.all_reduce(squares, op=dist.ReduceOp.SUM, group=group)
            var = (squares / count).to(acc)
        # The parameters' casts are differentiable: f32 gradients reach f32 masters.
        y: torch.Tensor = _SyncNormalise.apply(  # type: ignore[no-untyped-call]
            f, mean, var, self.weight.to(acc), self.bias.to(acc), self.eps, count, group
        )
        m = self._count_batch()
        with torch.no_grad():
            # In the statistics' dtype, written back to the buffers' own (as BatchNorm).
            unbiased = var * (count / (count - 1.0))
            for buffer, stat in ((self.running_mean, mean), (self.running_var, unbiased)):
                buffer.copy_(buffer.to(acc) * (1.0 - m) + stat * m)
        return y

    def _features(self, f: torch.Tensor) -> torch.Tensor:
        # BatchNorm.forward applies this to dense features or a SparseTensor's.
        if not self.training or self._world_size() == 1:
            return super()._features(f)
        return self._synchronised(f)

    def _padded_features(self, f: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        if self._world_size() == 1:
            return super()._padded_features(f, live)
        raise ValueError(
            "SyncBatchNorm reads its global row count on the host, which a captured training "
            "step (one CUDA graph per step) cannot do; train this model eagerly, or use "
            "BatchNorm in the captured step"
        )

    @classmethod
    def convert_sync_batchnorm(
        cls, module: torch.nn.Module, process_group: Any = None
    ) -> torch.nn.Module:
        """``module`` with every BatchNorm replaced by its synchronised form (as in torch).

        ``torch_lattice.nn.BatchNorm`` layers become :class:`SyncBatchNorm`
        sharing the same parameter and buffer tensors (an optimizer built
        before the conversion still updates them) and settings; torch's own
        ``BatchNorm1d/2d/3d`` layers become ``torch.nn.SyncBatchNorm``.  The
        returned module is ``module`` itself unless ``module`` is a BatchNorm.
        """
        if isinstance(module, BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls.__new__(cls)
            # Copy the module's state (settings, training flag, hooks) with
            # fresh containers, so the two modules share tensors, not dicts.
            converted.__dict__.update(
                {k: copy.copy(v) if isinstance(v, dict) else v for k, v in vars(module).items()}
            )
            converted.process_group = process_group
            return converted
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            out: torch.nn.Module = torch.nn.SyncBatchNorm.convert_sync_batchnorm(  # type: ignore[no-untyped-call]
                module, process_group
            )
            return out
        for name, child in list(module.named_children()):
            replaced = cls.convert_sync_batchnorm(child, process_group)
            if replaced is not child:
                module.add_module(name, replaced)
        return module

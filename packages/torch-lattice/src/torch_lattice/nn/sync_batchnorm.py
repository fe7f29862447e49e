"""``SyncBatchNorm``: batch statistics over every rank's rows in a distributed run.

Under DistributedDataParallel each process sees only its shard of the
global batch, and for sparse data the shards have different row counts (a
LiDAR sweep has 20k voxels, an indoor room 150k).  Averaging per-rank means
would weigh a 20k-row rank like a 150k-row one; here the ranks all-reduce
*sums and counts* instead, in two passes:

1. ``[sum_r x, n_r]`` -> the global count ``n`` and mean;
2. ``sum_r (x - mean)^2`` -> the global biased variance (two passes, not
   ``E[x^2] - mean^2``, so large means cannot cancel the variance away).

Both reductions are differentiable all-reduces whose backward all-reduces
the incoming gradients, so the gradient of each
rank's input includes the other ranks' losses exactly as in one process
over the whole batch.  Statistics are accumulated in float32 (float64 for
float64 features), counts in float64.

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
from lattice_contract.frontend import nn_features

from torch_lattice.nn.feature import BatchNorm

__all__ = ["SyncBatchNorm"]


class _AllReduceSum(torch.autograd.Function):
    """Sum over the ranks of a group; the backward sums the ranks' gradients the same way.

    With ``y = sum_r x_r`` on every rank, the gradient of the total loss
    ``sum_r L_r`` with respect to ``x_r`` is ``sum_r dL_r/dy``: an all-reduce
    of the incoming gradients.
    """

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = grad.contiguous().clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=ctx.group)
        return out, None


def _all_reduce(tensor: torch.Tensor, group: Any) -> torch.Tensor:
    """Differentiable sum over the ranks of ``group`` (None: the default group)."""
    out: torch.Tensor = _AllReduceSum.apply(tensor, group)  # type: ignore[no-untyped-call]
    return out


class SyncBatchNorm(BatchNorm):
    """:class:`BatchNorm` whose training statistics span all ranks of ``process_group``.

    Every rank must call it the same number of times per step (as for any
    collective); a rank with no rows still takes part.  Reading the global
    row count costs one host synchronisation per layer in training.  Convert a model with
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
        dtype = torch.float64 if f.dtype == torch.float64 else torch.float32
        x = f.to(dtype)
        local = torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device)
        head = _all_reduce(torch.cat([x.sum(dim=0).to(torch.float64), local]), self.process_group)
        count = float(head[-1].item())
        if count < 2:
            raise ValueError(
                "SyncBatchNorm in training mode needs at least 2 rows over all ranks to "
                f"estimate variance, got {int(count)}"
            )
        mean = (head[:-1] / count).to(dtype)
        centred = x - mean
        squares = (centred * centred).sum(dim=0).to(torch.float64)
        var = (_all_reduce(squares, self.process_group) / count).to(dtype)
        y = centred * torch.rsqrt(var + self.eps) * self.weight.to(dtype) + self.bias.to(dtype)
        m = self._count_batch()
        with torch.no_grad():
            unbiased = var * (count / (count - 1.0))
            self.running_mean.mul_(1.0 - m).add_(mean.to(self.running_mean.dtype), alpha=m)
            self.running_var.mul_(1.0 - m).add_(unbiased.to(self.running_var.dtype), alpha=m)
        return y.to(f.dtype)

    def _features(self, f: torch.Tensor) -> torch.Tensor:
        # BatchNorm.forward applies this to dense features or a SparseTensor's.
        if not self.training or self._world_size() == 1:
            return super()._features(f)
        return self._synchronised(f)

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

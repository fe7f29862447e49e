"""Small helpers for training torch_lattice models under ``torch.distributed``.

torch_lattice has no engine of its own: a distributed run is PyTorch's
``DistributedDataParallel`` over a torch_lattice model, ``DistributedSampler``
over a dataset, :func:`torch_lattice.data.sparse_collate` in the
``DataLoader`` and :class:`torch_lattice.nn.SyncBatchNorm` for the statistics.
Two things are easy to get subtly wrong and live here:

* :func:`init_distributed` reads what ``torchrun`` exports (``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``), picks NCCL on CUDA and gloo otherwise,
  and degrades to a plain single process when launched without ``torchrun``;
* :func:`global_mean` scales a per-rank *sum* of losses so that DDP's
  gradient averaging yields the gradient of the mean over the *global*
  batch, although sparse shards hold different numbers of voxels.  Taking a
  per-rank mean instead weighs a rank of 5k voxels like one of 50k.

Kernel maps are cached on each ``SparseTensor``'s support, which lives in
the process that built it; nothing is shared between ranks and DDP's
gradient buckets see only ordinary parameters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["DistributedContext", "global_mean", "init_distributed"]


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands: ``rank`` of ``world_size``, its device and backend."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None
    """``"nccl"``/``"gloo"`` inside a process group, ``None`` for a plain single process."""

    @property
    def is_main(self) -> bool:
        """True on the rank that writes files and logs (rank 0)."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when a process group is initialised."""
        return self.backend is not None


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def init_distributed(backend: str | None = None, device: str | None = None) -> DistributedContext:
    """Join the process group ``torchrun`` describes, or run as one plain process.

    ``backend`` defaults to ``nccl`` when CUDA is available and ``gloo``
    otherwise; ``device`` defaults to ``cuda:<LOCAL_RANK>`` or ``cpu``.
    Without ``RANK``/``WORLD_SIZE`` in the environment no group is created
    and the context says ``distributed == False``.
    """
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    local = _env_int("LOCAL_RANK") or 0
    cuda = torch.cuda.is_available() and device != "cpu"
    chosen = torch.device(device) if device else torch.device(f"cuda:{local}" if cuda else "cpu")
    if chosen.type == "cuda":
        torch.cuda.set_device(chosen)
    if rank is None or world is None:
        return DistributedContext(0, 1, 0, chosen, None)
    name = backend or ("nccl" if chosen.type == "cuda" else "gloo")
    if not dist.is_initialized():
        dist.init_process_group(
            name, rank=rank, world_size=world, device_id=chosen if name == "nccl" else None
        )
    return DistributedContext(rank, world, local, chosen, name)


def global_mean(total: torch.Tensor, count: int | torch.Tensor) -> torch.Tensor:
    """The loss to backpropagate on each rank for a global mean of ``total / count``.

    ``total`` is this rank's summed loss (e.g. ``cross_entropy(...,
    reduction="sum")``) and ``count`` the number of terms in it.  The counts
    are all-reduced (without gradient) and the result is ``total *
    world_size / global_count``: DDP averages gradients over ranks, so their
    average is the gradient of ``sum_r total_r / global_count``, exactly what
    one process computes over the whole batch.  Without a process group it
    is ``total / count``.
    """
    n = torch.as_tensor(count, dtype=torch.float64, device=total.device).detach().clone()
    world = 1
    if dist.is_available() and dist.is_initialized():
        world = dist.get_world_size()
        dist.all_reduce(n, op=dist.ReduceOp.SUM)
    if float(n) <= 0:
        raise ValueError("global_mean: the global batch holds no terms (count is 0 on every rank)")
    return total * (world / float(n))

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

:class:`SparseDDP` is ``DistributedDataParallel`` for models that return
``SparseTensor`` values when ``find_unused_parameters=True`` is needed (some
parameters skip some steps).  Plain DDP looks for the output's tensors in
tensors, lists, tuples, dicts and dataclasses only, so it finds none in a
``SparseTensor``, marks every parameter unused and then fails in the
backward with "Expected to mark a variable ready only once".  SparseDDP
hands DDP each ``SparseTensor`` as a named tuple of its features (which DDP
finds, and routes through its unused-output handling) and the value it came
from, and rebuilds the ``SparseTensor`` around the features DDP returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from torch_lattice.sparse import SparseTensor

__all__ = ["DistributedContext", "SparseDDP", "global_mean", "init_distributed"]


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


class _SparseParts(NamedTuple):
    """What DDP sees of one ``SparseTensor`` output: its features, and the value itself."""

    feats: torch.Tensor
    value: SparseTensor


def _map_outputs(obj: Any, leaf: Callable[[Any], Any]) -> Any:
    """``obj`` with ``leaf`` applied to every item of its lists, tuples and dicts."""
    if isinstance(obj, SparseTensor | _SparseParts):
        return leaf(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a user's named tuple
        return type(obj)(*(_map_outputs(item, leaf) for item in obj))
    if isinstance(obj, list | tuple):
        return type(obj)(_map_outputs(item, leaf) for item in obj)
    if isinstance(obj, dict):
        return {key: _map_outputs(item, leaf) for key, item in obj.items()}
    return obj


def _to_parts(obj: Any) -> Any:
    return _SparseParts(obj.feats, obj) if isinstance(obj, SparseTensor) else obj


def _from_parts(obj: Any) -> Any:
    return obj.value.with_feats(obj.feats) if isinstance(obj, _SparseParts) else obj


class _PartsOut(torch.nn.Module):
    """The model inside DDP: its ``SparseTensor`` outputs become :class:`_SparseParts`."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return _map_outputs(self.model(*args, **kwargs), _to_parts)


class SparseDDP(torch.nn.Module):
    """``DistributedDataParallel`` over a model whose outputs are (or hold) ``SparseTensor``s.

    ``SparseDDP(model, **ddp_kwargs)`` takes DDP's own keyword arguments
    (``find_unused_parameters``, ``device_ids``, ``bucket_cap_mb``, ...) and
    returns what the model returns, ``SparseTensor`` values included (inside
    lists, tuples and dicts too).  ``.module`` is the wrapped model, as with
    DDP (save ``ddp.module.state_dict()`` on rank 0); ``.ddp`` is the
    ``DistributedDataParallel`` instance, and other attributes (``join``,
    ``register_comm_hook``, ...) are DDP's.  With ``find_unused_parameters``
    at its default ``False``, plain DDP works as well; this wrapper is what
    makes ``True`` work.
    """

    def __init__(self, model: torch.nn.Module, **ddp_kwargs: Any) -> None:
        super().__init__()
        self.ddp = DistributedDataParallel(_PartsOut(model), **ddp_kwargs)

    @property
    def module(self) -> torch.nn.Module:
        """The model being trained (its state dict has the model's own keys)."""
        inner: _PartsOut = self.ddp.module
        return inner.model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return _map_outputs(self.ddp(*args, **kwargs), _from_parts)

    def no_sync(self) -> AbstractContextManager[None]:
        """DDP's ``no_sync``: accumulate gradients locally for the steps inside it."""
        context: AbstractContextManager[None] = self.ddp.no_sync()
        return context

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "ddp":
                raise
            return getattr(self.ddp, name)

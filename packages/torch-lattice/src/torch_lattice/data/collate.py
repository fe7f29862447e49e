"""``sparse_collate``: the ``collate_fn`` that turns dataset samples into one sparse batch.

PyTorch's default collate stacks equal-shaped tensors; it cannot batch a
:class:`~torch_lattice.SparseTensor` (rows differ per sample and the batch
index lives in a coordinate column) and it would refuse per-point arrays of
different lengths.  ``sparse_collate`` takes the TorchSparse-style sample, a
dict such as ``{"input": SparseTensor, "labels": (M,), "inverse": (P,)}``,
and per key:

* SparseTensors are concatenated with the batch column set to the sample's
  position in the batch;
* tensors with at least one dimension (labels, points, per-point features)
  are concatenated along dim 0;
* inverse maps (named in ``inverse_maps``) are concatenated *and* shifted by
  the row offset of the SparseTensor they index, so ``logits.feats[batch["inverse"]]``
  maps every voxel prediction back to every point of every sample;
* numbers and 0-d tensors are stacked; anything else is kept as a list.

The result, a :class:`SparseBatch`, remembers where each sample's rows
start (``offsets``), so predictions split back per sample.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from torch_lattice.sparse import SparseTensor, Support

__all__ = ["DEFAULT_INVERSE_MAPS", "SparseBatch", "make_sparse_collate", "sparse_collate"]

DEFAULT_INVERSE_MAPS: Mapping[str, str] = {"inverse": "input"}
"""Inverse maps ``sparse_collate`` shifts by default: ``inverse`` indexes ``input``'s rows."""


class SparseBatch(Mapping[str, Any]):
    """A collated batch: ``batch["input"]`` and friends, plus per-sample row offsets.

    ``offsets[key]`` is int64 ``(batch_size + 1,)``: sample ``i``'s rows of
    ``batch[key]`` are ``offsets[key][i]:offsets[key][i + 1]`` (only for
    concatenated keys).  It is a read-only mapping over the collated values.
    """

    __slots__ = ("_values", "batch_size", "offsets")

    def __init__(
        self, values: dict[str, Any], offsets: dict[str, torch.Tensor], batch_size: int
    ) -> None:
        self._values = values
        self.offsets = offsets
        self.batch_size = batch_size

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        keys = ", ".join(self._values)
        return f"SparseBatch(batch_size={self.batch_size}, keys=[{keys}])"

    def split(self, tensor: torch.Tensor, like: str) -> list[torch.Tensor]:
        """Split ``tensor`` (rows aligned with ``batch[like]``) into one tensor per sample.

        ``batch.split(logits.feats, "input")`` gives per-sample voxel logits;
        ``batch.split(logits.feats[batch["inverse"]], "inverse")`` per-sample
        point logits in each sample's original point order.
        """
        if like not in self.offsets:
            raise KeyError(
                f"{like!r} has no row offsets; concatenated keys are {sorted(self.offsets)}"
            )
        bounds = self.offsets[like]
        if tensor.shape[0] != int(bounds[-1]):
            raise ValueError(
                f"tensor has {tensor.shape[0]} rows but batch[{like!r}] has {int(bounds[-1])}"
            )
        sizes = (bounds[1:] - bounds[:-1]).tolist()
        return list(torch.split(tensor, sizes, dim=0))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> SparseBatch:
        """A copy with every tensor and SparseTensor on ``device`` (offsets stay on the CPU)."""

        def move(value: Any) -> Any:
            if isinstance(value, SparseTensor):
                return value.to(device)
            if isinstance(value, torch.Tensor):
                return value.to(device, non_blocking=non_blocking)
            return value

        return SparseBatch(
            {k: move(v) for k, v in self._values.items()}, dict(self.offsets), self.batch_size
        )

    def pin_memory(self) -> SparseBatch:
        """Page-locked copies of the dense tensors (``DataLoader(pin_memory=True)`` calls this)."""

        def pin(value: Any) -> Any:
            if isinstance(value, SparseTensor):
                support = Support(value.coords.pin_memory(), value.stride)
                return SparseTensor._make(support, value.feats.pin_memory())
            if isinstance(value, torch.Tensor):
                return value.pin_memory()
            return value

        return SparseBatch(
            {k: pin(v) for k, v in self._values.items()}, dict(self.offsets), self.batch_size
        )


def _offsets(sizes: Sequence[int]) -> torch.Tensor:
    out = torch.zeros(len(sizes) + 1, dtype=torch.int64)
    out[1:] = torch.cumsum(torch.tensor(list(sizes), dtype=torch.int64), dim=0)
    return out


def _collate_sparse(key: str, items: Sequence[SparseTensor]) -> SparseTensor:
    first = items[0]
    for i, item in enumerate(items):
        if item.stride != first.stride:
            raise ValueError(
                f"sample {i}'s {key!r} has stride {item.stride}, sample 0's {first.stride}; "
                "one batch needs one stride"
            )
        if item.num_channels != first.num_channels or item.dtype != first.dtype:
            raise ValueError(
                f"sample {i}'s {key!r} has {item.num_channels} {item.dtype} channels, sample "
                f"0's {first.num_channels} {first.dtype}"
            )
        if item.device != first.device:
            raise ValueError(
                f"sample {i}'s {key!r} is on {item.device}, sample 0's on {first.device}"
            )
        if item.num_rows and bool((item.coords[:, 0] != 0).any()):
            raise ValueError(
                f"sample {i}'s {key!r} already uses batch index "
                f"{int(item.coords[:, 0].max())}; a dataset sample is one item with batch "
                "index 0 (sparse_collate writes the batch column)"
            )
    sizes = [item.num_rows for item in items]
    coords = torch.cat([item.coords for item in items])
    batch = torch.repeat_interleave(
        torch.arange(len(items), dtype=torch.int32, device=coords.device),
        torch.tensor(sizes, device=coords.device),
    )
    coords[:, 0] = batch
    feats = torch.cat([item.feats for item in items])
    # Each sample was validated on construction; distinct batch indices keep
    # the concatenation free of duplicates.
    return SparseTensor.trusted(coords, feats, first.stride)


def _collate_tensors(key: str, items: Sequence[torch.Tensor]) -> torch.Tensor:
    first = items[0]
    for i, item in enumerate(items):
        if item.ndim != first.ndim or item.shape[1:] != first.shape[1:]:
            raise ValueError(
                f"sample {i}'s {key!r} has shape {tuple(item.shape)}, sample 0's "
                f"{tuple(first.shape)}; only the first (row) dimension may differ"
            )
        if item.dtype != first.dtype:
            raise ValueError(f"sample {i}'s {key!r} is {item.dtype}, sample 0's {first.dtype}")
    return torch.cat(list(items))


def sparse_collate(
    samples: Sequence[Mapping[str, Any]],
    inverse_maps: Mapping[str, str] = DEFAULT_INVERSE_MAPS,
) -> SparseBatch:
    """Collate dataset samples (dicts with the same keys) into a :class:`SparseBatch`.

    Use it as ``DataLoader(dataset, batch_size=B, collate_fn=sparse_collate)``.
    ``inverse_maps`` maps an inverse-map key to the SparseTensor key whose
    rows it indexes (default ``{"inverse": "input"}``; keys absent from the
    samples are ignored); bind another mapping with :func:`make_sparse_collate`.
    """
    if isinstance(samples, Mapping) or not isinstance(samples, Sequence) or not samples:
        raise TypeError("sparse_collate takes a non-empty list of samples (dicts)")
    keys = list(samples[0]) if isinstance(samples[0], Mapping) else None
    for i, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            raise TypeError(
                f"sample {i} is a {type(sample).__name__}; return a dict such as "
                "{'input': SparseTensor, 'labels': tensor} from the Dataset's __getitem__"
            )
        if keys is not None and sorted(sample) != sorted(keys):
            raise ValueError(f"sample {i} has keys {sorted(sample)}, sample 0 {sorted(keys)}")
    assert keys is not None
    values: dict[str, Any] = {}
    offsets: dict[str, torch.Tensor] = {}
    for key in keys:
        items = [sample[key] for sample in samples]
        if all(isinstance(v, SparseTensor) for v in items):
            values[key] = _collate_sparse(key, items)
            offsets[key] = _offsets([v.num_rows for v in items])
        elif all(isinstance(v, torch.Tensor) and v.ndim >= 1 for v in items):
            values[key] = _collate_tensors(key, items)
            offsets[key] = _offsets([int(v.shape[0]) for v in items])
        elif all(
            (isinstance(v, torch.Tensor) and v.ndim == 0)
            or (isinstance(v, (int, float)) and not isinstance(v, bool))
            for v in items
        ):
            values[key] = torch.stack([torch.as_tensor(v) for v in items])
        elif any(isinstance(v, (SparseTensor, torch.Tensor)) for v in items):
            raise TypeError(
                f"key {key!r} mixes SparseTensors, tensors and other values across samples"
            )
        else:
            values[key] = list(items)
    for inv_key, target in inverse_maps.items():
        if inv_key not in values:
            continue
        if target not in values or not isinstance(values[target], SparseTensor):
            raise KeyError(
                f"inverse map {inv_key!r} indexes the rows of {target!r}, which is not a "
                "SparseTensor of the samples; pass inverse_maps={...} to name it"
            )
        inv = values[inv_key]
        if not isinstance(inv, torch.Tensor) or inv.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"inverse map {inv_key!r} must be an integer tensor per sample")
        if inv.ndim != 1:
            raise ValueError(f"inverse map {inv_key!r} must be (P,) per sample")
        rows = offsets[target]
        points = offsets[inv_key][1:] - offsets[inv_key][:-1]
        shift = torch.repeat_interleave(rows[:-1], points).to(inv.device)
        limit = torch.repeat_interleave(rows[1:] - rows[:-1], points).to(inv.device)
        local = inv.to(torch.int64)
        if local.numel() and bool(((local < 0) | (local >= limit)).any()):
            raise ValueError(f"inverse map {inv_key!r} points outside its sample's {target!r} rows")
        values[inv_key] = local + shift
    return SparseBatch(values, offsets, len(samples))


def make_sparse_collate(
    inverse_maps: Mapping[str, str] = DEFAULT_INVERSE_MAPS,
) -> Callable[[Sequence[Mapping[str, Any]]], SparseBatch]:
    """``sparse_collate`` with other inverse-map keys bound (picklable for worker processes)."""
    return functools.partial(sparse_collate, inverse_maps=dict(inverse_maps))

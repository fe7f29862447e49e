"""Points to unique voxels, with the maps that carry labels and predictions between them.

``sparse_quantize`` is the data-pipeline half of voxelisation (TorchSparse's
habit): a dataset turns each point cloud into unique voxel coordinates once,
on the CPU, and keeps two maps --

* ``indices`` (one per voxel): a point that lies in that voxel (the first one,
  in point order), so per-voxel inputs can be picked from per-point arrays;
* ``inverse`` (one per point): the voxel it lies in, so per-voxel predictions
  map back to every original point with ``voxel_logits[inverse]``.

``vote_labels`` turns per-point labels into per-voxel ones by majority vote
through ``inverse`` (the usual way to label voxels of a LiDAR sweep), and
``voxel_features`` averages per-point features into their voxels.
Everything is vectorised torch; nothing here loops over points or voxels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, overload

import torch

__all__ = ["Quantized", "sparse_quantize", "vote_labels", "voxel_features"]

_INT32_MAX = 2**31 - 1
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class Quantized(NamedTuple):
    """What :func:`sparse_quantize` returns (unpack it as ``coords, indices, inverse``).

    ``coords``: int32 ``(M, 3)`` unique voxel coordinates, sorted by x, then
    y, then z.  ``indices``: int64 ``(M,)``, the first point (in input order)
    of each voxel.  ``inverse``: int64 ``(P,)``, the voxel row of each point.
    ``coords[inverse]`` is every point's voxel and ``coords == voxel(points[indices])``.
    """

    coords: torch.Tensor
    indices: torch.Tensor
    inverse: torch.Tensor


def _voxel_size(voxel_size: float | Sequence[float]) -> tuple[float, float, float]:
    if isinstance(voxel_size, (int, float)) and not isinstance(voxel_size, bool):
        size = (float(voxel_size),) * 3
    elif isinstance(voxel_size, Sequence) and len(voxel_size) == 3:
        size = tuple(float(v) for v in voxel_size)  # type: ignore[assignment]
    else:
        raise TypeError(
            f"voxel_size must be a positive number or three of them, got {voxel_size!r}"
        )
    if not all(v > 0 and v < float("inf") for v in size):
        raise ValueError(f"voxel_size must be positive and finite on every axis, got {size}")
    return size


def _points(points: Any) -> torch.Tensor:
    if isinstance(points, torch.Tensor):
        tensor = points
    else:
        try:
            tensor = torch.as_tensor(points)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"points must be a tensor or array of shape (P, 3), got {type(points).__name__}"
            ) from err
    if tensor.ndim != 2 or tensor.shape[1] != 3:
        raise ValueError(
            f"points must have shape (P, 3) (x, y, z per row), got {tuple(tensor.shape)}; "
            "pass points[:, :3] if your rows carry more columns"
        )
    if tensor.is_floating_point():
        if tensor.dtype not in (torch.float32, torch.float64):
            tensor = tensor.to(torch.float32)
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError("points hold NaN or infinite values; drop those rows first")
    elif tensor.dtype in (torch.bool, torch.complex64, torch.complex128):
        raise TypeError(f"points must be real numbers, got {tensor.dtype}")
    return tensor


@overload
def sparse_quantize(
    points: Any,
    voxel_size: float | Sequence[float] = 1.0,
    *,
    origin: Sequence[float] | None = None,
) -> Quantized: ...


@overload
def sparse_quantize(
    points: Any,
    voxel_size: float | Sequence[float] = 1.0,
    *,
    origin: Sequence[float] | None = None,
    return_index: bool,
    return_inverse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, ...]: ...


@overload
def sparse_quantize(
    points: Any,
    voxel_size: float | Sequence[float] = 1.0,
    *,
    origin: Sequence[float] | None = None,
    return_inverse: bool,
) -> torch.Tensor | tuple[torch.Tensor, ...]: ...


def sparse_quantize(
    points: Any,
    voxel_size: float | Sequence[float] = 1.0,
    *,
    origin: Sequence[float] | None = None,
    return_index: bool | None = None,
    return_inverse: bool | None = None,
) -> Quantized | torch.Tensor | tuple[torch.Tensor, ...]:
    """Unique voxels of ``points`` with the index and inverse maps.

    With TorchSparse's keywords ``return_index`` / ``return_inverse`` it
    returns what TorchSparse's ``sparse_quantize`` does: the voxel coordinates
    alone, or a tuple of them followed by the indices and/or the inverse map,
    in that order (the same sorted voxels as TorchSparse's).  Without them it
    returns the :class:`Quantized` triple.

    A point ``p`` lies in voxel ``floor((p - origin) / voxel_size)`` per axis
    (``origin`` defaults to 0), computed in the points' float dtype by a
    true division -- for float32 points exactly the voxel
    ``torch_lattice.ops.voxelize`` picks.  Integer points with voxel size 1
    are already voxels; duplicates are merged.  ``points`` may be any
    tensor-like ``(P, 3)`` array (a NumPy array works); the maps are on the
    points' device.

    Raises ``ValueError`` on a wrong shape, non-finite points, a non-positive
    voxel size, or voxels outside the int32 coordinate range.
    """
    full = _quantize(points, voxel_size, origin)
    if return_index is None and return_inverse is None:
        return full
    picked = [full.coords]
    if return_index:
        picked.append(full.indices)
    if return_inverse:
        picked.append(full.inverse)
    return picked[0] if len(picked) == 1 else tuple(picked)


def _quantize(
    points: Any, voxel_size: float | Sequence[float], origin: Sequence[float] | None
) -> Quantized:
    pts = _points(points)
    size = _voxel_size(voxel_size)
    device = pts.device
    if pts.is_floating_point() or size != (1.0, 1.0, 1.0) or origin is not None:
        dtype = pts.dtype if pts.is_floating_point() else torch.float64
        u = pts.to(dtype)
        if origin is not None:
            if len(origin) != 3:
                raise ValueError(f"origin must be three numbers (x, y, z), got {origin!r}")
            u = u - torch.tensor([float(o) for o in origin], dtype=dtype, device=device)
        u = torch.floor(u / torch.tensor(size, dtype=dtype, device=device))
        if u.numel() and float(u.abs().max()) > _INT32_MAX:
            raise ValueError(
                "voxel coordinates exceed the int32 range; use a larger voxel_size or an "
                "origin near the points"
            )
        vox = u.to(torch.int64)
    else:
        vox = pts.to(torch.int64)
        if vox.numel() and int(vox.abs().max()) > _INT32_MAX:
            raise ValueError("integer points exceed the int32 coordinate range")
    if vox.shape[0] == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=device)
        return Quantized(torch.zeros((0, 3), dtype=torch.int32, device=device), empty, empty)
    unique, inverse = torch.unique(vox, dim=0, return_inverse=True)
    order = torch.arange(vox.shape[0], dtype=torch.int64, device=device)
    index = torch.full((unique.shape[0],), vox.shape[0], dtype=torch.int64, device=device)
    index = index.scatter_reduce(0, inverse, order, reduce="amin", include_self=True)
    return Quantized(unique.to(torch.int32), index, inverse)


def _inverse(inverse: Any, num_voxels: int | None) -> tuple[torch.Tensor, int]:
    if not isinstance(inverse, torch.Tensor) or inverse.dtype not in (torch.int32, torch.int64):
        raise TypeError("inverse must be an int64 (or int32) tensor from sparse_quantize")
    if inverse.ndim != 1:
        raise ValueError(f"inverse must have shape (P,), got {tuple(inverse.shape)}")
    inv = inverse.to(torch.int64)
    top = int(inv.max()) + 1 if inv.numel() else 0
    if inv.numel() and int(inv.min()) < 0:
        raise ValueError("inverse holds negative voxel rows")
    if num_voxels is None:
        return inv, top
    if top > num_voxels:
        raise ValueError(f"inverse points at voxel row {top - 1} but num_voxels is {num_voxels}")
    return inv, num_voxels


def vote_labels(
    labels: torch.Tensor,
    inverse: torch.Tensor,
    num_voxels: int | None = None,
    *,
    ignore_index: int = -1,
) -> torch.Tensor:
    """Per-voxel labels: the most frequent point label in each voxel.

    ``labels`` is integer ``(P,)``; points labelled ``ignore_index`` do not
    vote, and a voxel with no voting point gets ``ignore_index``.  Ties go to
    the smallest label.  ``num_voxels`` defaults to ``inverse.max() + 1``.
    Returns int64 ``(M,)``.
    """
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.ndim != 1:
        raise TypeError("labels must be an integer tensor of shape (P,)")
    inv, m = _inverse(inverse, num_voxels)
    if labels.shape[0] != inv.shape[0]:
        raise ValueError(
            f"labels has {labels.shape[0]} points but inverse has {inv.shape[0]}; "
            "both must come from the same point cloud"
        )
    lab = labels.to(torch.int64)
    keep = lab != ignore_index
    if bool((lab[keep] < 0).any()):
        raise ValueError(f"labels must be >= 0 apart from ignore_index={ignore_index}")
    out = torch.full((m,), ignore_index, dtype=torch.int64, device=lab.device)
    if not bool(keep.any()):
        return out
    lab, inv = lab[keep], inv[keep]
    # Count each (voxel, label) pair once, in O(points) memory whatever the
    # label range (raw SemanticKITTI ids reach 259).  Labels are first ranked
    # among the distinct labels present, so the pair key voxel * classes + rank
    # stays below points**2 and never overflows int64, however large the ids;
    # ranks keep the labels' order, so ties still go to the smallest label.
    present, rank = torch.unique(lab, return_inverse=True)
    classes = int(present.numel())
    pairs, counts = torch.unique(inv * classes + rank, return_counts=True)
    voxel, label = pairs // classes, present[pairs % classes]
    most = torch.zeros(m, dtype=torch.int64, device=lab.device)
    most = most.scatter_reduce(0, voxel, counts, reduce="amax", include_self=True)
    winner = counts == most[voxel]
    out = out.scatter_reduce(0, voxel[winner], label[winner], reduce="amin", include_self=False)
    return out


def voxel_features(
    features: torch.Tensor, inverse: torch.Tensor, num_voxels: int | None = None
) -> torch.Tensor:
    """Mean of the point features ``(P, C)`` that fall in each voxel, in float32 or wider.

    Returns ``(M, C)`` in the features' dtype (accumulated in float32 for
    half types).  A voxel no point reaches (only possible with an explicit
    ``num_voxels``) reads zeros.
    """
    if not isinstance(features, torch.Tensor) or features.dtype not in _FLOATS:
        raise TypeError("features must be a floating-point tensor of shape (P, C)")
    if features.ndim != 2:
        raise ValueError(f"features must have shape (P, C), got {tuple(features.shape)}")
    inv, m = _inverse(inverse, num_voxels)
    if features.shape[0] != inv.shape[0]:
        raise ValueError(
            f"features has {features.shape[0]} rows but inverse has {inv.shape[0]} points"
        )
    acc = torch.float64 if features.dtype == torch.float64 else torch.float32
    sums = torch.zeros((m, features.shape[1]), dtype=acc, device=features.device)
    sums.index_add_(0, inv, features.to(acc))
    counts = torch.bincount(inv, minlength=m).clamp_min(1).to(acc)
    return (sums / counts[:, None]).to(features.dtype)

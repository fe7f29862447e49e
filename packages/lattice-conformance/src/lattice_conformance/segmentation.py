"""The example segmentation task: primitive labels on procedural surface scenes.

A scene (from :mod:`lattice_conformance.scenes`) is a room of planes, spheres, a
cylinder and boxes, voxelised; every voxel is labelled by the primitive that
produced it.  Two reference networks from ``torch_lattice.models`` learn to
label voxels (MinkUNet, sparse input) and points (SPVCNN, point input).  This
module holds what the training script, the fixture generator, the demo and
the tests share: scene construction, input features, model configurations,
the shipped files and the mIoU metric.  numpy only at import; torch is
imported inside the functions that need it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from lattice_conformance import scenes

DATA_DIR: Final = Path(__file__).resolve().parent / "data"
"""Shipped trained weights, their configs and fixture archives."""

MODELS: Final = ("minkunet", "spvcnn")
VARIANTS: Final = ("f16", "int8")

CLASS_NAMES: Final = ("plane", "sphere", "cylinder", "box")
NUM_CLASSES: Final = len(CLASS_NAMES)
IN_CHANNELS: Final = 4
"""Per-voxel / per-point input features: 1 (occupancy) and the position scaled to [0, 1]."""

DEFAULT_CONFIGS: Final[dict[str, dict[str, Any]]] = {
    "minkunet": {"channels": [32, 32, 64]},
    "spvcnn": {"channels": [32, 64], "voxel_size": 1.0},
}
"""Architecture of each shipped model (widths divisible by 32 so int8 packing applies)."""

TOLERANCES: Final[dict[str, tuple[float, float]]] = {
    "f16": (2e-2, 1e-2),
    "int8": (2e-2, 1e-2),
    "f32": (1e-4, 1e-4),
}
"""(atol, rtol) of the shipped fixtures per variant.

f16 logits of magnitude ~10 have an ulp of ~0.008; a different reduction
order on another device may move a logit by a few ulps, so two ulps of
absolute slack plus 1 % relative is tight enough to catch a wrong kernel tap,
weight layout or quantization and loose enough for legitimate reordering.
On CPU the two runtimes agree far more closely (see the demo report).
"""

Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Scene:
    """One labelled scene: voxels (batch column included) and one point per voxel."""

    coords: Array  # int32 (N, 4): batch, x, y, z
    labels: Array  # int32 (N,)
    features: Array  # float32 (N, IN_CHANNELS)
    points: Array  # float32 (P, 3), voxel units
    point_batch: Array  # int32 (P,)
    point_features: Array  # float32 (P, IN_CHANNELS)
    point_labels: Array  # int32 (P,)


def position_features(positions: Array, batch: Array) -> Array:
    """``[1, p / extent]`` per row, the extent taken per batch item (vectorised)."""
    pos = np.asarray(positions, dtype=np.float64)
    b = np.asarray(batch, dtype=np.int64)
    count = int(b.max()) + 1 if b.size else 0
    low = np.full((count, 3), np.inf)
    high = np.full((count, 3), -np.inf)
    np.minimum.at(low, b, pos)
    np.maximum.at(high, b, pos)
    extent = np.maximum((high - low).max(axis=1), 1.0)
    scaled = (pos - low[b]) / extent[b, None]
    return np.concatenate([np.ones((len(pos), 1)), scaled], axis=1).astype(np.float32)


def make_scene(seed: int, n_voxels: int = 6000, grid: int = 128, batch: int = 0) -> Scene:
    """A deterministic labelled scene; points are jittered inside their voxels."""
    coords3, labels = scenes.make_scene(n_voxels, grid=grid, seed=seed)
    coords = scenes.batched(coords3, batch)
    rng = np.random.default_rng(seed + 7919)
    points = (coords3 + rng.random(coords3.shape)).astype(np.float32)
    point_batch = np.full(len(points), batch, dtype=np.int32)
    return Scene(
        coords=coords.astype(np.int32),
        labels=labels.astype(np.int32),
        features=position_features(coords3, coords[:, 0]),
        points=points,
        point_batch=point_batch,
        point_features=position_features(points, point_batch),
        point_labels=labels.astype(np.int32),
    )


def merge_scenes(scenes: list[Scene]) -> Scene:
    """Several scenes as one batch (batch index = position in the list)."""

    def cat(name: str) -> Array:
        return np.concatenate([getattr(s, name) for s in scenes])

    coords = cat("coords")
    coords[:, 0] = np.repeat(np.arange(len(scenes)), [len(s.coords) for s in scenes])
    point_batch = np.repeat(np.arange(len(scenes), dtype=np.int32), [len(s.points) for s in scenes])
    return Scene(
        coords=coords,
        labels=cat("labels"),
        features=cat("features"),
        points=cat("points"),
        point_batch=point_batch,
        point_features=cat("point_features"),
        point_labels=cat("point_labels"),
    )


def scene_from_points(points: Array) -> Scene:
    """An unlabelled scene from a user point cloud (labels are -1).

    Points are scaled so the cloud spans about 50 voxels, the size the shipped
    models were trained at, then voxelised (first point per voxel).
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] < 3 or len(pts) == 0:
        raise ValueError(f"a point cloud must be (P, 3) with P > 0, got shape {pts.shape}")
    pts = pts[:, :3]
    if not np.all(np.isfinite(pts)):
        raise ValueError("the point cloud holds NaN or infinite coordinates")
    low = pts.min(axis=0)
    extent = max(float((pts.max(axis=0) - low).max()), 1e-9)
    scaled = ((pts - low) / extent * 50.0).astype(np.float32)
    vox = np.floor(scaled).astype(np.int32)
    _, first = np.unique(vox, axis=0, return_index=True)
    coords3 = vox[np.sort(first)]
    coords = np.concatenate([np.zeros((len(coords3), 1), np.int32), coords3], axis=1)
    point_batch = np.zeros(len(scaled), dtype=np.int32)
    return Scene(
        coords=coords,
        labels=np.full(len(coords), -1, np.int32),
        features=position_features(coords3, coords[:, 0]),
        points=scaled,
        point_batch=point_batch,
        point_features=position_features(scaled, point_batch),
        point_labels=np.full(len(scaled), -1, np.int32),
    )


def load_point_cloud(path: str | os.PathLike[str]) -> Array:
    """Read ``(P, 3)`` float points from a .ply (x, y, z vertex properties) or .npy file."""
    source = Path(path)
    suffix = source.suffix.lower()
    if suffix == ".npy":  # the project's one .npy reader: regular files, bounded shapes
        from torch_lattice.data import read_npy

        array = read_npy(source).numpy()
    elif suffix == ".ply":
        from lattice_conformance.ply import read_ply

        array = read_ply(source)
    else:
        raise ValueError(f"{source}: point clouds must be .ply or .npy, got {suffix!r}")
    array = np.asarray(array, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] < 3:
        raise ValueError(f"{source}: expected (P, 3) points, got shape {array.shape}")
    return array[:, :3]


# ---------------------------------------------------------------------------
# Metrics.


def confusion(pred: Array, labels: Array, num_classes: int = NUM_CLASSES) -> Array:
    """Confusion matrix ``[true, predicted]`` over rows with a label >= 0."""
    p = np.asarray(pred, dtype=np.int64).reshape(-1)
    t = np.asarray(labels, dtype=np.int64).reshape(-1)
    keep = t >= 0
    flat = t[keep] * num_classes + p[keep]
    return np.bincount(flat, minlength=num_classes * num_classes).reshape(num_classes, -1)


def iou_per_class(pred: Array, labels: Array, num_classes: int = NUM_CLASSES) -> Array:
    """IoU of each class (NaN for a class absent from both prediction and truth)."""
    cm = confusion(pred, labels, num_classes).astype(np.float64)
    tp = np.diag(cm)
    union = cm.sum(axis=0) + cm.sum(axis=1) - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, tp / union, np.nan)


def mean_iou(pred: Array, labels: Array, num_classes: int = NUM_CLASSES) -> float:
    """Mean IoU over the classes present in prediction or truth."""
    iou = iou_per_class(pred, labels, num_classes)
    return float(np.nanmean(iou)) if np.any(np.isfinite(iou)) else float("nan")


# ---------------------------------------------------------------------------
# Models and shipped files.


def weights_path(name: str) -> Path:
    return DATA_DIR / f"{name}.safetensors"


def config_path(name: str) -> Path:
    return DATA_DIR / f"{name}.json"


def fixture_path(name: str, variant: str) -> Path:
    return DATA_DIR / f"{name}-{variant}.tar.gz"


def build_model(name: str, config: dict[str, Any] | None = None) -> Any:
    """A fresh (untrained) reference network of the shipped architecture."""
    from torch_lattice.models import SPVCNN, MinkUNet

    cfg = dict(DEFAULT_CONFIGS[name], **(config or {}))
    if name == "minkunet":
        return MinkUNet(IN_CHANNELS, NUM_CLASSES, tuple(cfg["channels"]))
    if name == "spvcnn":
        return SPVCNN(IN_CHANNELS, NUM_CLASSES, float(cfg["voxel_size"]), tuple(cfg["channels"]))
    raise ValueError(f"unknown model {name!r}; choose one of {MODELS}")


def load_trained_model(name: str) -> Any:
    """The shipped trained model (float32, eval mode)."""
    from safetensors.torch import load_file

    if not weights_path(name).is_file():
        raise FileNotFoundError(
            f"{weights_path(name)} is missing; train it with examples/train_segmentation.py"
        )
    config = json.loads(config_path(name).read_text())
    model = build_model(name, config.get("architecture"))
    model.load_state_dict(load_file(str(weights_path(name))))
    return model.eval()


def model_inputs(name: str, scene: Scene, dtype: Any = None) -> tuple[Any, ...]:
    """The torch inputs of model ``name`` for ``scene`` (features cast to ``dtype``)."""
    import torch
    from torch_lattice import SparseTensor

    dtype = dtype or torch.float32
    if name == "minkunet":
        feats = torch.from_numpy(scene.features).to(dtype)
        return (SparseTensor(torch.from_numpy(scene.coords), feats),)
    if name == "spvcnn":
        return (
            torch.from_numpy(scene.points),
            torch.from_numpy(scene.point_features).to(dtype),
            torch.from_numpy(scene.point_batch),
            torch.tensor([len(scene.points)], dtype=torch.int32),
        )
    raise ValueError(f"unknown model {name!r}; choose one of {MODELS}")


def scene_labels(name: str, scene: Scene) -> Array:
    """Ground truth in the row order of the model's output (voxels or points)."""
    return scene.labels if name == "minkunet" else scene.point_labels


def align_rows(reference: Array, coords: Array) -> Array:
    """Index ``idx`` with ``coords[idx] == reference`` row for row (same support required).

    Runtimes may return rows in any order; predictions are mapped back onto
    the input voxels through the canonical order of both sides.
    """
    from lattice_conformance.metrics import canonical_order

    ref_order = canonical_order(reference)
    got_order = canonical_order(coords)
    if len(ref_order) != len(got_order) or not np.array_equal(
        reference[ref_order], coords[got_order]
    ):
        raise ValueError("the output rows are not the input rows; cannot align predictions")
    idx = np.empty(len(ref_order), dtype=np.int64)
    idx[ref_order] = got_order
    return idx


FIXTURE_CASES: Final = (
    ("scene-1001", (1001,), 6000),
    ("scene-1002", (1002,), 6000),
    ("small-1003", (1003,), 2500),
    ("batch2-1004-1005", (1004, 1005), 3000),
)
"""Cases of the shipped fixture archives: (name, scene seeds, voxels per scene)."""


def fixture_scenes() -> list[tuple[str, Scene]]:
    """The scenes the shipped fixtures are made of (unseen in training)."""
    return [
        (name, merge_scenes([make_scene(s, n_voxels=size) for s in seeds]))
        for name, seeds, size in FIXTURE_CASES
    ]


def write_model_fixtures(
    name: str, model: Any, out_dir: str | os.PathLike[str], variants: tuple[str, ...] = VARIANTS
) -> list[Path]:
    """Write ``<name>-<variant>.tar.gz`` fixture archives for a trained float32 model.

    ``f16``: the model and its features in float16.  ``int8``: the same with
    every conv and linear weight whose input channels divide into groups of
    32 packed to int8 (affine, f16 scales).  Expected outputs come from the
    torch runtime executing the exported artifact.
    """
    import copy

    import torch

    from lattice_conformance.torch_fixtures import write_torch_fixture_archive

    scenes = fixture_scenes()
    written = []
    for variant in variants:
        dtype = torch.float32 if variant == "f32" else torch.float16
        variant_model = copy.deepcopy(model).to(dtype).eval()
        quantize = {"bits": 8, "group_size": 32} if variant == "int8" else None
        atol, rtol = TOLERANCES[variant]
        inputs = [model_inputs(name, scene, dtype) for _, scene in scenes]
        written.append(
            write_torch_fixture_archive(
                Path(out_dir) / f"{name}-{variant}.tar.gz",
                variant_model,
                inputs,
                atol=atol,
                rtol=rtol,
                quantize=quantize,
                names=[case for case, _ in scenes],
                descriptions=[
                    f"{name} {variant}: {len(s.coords)} voxels, {len(s.points)} points"
                    for _, s in scenes
                ],
                producer={"model": name, "variant": variant},
            )
        )
    return written

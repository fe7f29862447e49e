"""The demo's picture: predictions, what int8 changes, where torch and MLX disagree.

Six 3-D panels on a fixed 2 x 3 grid, then the error histograms:

1. the scene's labels (or the eager float model's prediction for unlabelled input);
2. the first artifact's MLX prediction (mIoU when labelled);
3. that prediction against the labels: wrong voxels in black;
4. the second artifact's MLX prediction (int8 when exported by the demo);
5. **int8 against f16**: each voxel coloured by its largest logit change
   (log scale; identical voxels grey), voxels whose class changes marked in
   red -- the panel that tells f16 from int8;
6. **torch against MLX** on the same artifact: each output row coloured by
   its largest feature difference (log scale), rows whose class flips marked
   in red -- the disagreement the picture claims to show.

A panel whose data does not exist for an artifact (no labels, one artifact,
outputs that are not class logits, outputs whose rows are not the input's)
keeps its place and says why it is empty, so the layout is the same for any
artifact given with ``--artifact``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from lattice_conformance.archive import SparseArrays
from lattice_conformance.metrics import canonical_order
from lattice_conformance.plots import (
    ErrorSeries,
    draw_error_histograms,
    draw_note,
    draw_scene,
    pyplot,
    replay_series,
)

Array = Any

__all__ = ["Disagreement", "demo_figure", "row_disagreement"]


@dataclass(frozen=True)
class Disagreement:
    """Per output row: position, max |torch - MLX| over channels, and whether the argmax flips."""

    xyz: Array
    max_abs: Array
    flips: Array


def row_disagreement(torch_value: Any, mlx_value: Any, scene_xyz: Array) -> Disagreement | None:
    """Torch against MLX row by row (sparse rows aligned by canonical order), or None."""
    if isinstance(torch_value, SparseArrays) and isinstance(mlx_value, SparseArrays):
        t_order = canonical_order(torch_value.coords)
        m_order = canonical_order(mlx_value.coords)
        coords = np.asarray(torch_value.coords)[t_order]
        if len(t_order) != len(m_order) or not np.array_equal(
            coords, np.asarray(mlx_value.coords)[m_order]
        ):
            return None
        t = np.asarray(torch_value.features, np.float64)[t_order]
        m = np.asarray(mlx_value.features, np.float64)[m_order]
        xyz = coords[:, 1:].astype(np.float32)
    else:
        t = np.asarray(torch_value, np.float64)
        m = np.asarray(mlx_value, np.float64)
        if t.shape != m.shape or t.ndim != 2 or len(t) != len(scene_xyz):
            return None
        xyz = scene_xyz
    diff = np.abs(t - m).max(axis=1) if t.shape[1] else np.zeros(len(t))
    flips = (t.argmax(axis=1) != m.argmax(axis=1)) if t.shape[1] > 1 else np.zeros(len(t), bool)
    return Disagreement(xyz, diff, flips)


def _draw_disagreement(ax: Any, fig: Any, what: str, d: Disagreement) -> None:
    """Rows coloured by log10 of their largest difference; identical rows faint grey."""
    same = d.max_abs == 0
    if same.any():
        ax.scatter(
            *d.xyz[same].T,
            c="#9a9a9a",
            s=2.5,
            marker="s",
            alpha=0.5,
            linewidths=0,
            depthshade=False,
        )
    differ = ~same
    positive = d.max_abs[differ]
    floor = float(positive.min()) if positive.size else 1e-8
    logs = np.log10(np.maximum(d.max_abs[differ], floor))
    top = float(logs.max()) if logs.size else 0.0
    order = np.argsort(logs)  # largest differences drawn last, on top
    points = ax.scatter(
        *d.xyz[differ][order].T,
        c=logs[order],
        cmap="viridis",
        vmin=float(np.log10(floor)),
        vmax=max(top, float(np.log10(floor)) + 1e-6),
        s=3.0,
        marker="s",
        linewidths=0,
        depthshade=False,
    )
    if d.flips.any():
        ax.scatter(*d.xyz[d.flips].T, c="#d62728", s=30, marker="x", linewidths=1.3)
    bar = fig.colorbar(points, ax=ax, shrink=0.6, pad=0.02)
    bar.set_label(f"log10 max |{what}| per row", fontsize=7)
    bar.ax.tick_params(labelsize=6)
    largest = float(d.max_abs.max()) if len(d.max_abs) else 0.0
    ax.set_title(
        f"{what}: max |Δ| {largest:.2g}, {int(d.flips.sum())} class flips (red x)\n"
        f"{int(same.sum())} of {len(d.max_abs)} rows identical (grey)",
        fontsize=9,
    )
    ax.view_init(elev=28, azim=-125)
    span = d.xyz.max(axis=0) - d.xyz.min(axis=0) if len(d.xyz) else np.ones(3)
    ax.set_box_aspect(tuple(np.maximum(span, 1e-6)))
    ax.tick_params(labelsize=6)


def demo_figure(
    title: str,
    xyz: Array,
    truth: Array,
    truth_title: str,
    variants: Sequence[Any],
    replays: dict[str, Any],
    class_names: Sequence[str],
) -> Any:
    """The demo's matplotlib figure (a fixed 2 x 3 grid of scenes over two histograms)."""
    plt = pyplot()
    fig = plt.figure(figsize=(16, 14), constrained_layout=True)
    grid = fig.add_gridspec(3, 6, height_ratios=[1.0, 1.0, 0.85])
    spots = [grid[r, c : c + 2] for r in (0, 1) for c in (0, 2, 4)]

    def scene_axes(i: int) -> Any:
        return fig.add_subplot(spots[i], projection="3d")

    def note(i: int, text: str) -> None:
        draw_note(fig.add_subplot(spots[i]), text)

    truth = np.asarray(truth)
    labelled = bool(np.any(truth >= 0))
    draw_scene(scene_axes(0), xyz, truth, truth_title, class_names)

    predicted = [v for v in variants if "mlx" in v.predictions]
    first = predicted[0] if predicted else None
    if first is None:
        note(1, "no class prediction: the artifact's output is not\none logit per class per row")
        note(2, "no prediction to compare with the labels")
    else:
        pred = np.asarray(first.predictions["mlx"])
        miou = first.miou.get("mlx")
        score = f" (mIoU {miou:.3f})" if miou is not None else ""
        draw_scene(scene_axes(1), xyz, pred, f"MLX {first.name} prediction{score}", class_names)
        if labelled:
            wrong = pred != truth
            draw_scene(
                scene_axes(2),
                xyz,
                truth,
                f"MLX {first.name} vs {truth_title}: {int(wrong.sum())} of {len(wrong)} wrong",
                class_names,
                wrong=wrong,
            )
        else:
            note(2, "no labels: nothing to score against")

    second = predicted[1] if len(predicted) > 1 else None
    if second is None or first is None:
        note(3, "one artifact only: no second prediction")
        note(4, "one artifact only: nothing to compare it with")
    else:
        b = np.asarray(second.predictions["mlx"])
        miou = second.miou.get("mlx")
        score = f" (mIoU {miou:.3f})" if miou is not None else ""
        draw_scene(scene_axes(3), xyz, b, f"MLX {second.name} prediction{score}", class_names)
        la, lb = first.logits["mlx"], second.logits["mlx"]
        quantized = Disagreement(
            xyz, np.abs(la - lb).max(axis=1), np.argmax(la, axis=1) != np.argmax(lb, axis=1)
        )
        _draw_disagreement(
            scene_axes(4), fig, f"{second.name} - {first.name} logits (MLX)", quantized
        )

    worst = max(
        (v for v in variants if v.disagreement is not None),
        key=lambda v: float(v.disagreement.max_abs.max()) if len(v.disagreement.max_abs) else 0.0,
        default=None,
    )
    if worst is None:
        note(5, "torch and MLX outputs cannot be placed row by row\n(see the histograms below)")
    else:
        what = f"torch - MLX ({worst.name} artifact)"
        _draw_disagreement(scene_axes(5), fig, what, worst.disagreement)

    axes = [fig.add_subplot(grid[2, 0:3]), fig.add_subplot(grid[2, 3:6])]
    series: list[ErrorSeries] = []
    for label, replay in replays.items():
        series += replay_series(replay, prefix=f"fixtures {label}", merge=True)
    for v in variants:
        a = v.agreement
        if a is not None and a.abs_sample.size:
            series.append(
                ErrorSeries(
                    f"scene {v.name} torch vs MLX",
                    a.abs_sample,
                    a.rel_sample,
                    a.atol,
                    a.rtol,
                    a.passed,
                )
            )
    if series:
        draw_error_histograms(axes, series)
    else:
        for ax in axes:
            draw_note(ax, "no feature errors to draw")
    fig.suptitle(title, fontsize=13)
    return fig

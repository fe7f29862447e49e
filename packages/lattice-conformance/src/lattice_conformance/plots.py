"""Figures: error histograms (replay) and the demo's scene + error panel.

matplotlib with the Agg backend only (files, never windows); imported lazily
by the commands that draw, so replay without ``--plot`` never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
from lattice_contract.atomic import atomic_write_file

if TYPE_CHECKING:
    from lattice_conformance.replay import ReplayResult

Array = npt.NDArray[Any]

_FLOOR: Final = -12.0
"""log10 of the smallest error drawn; exact zeros get a bin of their own below it."""


@dataclass(frozen=True)
class ErrorSeries:
    """One histogram line: a label, error samples and the tolerance to mark."""

    label: str
    abs_errors: Array
    rel_errors: Array
    atol: float


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _log_bins(values: Array) -> Array:
    logs = np.where(values > 0, np.log10(np.maximum(values, 1e-300)), _FLOOR - 0.75)
    return np.clip(logs, _FLOOR - 0.75, 0.99)


def draw_error_histograms(axes: Sequence[Any], series: Sequence[ErrorSeries]) -> None:
    """Absolute (axes[0]) and relative (axes[1]) error histograms on a log10 axis.

    Exact zeros are counted in the separate left-most bin labelled "0" (on
    CPU many values agree bit for bit, and a log axis cannot show them
    otherwise).  Dashed lines mark each series' ``atol``.
    """
    edges = np.concatenate([[_FLOOR - 1.0, _FLOOR - 0.5], np.linspace(_FLOOR, 1.0, 53)])
    many = len(series) > 8
    ticks = [_FLOOR - 0.75, *range(int(_FLOOR), 1, 2)]
    labels = ["0", *(f"1e{t}" for t in range(int(_FLOOR), 1, 2))]
    for ax, kind, title in (
        (axes[0], "abs_errors", "absolute error |actual - expected|"),
        (axes[1], "rel_errors", "relative error |actual - expected| / max(|expected|, atol)"),
    ):
        marked: set[float] = set()
        for item in series:
            values = getattr(item, kind)
            if values.size == 0:
                continue
            ax.hist(
                _log_bins(values),
                bins=edges,
                histtype="step",
                linewidth=1.2,
                alpha=0.5 if many else 0.95,
                label=None if many else f"{item.label} (max {values.max():.2g})",
            )
            if kind == "abs_errors" and item.atol > 0 and item.atol not in marked:
                marked.add(item.atol)
                ax.axvline(np.log10(item.atol), linestyle="--", linewidth=0.9, color="gray")
                ax.text(
                    np.log10(item.atol),
                    0.97,
                    f" atol {item.atol:g}",
                    transform=ax.get_xaxis_transform(),
                    fontsize=7,
                    color="gray",
                    va="top",
                )
        ax.set_yscale("log")
        ax.set_xticks(ticks, labels, fontsize=7)
        ax.set_xlabel("error (log scale; left-most bin: exactly 0)", fontsize=8)
        ax.set_ylabel("feature values", fontsize=8)
        ax.set_title(title, fontsize=9)
        if series and not many:
            ax.legend(fontsize=6.5, loc="upper center")


def replay_series(result: ReplayResult, prefix: str = "", merge: bool = False) -> list[ErrorSeries]:
    """Histogram series of a replay: one per case output, or one per archive (``merge``)."""
    outputs = [(c, o) for c in result.cases for o in c.outputs if o.abs_sample.size]
    if merge:
        if not outputs:
            return []
        return [
            ErrorSeries(
                prefix or result.archive.name,
                np.concatenate([o.abs_sample for _, o in outputs]),
                np.concatenate([o.rel_sample for _, o in outputs]),
                max(c.atol for c, _ in outputs),
            )
        ]
    return [
        ErrorSeries(f"{prefix}{c.name}:{o.name}", o.abs_sample, o.rel_sample, c.atol)
        for c, o in outputs
    ]


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 110) -> Path:
    plt = pyplot()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    kind = target.suffix.lstrip(".") or "png"  # the temporary name has no suffix to go by
    atomic_write_file(target, lambda tmp: fig.savefig(tmp, dpi=dpi, format=kind))
    plt.close(fig)
    return target


def plot_replay_errors(result: ReplayResult, path: str | os.PathLike[str]) -> Path:
    """PNG of a replay's error distributions, one line per case output."""
    plt = pyplot()
    series = replay_series(result)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    draw_error_histograms(axes, series)
    s = result.summary()
    fig.suptitle(
        f"{result.archive.name}: {s['passed']}/{s['cases']} cases pass on "
        f"{result.runtime} ({result.device})"
        + ("" if len(series) <= 8 else f"  [{len(series)} outputs overlaid]"),
        fontsize=11,
    )
    return save_figure(fig, path)


CLASS_COLOURS: Final = ("#8c8c8c", "#d62728", "#1f77b4", "#ff7f0e")
"""plane grey, sphere red, cylinder blue, box orange; unlabelled points are black."""


def draw_scene(
    ax: Any,
    xyz: Array,
    classes: Array,
    title: str,
    class_names: Sequence[str],
    wrong: Array | None = None,
) -> None:
    """3D scatter of ``xyz`` coloured by class index (-1 -> black).

    With ``wrong`` (a boolean mask), the other rows are drawn faintly and the
    masked rows in black on top, so misclassified voxels stand out.
    """
    palette = np.array([*CLASS_COLOURS, "#000000"])
    index = np.where(classes >= 0, classes, len(CLASS_COLOURS))
    colours = palette[index]
    if wrong is None:
        ax.scatter(*xyz.T, c=colours, s=2.0, marker="s", linewidths=0, depthshade=False)
    else:
        ax.scatter(*xyz[~wrong].T, c=colours[~wrong], s=1.5, alpha=0.35, linewidths=0)
        ax.scatter(*xyz[wrong].T, c="#000000", s=5.0, marker="s", linewidths=0)
    ax.set_title(title, fontsize=9)
    ax.view_init(elev=28, azim=-125)
    span = (xyz.max(axis=0) - xyz.min(axis=0)) if len(xyz) else np.ones(3)
    ax.set_box_aspect(tuple(np.maximum(span, 1e-6)))
    ax.tick_params(labelsize=6)
    handles = [
        ax.scatter([], [], [], c=colour, s=12, marker="s", label=name)
        for name, colour in zip(class_names, CLASS_COLOURS, strict=False)
    ]
    if wrong is not None:
        handles.append(ax.scatter([], [], [], c="#000000", s=12, marker="s", label="wrong"))
    ax.legend(handles=handles, fontsize=6.5, loc="upper left", markerscale=1.0)

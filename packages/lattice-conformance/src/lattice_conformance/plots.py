"""Figures: error histograms (replay) and the demo's scene + error panel.

matplotlib with the Agg backend only (files, never windows); imported lazily
by the commands that draw, so replay without ``--plot`` never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt
from lattice_contract.artifact import atomic_write_file, printable

if TYPE_CHECKING:
    from lattice_conformance.replay import ReplayResult

Array = npt.NDArray[Any]

_FLOOR: Final = -16.0
"""log10 of the smallest nonzero error an axis ever shows (below f64's ulp of 1)."""

PASS_COLOUR: Final = "#2a7d3b"
FAIL_COLOUR: Final = "#c62828"


@dataclass(frozen=True)
class ErrorSeries:
    """One histogram line: a label, error samples, its tolerances and its verdict."""

    label: str
    abs_errors: Array
    rel_errors: Array
    atol: float
    rtol: float = 0.0
    passed: bool = True


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plain_text() -> AbstractContextManager[Any]:
    """A matplotlib settings context in which ``$`` in text is drawn as itself.

    Titles, legends and verdicts quote names from the user's files (an
    archive's file name, case and output names, failure messages).  With
    mathtext on, a name such as ``a$\\foo{$`` is parsed as TeX and the whole
    figure fails to draw; these figures set no formula, so text is text.  A
    context, not a global setting: the caller's own figures keep their maths.
    """
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False})


def log_range(values: Sequence[Array], marks: Sequence[float] = ()) -> tuple[int, int]:
    """Integer log10 decades spanning every positive value and tolerance mark.

    The axis comes from the data: nothing is clipped into an end bin, however
    large (1e3) or small (1e-9) the errors are.
    """
    positive = [v[v > 0] for v in values if v.size]
    found = np.concatenate(positive) if positive else np.zeros(0)
    found = found[np.isfinite(found)]
    marks_arr = np.asarray([m for m in marks if m > 0], dtype=np.float64)
    everything = np.concatenate([found, marks_arr])
    if everything.size == 0:
        return -8, 0
    low = max(int(np.floor(np.log10(everything.min()))), int(_FLOOR))
    high = int(np.ceil(np.log10(everything.max()))) + 1
    return low, max(high, low + 2)


def _zero_position(low: int) -> float:
    return low - 0.75


def _log_positions(values: Array, low: int) -> Array:
    """log10 of each value; exact zeros go to the separate "0" bin left of the axis."""
    finite = np.where(np.isfinite(values), values, np.finfo(np.float64).max)
    logs = np.log10(np.maximum(finite, 10.0 ** (low - 0.001)))
    return np.where(values > 0, logs, _zero_position(low))


def _tolerance_line(ax: Any, value: float, text: str) -> None:
    ax.axvline(np.log10(value), linestyle="--", linewidth=1.0, color=FAIL_COLOUR, alpha=0.8)
    ax.text(
        np.log10(value),
        0.5,
        f" {text}",
        transform=ax.get_xaxis_transform(),
        fontsize=7,
        color=FAIL_COLOUR,
        va="center",
        rotation=90,
    )


def draw_error_histograms(axes: Sequence[Any], series: Sequence[ErrorSeries]) -> None:
    """Absolute (axes[0]) and relative (axes[1]) error histograms on log10 axes from the data.

    Each axis spans the decades of its own errors and tolerances (see
    :func:`log_range`); exact zeros are counted in a separate bin labelled
    "0" left of the axis (on CPU many values agree bit for bit).  Dashed red
    lines mark each series' ``atol`` (absolute) and ``rtol`` (relative);
    series of failing cases are drawn in red, thick, and flagged FAIL in the
    legend, so a failure is visible without reading numbers.  Every series
    keeps its own colour and its full name in the legend however many there
    are; past 8 series the axes carry no legend and the caller draws one
    shared legend (:func:`draw_shared_legend`), since both axes hold the same
    series in the same colours.
    """
    many = len(series) > 8
    # tab20 without its two reds: red means failed here.
    palette = [c for i, c in enumerate(pyplot().get_cmap("tab20").colors) if i not in (6, 7)]
    for ax, kind, title, tol_name in (
        (axes[0], "abs_errors", "absolute error |actual - expected|", "atol"),
        (
            axes[1],
            "rel_errors",
            "relative error |actual - expected| / max(|expected|, atol)",
            "rtol",
        ),
    ):
        tolerances = sorted({getattr(item, tol_name[:1] + "tol") for item in series} - {0.0})
        low, high = log_range([getattr(item, kind) for item in series], tolerances)
        width = 0.25 if high - low <= 14 else 0.5
        edges = np.concatenate(
            [
                [_zero_position(low) - 0.25, _zero_position(low) + 0.25],
                np.arange(low, high + width, width),
            ]
        )
        for index, item in enumerate(series):
            values = getattr(item, kind)
            if values.size == 0:
                continue
            failed = not item.passed
            ax.hist(
                _log_positions(values, low),
                bins=edges,
                histtype="step",
                linewidth=2.2 if failed else 1.2,
                color=FAIL_COLOUR if failed else palette[index % len(palette)],
                alpha=0.95,
                label=f"{'FAIL ' if failed else ''}{item.label}"
                + ("" if many else f" (max {values.max():.2g})"),
            )
        for tol in tolerances:
            _tolerance_line(ax, tol, f"{tol_name} {tol:g}")
        step = max(1, (high - low) // 8)
        ticks = [_zero_position(low), *range(low, high + 1, step)]
        ax.set_xticks(ticks, ["0", *(f"1e{t}" for t in range(low, high + 1, step))], fontsize=7)
        ax.set_xlim(_zero_position(low) - 0.5, high + 0.25)
        ax.set_yscale("log")
        ax.set_xlabel("error (log scale from the data; left-most bin: exactly 0)", fontsize=8)
        ax.set_ylabel("feature values", fontsize=8)
        ax.set_title(title, fontsize=9)
        if series and ax.get_legend_handles_labels()[0] and not many:
            ax.legend(fontsize=6.5, loc="upper right")


def draw_shared_legend(ax: Any, source: Any, columns: int = 3) -> None:
    """One legend for many series: ``source``'s handles, full names, in ``columns`` columns."""
    ax.set_axis_off()
    handles, labels = source.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", ncol=columns, fontsize=7, frameon=False,
                  title="series (both histograms; red, thick: failed)",
                  title_fontsize=7.5)  # fmt: skip


@dataclass(frozen=True)
class CaseVerdict:
    """One row of the per-case panel: the worst error of a case beside its tolerance."""

    label: str
    max_abs_error: float | None  # None: no values compared (coordinates or runtime failed)
    atol: float
    passed: bool
    reason: str = ""


def draw_case_verdicts(ax: Any, verdicts: Sequence[CaseVerdict]) -> None:
    """Each case's max absolute error on a log axis from the data, its atol, pass/fail marks."""
    if not verdicts:
        draw_note(ax, "no cases")
        return
    shown = list(verdicts)[:40]
    values = np.asarray([v.max_abs_error or 0.0 for v in shown], dtype=np.float64)
    low, high = log_range([values], [v.atol for v in shown])
    y = np.arange(len(shown))[::-1]
    for yi, v in zip(y, shown, strict=True):
        colour = PASS_COLOUR if v.passed else FAIL_COLOUR
        if v.max_abs_error is None:
            ax.scatter([_zero_position(low)], [yi], marker="x", s=50, color=FAIL_COLOUR)
            ax.text(_zero_position(low) + 0.3, yi, _short(v.reason), fontsize=6.5, va="center",
                    color=FAIL_COLOUR)  # fmt: skip
            continue
        x = np.log10(v.max_abs_error) if v.max_abs_error > 0 else _zero_position(low)
        ax.scatter([x], [yi], marker="o" if v.passed else "X", s=36, color=colour, zorder=3)
        if not v.passed and v.reason:
            ax.text(x, yi - 0.28, _short(v.reason), fontsize=6, color=FAIL_COLOUR, va="top")
        if v.atol > 0:  # an atol of 0 has no place on a log axis
            ax.plot([np.log10(v.atol)] * 2, [yi - 0.4, yi + 0.4], color=FAIL_COLOUR, linewidth=1.2)
    ax.set_yticks(y, [f"{'PASS' if v.passed else 'FAIL'}  {v.label}" for v in shown], fontsize=6.5)
    for tick, v in zip(ax.get_yticklabels(), shown, strict=True):
        tick.set_color(PASS_COLOUR if v.passed else FAIL_COLOUR)
    step = max(1, (high - low) // 6)
    ax.set_xticks(
        [_zero_position(low), *range(low, high + 1, step)],
        ["0", *(f"1e{t}" for t in range(low, high + 1, step))],
        fontsize=7,
    )
    ax.set_xlim(_zero_position(low) - 0.5, high + 0.25)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.set_xlabel("max |actual - expected| per case (red tick: its atol)", fontsize=8)
    more = f" (first 40 of {len(verdicts)})" if len(verdicts) > 40 else ""
    ax.set_title(f"per case: dot = passed, red X = failed{more}", fontsize=9)


def _short(reason: str) -> str:
    """The reason's first clause, for beside a dot; the full text is under the figure."""
    head = reason.split(";")[0]
    return head if len(head) <= 60 else head[:57] + "..."


def failure_notes(verdicts: Sequence[CaseVerdict], width: int = 150) -> str:
    """Every failing case's full reason (with its fix), wrapped, one block per case."""
    import textwrap

    lines = []
    for v in verdicts:
        if not v.passed:
            text = f"FAIL {v.label}: {v.reason or 'out of tolerance'}"
            lines.append(textwrap.fill(text, width, subsequent_indent="    "))
    return "\n".join(lines)


def draw_note(ax: Any, text: str) -> None:
    """An empty panel that says why it is empty (the grid keeps its shape)."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, color="#57606a", wrap=True,
            transform=ax.transAxes)  # fmt: skip


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
                max(c.rtol for c, _ in outputs),
                all(c.passed for c, _ in outputs),
            )
        ]
    return [
        ErrorSeries(
            f"{prefix}{c.name}:{o.name}", o.abs_sample, o.rel_sample, c.atol, c.rtol, o.passed
        )
        for c, o in outputs
    ]


def replay_verdicts(result: ReplayResult) -> list[CaseVerdict]:
    """One verdict per case output (or per case, when it produced no outputs)."""
    verdicts = []
    for case in result.cases:
        if not case.outputs:
            reason = case.reasons[0] if case.reasons else "no outputs"
            verdicts.append(CaseVerdict(case.name, None, case.atol, False, reason))
        for out in case.outputs:
            worst = out.abs_error.max if out.abs_error is not None else None
            reason = out.reasons[0] if out.reasons else ""
            verdicts.append(
                CaseVerdict(f"{case.name}:{out.name}", worst, case.atol, out.passed, reason)
            )
    return verdicts


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 110) -> Path:
    plt = pyplot()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    kind = target.suffix.lstrip(".") or "png"  # the temporary name has no suffix to go by
    atomic_write_file(target, lambda tmp: fig.savefig(tmp, dpi=dpi, format=kind))
    plt.close(fig)
    return target


def plot_replay_errors(result: ReplayResult, path: str | os.PathLike[str]) -> Path:
    """PNG of a replay: error histograms (axes from the data, tolerance lines) and verdicts."""
    with plain_text():
        return _plot_replay_errors(result, path)


def _plot_replay_errors(result: ReplayResult, path: str | os.PathLike[str]) -> Path:
    plt = pyplot()
    series = replay_series(result)
    verdicts = replay_verdicts(result)
    notes = failure_notes(verdicts)
    note_h = 0.16 * (notes.count("\n") + 1) + 0.2 if notes else 0.0
    legend_h = 0.17 * ((len(series) + 2) // 3) + 0.35 if len(series) > 8 else 0.0
    main_h = 4.8 + 0.12 * min(len(verdicts), 40)
    heights = [h for h in (main_h, legend_h, note_h) if h]
    fig = plt.figure(figsize=(15, sum(heights)), constrained_layout=True)
    grid = fig.add_gridspec(len(heights), 3, width_ratios=[1.0, 1.0, 0.8], height_ratios=heights)
    axes = [fig.add_subplot(grid[0, i]) for i in range(3)]
    draw_error_histograms(axes[:2], series)
    draw_case_verdicts(axes[2], verdicts)
    if legend_h:
        draw_shared_legend(fig.add_subplot(grid[1, :]), axes[0])
    if notes:  # full failure reasons, fix included, never cut
        note_ax = fig.add_subplot(grid[len(heights) - 1, :])
        note_ax.set_axis_off()
        note_ax.text(0.0, 1.0, notes, fontsize=7, family="monospace", color=FAIL_COLOUR,
                     va="top", ha="left", transform=note_ax.transAxes)  # fmt: skip
    s = result.summary()
    verdict = "PASS" if s["passed"] == s["cases"] else f"FAIL ({s['cases'] - s['passed']} failing)"
    fig.suptitle(
        f"{printable(result.archive.name)}: {s['passed']}/{s['cases']} cases pass on "
        f"{result.runtime} ({result.device}) - {verdict}"
        + ("" if len(series) <= 8 else f"  [{len(series)} outputs overlaid]"),
        fontsize=11,
        color=PASS_COLOUR if s["passed"] == s["cases"] else FAIL_COLOUR,
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

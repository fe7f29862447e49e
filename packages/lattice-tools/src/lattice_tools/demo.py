"""``lattice demo``: the whole Lattice path on one scene, end to end.

    lattice demo [--model minkunet|spvcnn] [--input cloud.ply|cloud.npy]
                 [--artifact DIR] [--out DIR] [--device auto|cpu|gpu] [--seed N]

By default it takes the shipped trained network (``--model``, MinkUNet) and a
freshly generated labelled scene that no training or fixture scene used, then

1. exports the torch model twice with ``save_lattice_model_artifact``: dense
   float16 and int8-packed (the exporter checks each artifact against the
   eager model before writing it);
2. verifies each ``graph.mlir`` with the native MLIR dialect
   (``lattice_mlir.verify``) and imports its plan;
3. compiles each artifact for MLX (``load_lattice_program``) and for torch,
   runs both on the scene, and compares them (exact coordinates after
   canonical ordering, feature error statistics);
4. scores every runtime's segmentation against the scene's labels (mIoU);
5. replays the shipped conformance fixtures of the model on MLX;

then prints a short report and writes ``report.json`` and ``demo.png`` (the
scene coloured by predicted class beside the error histograms) under
``--out``.  ``--input`` replaces the scene with a user point cloud (no labels,
so no mIoU; the eager float32 model's prediction stands in for the truth in
the picture); ``--artifact`` replaces the export with an existing artifact
directory whose ABI is one of the two shipped models'.

Exit status 0 when every check holds (verification, coordinate equality,
tolerances, fixture replay), 1 otherwise, 2 for unusable arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import logging
import platform
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
from lattice_conformance import segmentation as seg
from lattice_conformance.archive import SparseArrays
from lattice_conformance.metrics import OutputResult, compare_dense, compare_sparse
from lattice_conformance.replay import (
    ReplayResult,
    format_table,
    replay_archive,
    write_json_atomic,
)
from lattice_conformance.runners import MLXRunner, RunResult, RuntimeUnavailable, TorchRunner
from lattice_contract.artifact import EXIT_USAGE, check_outputs, printable

from lattice_tools.demo_plot import Disagreement, row_disagreement

DEMO_REPORT_FORMAT: Final = "lattice-demo-report"
DEMO_REPORT_VERSION: Final = 1
DEFAULT_SEED: Final = 2024
DEFAULT_VOXELS: Final = 8000

Array = Any


log = logging.getLogger(__name__)


class DemoError(RuntimeError):
    """A demo step cannot run (the message says which and why)."""


@dataclass
class Stages:
    """Wall time of each named stage, in order; each stage is announced as it starts.

    The whole demo takes tens of seconds, so it says what it is doing while it
    does it, through :mod:`logging` at INFO (stderr under the ``lattice``
    command, silenced by ``--quiet``), leaving stdout to the report.
    """

    times: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def say(self, text: str) -> None:
        """One progress line, ``[  12.3 s] text``."""
        log.info("[%7.1f s] %s", time.perf_counter() - self.started, text)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.say(f"{name} ...")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.times[name] = time.perf_counter() - start
            log.info(
                "[%7.1f s] %s: %.3f s", time.perf_counter() - self.started, name, self.times[name]
            )


@dataclass
class VariantResult:
    """Everything measured for one artifact (f16, int8 or a user artifact)."""

    name: str
    path: Path
    verified: bool = False
    diagnostics: str = ""
    op_counts: dict[str, int] = field(default_factory=dict)
    abi: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    weight_bytes: int = 0
    packed_weights: int = 0
    agreement: OutputResult | None = None
    miou: dict[str, float] = field(default_factory=dict)
    iou: dict[str, list[float]] = field(default_factory=dict)
    predictions: dict[str, Array] = field(default_factory=dict)
    logits: dict[str, Array] = field(default_factory=dict)
    run_s: dict[str, float] = field(default_factory=dict)
    disagreement: Disagreement | None = None
    """Per output row, torch against MLX on this artifact (for the picture)."""


# ---------------------------------------------------------------------------
# Inputs and predictions.


def _abi_inputs(plan: Any, scene: seg.Scene) -> tuple[list[Array], list[str], str]:
    """ABI arrays for ``scene`` in the plan's argument order, their dtypes, and the kind.

    Two ABIs are understood: one sparse input (voxels; features ``[1,
    position]`` when it has 4 channels, ones otherwise) and upstream's point
    form, four tensors ``(points (P, 3) f32, features (P, C), batch (P,) i32,
    active (1,) i32)``.
    """
    roles = [a.role for a in plan.args]
    infos = [plan.type_info(a.type) for a in plan.args]
    if roles == ["sparse_coords", "sparse_features", "sparse_active"]:
        channels, dtype = infos[1].shape[1], infos[1].dtype
        feats = (
            scene.features
            if channels == seg.IN_CHANNELS
            else np.ones((len(scene.coords), channels), np.float32)
        )
        arrays = [scene.coords, _as_dtype(feats, dtype), np.array([len(scene.coords)], np.int32)]
        return arrays, ["i32", dtype, "i32"], "voxels"
    if (
        roles == ["tensor"] * 4
        and infos[0].shape == (-1, 3)
        and infos[0].dtype == "f32"
        and infos[2].shape == (-1,)
        and infos[2].dtype == "i32"
        and infos[3].shape == (1,)
    ):
        channels, dtype = infos[1].shape[1], infos[1].dtype
        feats = (
            scene.point_features
            if channels == seg.IN_CHANNELS
            else np.ones((len(scene.points), channels), np.float32)
        )
        active = np.array([len(scene.points)], np.int32)
        arrays = [scene.points, _as_dtype(feats, dtype), scene.point_batch, active]
        return arrays, ["f32", dtype, "i32", "i32"], "points"
    described = ", ".join(f"{a.abi_name}: {a.type}" for a in plan.args)
    raise DemoError(
        "the demo feeds artifacts taking one sparse input (x_coords, x_features, x_active) or "
        f"(points (P, 3) f32, features, batch (P,) i32, active (1,) i32); this one takes "
        f"{described}"
    )


def _as_dtype(array: Array, dtype: str) -> Array:
    if dtype == "f16":
        return np.asarray(array, dtype=np.float16)
    if dtype in ("f32", "bf16"):  # bf16 travels as f32; the runner casts
        return np.asarray(array, dtype=np.float32)
    raise DemoError(f"unsupported feature dtype {dtype!r}")


def _logits(output: Any, scene: seg.Scene, kind: str) -> Array | None:
    """Class logits per scene voxel / point (rows aligned to the scene), or None."""
    value = output.value
    if isinstance(value, SparseArrays):
        if kind != "voxels" or value.features.shape[1] != seg.NUM_CLASSES:
            return None
        idx = seg.align_rows(scene.coords, value.coords)
        return np.asarray(value.features, np.float32)[idx]
    if value.ndim != 2 or value.shape[1] != seg.NUM_CLASSES:
        return None
    rows = len(scene.coords) if kind == "voxels" else len(scene.points)
    if value.shape[0] != rows:
        return None
    return np.asarray(value, np.float32)


def _compare(variant: str, torch_run: RunResult, mlx_run: RunResult) -> OutputResult:
    expected, actual = torch_run.outputs[0], mlx_run.outputs[0]
    # A user artifact is judged by its output dtype (f32 tight, half types loose).
    fallback = "f32" if expected.dtype == "f32" else "f16"
    atol, rtol = seg.TOLERANCES.get(variant, seg.TOLERANCES[fallback])
    if isinstance(expected.value, SparseArrays) and isinstance(actual.value, SparseArrays):
        return compare_sparse(
            "y",
            actual.value,
            expected.value,
            atol=atol,
            rtol=rtol,
            expected_dtype=expected.dtype,
            actual_dtype=actual.dtype,
        )
    return compare_dense(
        "y",
        np.asarray(actual.value),
        np.asarray(expected.value),
        atol=atol,
        rtol=rtol,
        expected_dtype=expected.dtype,
        actual_dtype=actual.dtype,
    )


# ---------------------------------------------------------------------------
# Stages.


def _export(name: str, model: Any, scene: seg.Scene, out: Path, stages: Stages) -> dict[str, Path]:
    import torch
    from torch_lattice.export import save_lattice_model_artifact
    from torch_lattice.quant_report import DenseWeightWarning

    paths = {}
    for variant, quantize in (("f16", None), ("int8", "int8")):
        target = out / f"{name}-{variant}.lattice"
        half = copy.deepcopy(model).to(torch.float16).eval()
        atol, rtol = seg.TOLERANCES[variant]
        with stages(f"export {variant}"), warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always", DenseWeightWarning)
            save_lattice_model_artifact(
                half,
                seg.model_inputs(name, scene, torch.float16),
                target,
                quantize=quantize,
                atol=atol,
                rtol=rtol,
            )
        for note in notes:  # the exporter's dense-weight notes, as demo output
            stages.say(f"  note: {note.message}")
        paths[variant] = target
    return paths


def _verify(result: VariantResult, stages: Stages) -> None:
    import lattice_mlir

    graph = (result.path / "graph.mlir").read_text()
    with stages(f"verify {result.name} (native MLIR)"):
        status, _ = lattice_mlir.verify_and_import(graph)
    result.verified = bool(status.valid)
    result.diagnostics = status.diagnostics
    weights = result.path / "weights.safetensors"
    result.weight_bytes = weights.stat().st_size if weights.is_file() else 0
    if not status.valid:
        raise DemoError(f"{result.path}/graph.mlir does not verify:\n{status.diagnostics}")


def _run_variant(
    result: VariantResult, scene: seg.Scene, device: str, stages: Stages
) -> tuple[RunResult, RunResult, str]:
    with stages(f"compile {result.name} (mlx)"):
        mlx = MLXRunner(result.path, device)
    with stages(f"compile {result.name} (torch)"):
        torch_runner = TorchRunner(result.path, "cpu")
    result.op_counts = mlx.op_counts()
    result.abi = mlx.abi()
    result.packed_weights = sum(
        1 for op in mlx.program.plan.ops if op.name == "lattice.weight" and "packing" in op.attrs
    )
    inputs, dtypes, kind = _abi_inputs(mlx.program.plan, scene)
    with stages(f"run {result.name} (mlx, warm-up)"):
        mlx.run(inputs, dtypes)
    with stages(f"run {result.name} (mlx)"):
        mlx_run = mlx.run(inputs, dtypes)
    with stages(f"run {result.name} (torch)"):
        torch_run = torch_runner.run(inputs, dtypes)
    result.run_s = {"mlx": mlx_run.compute_s, "torch": torch_run.compute_s}
    result.agreement = _compare(result.name, torch_run, mlx_run)
    xyz = (scene.coords[:, 1:] if kind == "voxels" else scene.points).astype(np.float32)
    result.disagreement = row_disagreement(
        torch_run.outputs[0].value, mlx_run.outputs[0].value, xyz
    )
    return torch_run, mlx_run, kind


def _score(result: VariantResult, runs: dict[str, RunResult], scene: seg.Scene, kind: str) -> None:
    labels = scene.labels if kind == "voxels" else scene.point_labels
    for runtime, run in runs.items():
        logits = _logits(run.outputs[0], scene, kind)
        if logits is None:
            continue
        pred = np.argmax(logits, axis=1)
        result.logits[runtime] = logits
        result.predictions[runtime] = pred
        if np.any(labels >= 0):
            result.miou[runtime] = seg.mean_iou(pred, labels)
            result.iou[runtime] = [float(v) for v in seg.iou_per_class(pred, labels)]


def _eager_predictions(name: str, model: Any, scene: seg.Scene) -> Array:
    import torch

    with torch.no_grad():
        out = model(*seg.model_inputs(name, scene))
    logits = out.feats if name == "minkunet" else out
    return np.asarray(logits.argmax(dim=1).numpy())


# ---------------------------------------------------------------------------
# Report.


def _fmt_stats(out: OutputResult | None) -> str:
    if out is None or out.abs_error is None or out.rel_error is None:
        return "n/a"
    a, r = out.abs_error, out.rel_error
    return (
        f"abs mean {a.mean:.2e} median {a.median:.2e} p95 {a.p95:.2e} p99 {a.p99:.2e} "
        f"max {a.max:.2e} | rel p99 {r.p99:.2e} max {r.max:.2e}"
    )


def _fixture_stats(replay: ReplayResult) -> dict[str, Any]:
    outs = [o for c in replay.cases for o in c.outputs if o.abs_error is not None]
    abs_all = np.concatenate([o.abs_sample for o in outs]) if outs else np.zeros(0)
    rel_all = np.concatenate([o.rel_sample for o in outs]) if outs else np.zeros(0)
    from lattice_conformance.metrics import ErrorStats

    return {
        "abs_error": ErrorStats.of(abs_all).as_dict(),
        "rel_error": ErrorStats.of(rel_all).as_dict(),
    }


def _print_report(
    name: str,
    scene_text: str,
    variants: list[VariantResult],
    eager_miou: float | None,
    replays: dict[str, ReplayResult],
    stages: Stages,
    out: Path,
    ok: bool,
) -> None:
    """Print the demo's summary; every text from the user's files or command line escaped.

    File and directory names (``--input``, ``--artifact``, ``--out``), the
    artifact's ABI names and a replay's error message come from the user's
    files: a terminal escape in one of them is printed as ``\\x1b``, never
    obeyed (:func:`~lattice_contract.artifact.printable`).
    """
    lines: list[str] = []
    say = lines.append
    line = "=" * 78
    say(line)
    say(f"Lattice demo: {printable(name)} on {printable(scene_text)}")
    say(line)
    first = variants[0]
    say("Artifact ABI:")
    for item in first.abi.get("inputs", []):
        say(_abi_line("in ", item))
    for item in first.abi.get("outputs", []):
        say(_abi_line("out", item))
    for v in variants:
        total = sum(v.op_counts.values())
        ops = ", ".join(f"{k.removeprefix('lattice.')} {n}" for k, n in v.op_counts.items())
        say(
            f"Artifact {v.name}: {'verified' if v.verified else 'REJECTED'} by native MLIR; "
            f"{total} ops ({ops}); weights {v.weight_bytes / 1e6:.2f} MB"
            + (f", {v.packed_weights} packed" if v.packed_weights else "")
        )
    say("torch vs MLX on the scene (same artifact):")
    for v in variants:
        a = v.agreement
        coords = "n/a (dense output)"
        if a is not None and a.coordinates is not None:
            c = a.coordinates
            coords = "equal" if c.equal else f"DIFFER ({c.rows_differing} rows)"
            coords += f" ({c.expected_rows} rows)"
        verdict = "within tolerance" if a is not None and a.passed else "OUT OF TOLERANCE"
        say(f"  {v.name:<5} coordinates {coords}; {verdict}")
        say(f"        {_fmt_stats(a)}")
    say("Segmentation (mIoU on the scene):")
    if eager_miou is not None:
        say(f"  torch eager f32          {eager_miou:.4f}")
    for v in variants:
        for runtime in ("torch", "mlx"):
            if runtime in v.miou:
                ious = " ".join(
                    f"{n} {x:.3f}" for n, x in zip(seg.CLASS_NAMES, v.iou[runtime], strict=True)
                )
                label = f"{runtime} {v.name} artifact"
                say(f"  {label:<24} {v.miou[runtime]:.4f}   ({ious})")
        if {"torch", "mlx"} <= set(v.predictions):
            same = float(np.mean(v.predictions["torch"] == v.predictions["mlx"]))
            say(f"  {v.name}: torch and MLX predict the same class for {same:.2%} of rows")
    if not any(v.miou for v in variants) and eager_miou is None:
        say("  n/a (the input has no labels)")
    say("Shipped conformance fixtures replayed on MLX:")
    if not replays:
        say("  skipped (--no-fixtures, or a user artifact the fixtures do not belong to)")
    for label, replay in replays.items():
        s = replay.summary()
        stats = _fixture_stats(replay)
        amax, ap99 = stats["abs_error"]["max"], stats["abs_error"]["p99"]
        coords = (
            "n/a" if not s["sparse_outputs"] else ("equal" if s["coordinates_equal"] else "DIFFER")
        )
        problem = f"  ERROR {printable(replay.error)}" if replay.error else ""
        say(
            f"  {label:<16} {s['passed']}/{s['cases']} pass; coordinates {coords}; "
            f"abs error p99 {ap99 if ap99 is not None else float('nan'):.2e} "
            f"max {amax if amax is not None else float('nan'):.2e}; "
            f"replay overhead {s['overhead_s'] * 1e3:.0f} ms{problem}"
        )
    say("Stage times:")
    for stage, seconds in stages.times.items():
        say(f"  {stage:<34} {seconds:8.3f} s")
    say(f"Report: {printable(out / 'report.json')}   Picture: {printable(out / 'demo.png')}")
    say("RESULT: " + ("PASS" if ok else "FAIL"))
    print("\n".join(lines))


def _abi_line(direction: str, item: dict[str, Any]) -> str:
    name, role, kind = (printable(item.get(k, "?")) for k in ("name", "role", "type"))
    return f"  {direction} {name:<12} {role:<16} {kind}"


def _draw(
    path: Path,
    name: str,
    scene: seg.Scene,
    kind: str,
    truth: Array,
    truth_title: str,
    variants: list[VariantResult],
    replays: dict[str, ReplayResult],
) -> Path:
    from lattice_conformance.plots import plain_text, save_figure

    from lattice_tools.demo_plot import demo_figure

    xyz = (scene.coords[:, 1:] if kind == "voxels" else scene.points).astype(np.float32)
    title = f"Lattice demo: {printable(name)}, {len(xyz)} {kind}"
    with plain_text():  # the file's name is drawn as itself, never as TeX
        fig = demo_figure(title, xyz, truth, truth_title, variants, replays, seg.CLASS_NAMES)
        return save_figure(fig, path, dpi=90)


# ---------------------------------------------------------------------------
# CLI.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lattice demo",
        description="Export, verify, compile, run and replay the shipped example end to end.",
    )
    parser.add_argument("--model", choices=seg.MODELS, default="minkunet")
    parser.add_argument(
        "--input", type=Path, help="a point cloud (.ply or .npy) instead of a generated scene"
    )
    parser.add_argument("--artifact", type=Path, help="an artifact directory instead of exporting")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory")
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="scene seed")
    parser.add_argument("--voxels", type=int, default=DEFAULT_VOXELS, help="scene size")
    parser.add_argument("--no-fixtures", action="store_true", help="skip the fixture replay")
    return parser


def _device(choice: str) -> str:
    if choice != "auto":
        return choice
    import mlx.core as mx

    has_gpu = any(getattr(mx, b).is_available() for b in ("metal", "cuda") if hasattr(mx, b))
    return "gpu" if has_gpu else "cpu"


def run_demo(args: argparse.Namespace) -> int:
    """The demo proper; returns the exit status."""
    stages = Stages()
    out: Path = args.out
    inputs = [p for p in (args.input, args.artifact) if p is not None]
    # What the demo writes never replaces, or lands inside, what it reads
    # (``--artifact A --out A`` would add files to the user's bundle).
    check_outputs(_outputs(out, args), inputs)
    if out.exists() and not out.is_dir():
        raise DemoError(f"--out {str(out)!r} is a file; name a directory for the demo's outputs")
    device = _device(args.device)
    name = args.model
    shown = name if args.artifact is None else f"artifact {args.artifact}"

    with stages("scene"):
        if args.input is not None:
            scene = seg.scene_from_points(seg.load_point_cloud(args.input))
            scene_text = f"{args.input} ({len(scene.points)} points, {len(scene.coords)} voxels)"
        else:
            scene = seg.make_scene(args.seed, n_voxels=args.voxels)
            scene_text = (
                f"generated scene seed {args.seed} ({len(scene.coords)} voxels, "
                f"{len(scene.points)} points, labelled)"
            )
    out.mkdir(parents=True, exist_ok=True)  # once the input is known to be usable
    model = None
    if args.artifact is None:
        with stages("load trained model"):
            model = seg.load_trained_model(name)
        paths = _export(name, model, scene, out, stages)
    else:
        paths = {"user": args.artifact}

    variants = []
    kind = "voxels"
    for variant, path in paths.items():
        result = VariantResult(variant, path)
        _verify(result, stages)
        torch_run, mlx_run, kind = _run_variant(result, scene, device, stages)
        _score(result, {"torch": torch_run, "mlx": mlx_run}, scene, kind)
        variants.append(result)

    eager_miou = None
    labels = scene.labels if kind == "voxels" else scene.point_labels
    if model is not None:
        with stages("run eager f32 (torch)"):
            eager_pred = _eager_predictions(name, model, scene)
        if np.any(labels >= 0):
            eager_miou = seg.mean_iou(eager_pred, labels)
    else:
        eager_pred = variants[0].predictions.get("torch", np.full(len(labels), -1))

    replays: dict[str, ReplayResult] = {}
    if not args.no_fixtures and args.artifact is None:
        for variant in seg.VARIANTS:
            archive = seg.fixture_path(name, variant)
            with stages(f"replay fixtures {variant} (mlx)"):
                replays[f"{name}-{variant}"] = replay_archive(
                    archive, device=device, progress=False
                )

    ok = (
        all(v.verified for v in variants)
        and all(v.agreement is not None and v.agreement.passed for v in variants)
        and all(r.passed for r in replays.values())
    )
    truth_title = "ground truth" if np.any(labels >= 0) else "torch eager f32 prediction"
    truth = labels if np.any(labels >= 0) else eager_pred
    with stages("picture"):
        _draw(out / "demo.png", shown, scene, kind, truth, truth_title, variants, replays)
    report = {
        "report_format": DEMO_REPORT_FORMAT,
        "report_version": DEMO_REPORT_VERSION,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "passed": ok,
        "model": name,
        "device": device,
        "platform": platform.platform(),
        "scene": {
            "description": scene_text,
            "voxels": len(scene.coords),
            "points": len(scene.points),
            "labelled": bool(np.any(labels >= 0)),
            "class_counts": dict(
                zip(
                    seg.CLASS_NAMES,
                    np.bincount(labels[labels >= 0], minlength=4).tolist(),
                    strict=False,
                )
            ),
        },
        "artifacts": {
            v.name: {
                "path": str(v.path),
                "verified": v.verified,
                "abi": v.abi,
                "op_counts": v.op_counts,
                "weight_bytes": v.weight_bytes,
                "packed_weights": v.packed_weights,
                "torch_vs_mlx": None if v.agreement is None else v.agreement.as_dict(),
                "miou": v.miou,
                "iou": {k: dict(zip(seg.CLASS_NAMES, x, strict=True)) for k, x in v.iou.items()},
                "compute_s": v.run_s,
            }
            for v in variants
        },
        "eager_f32_miou": eager_miou,
        "fixtures": {
            label: {
                "archive": str(r.archive),
                "summary": r.summary(),
                "error": r.error,
                **_fixture_stats(r),
            }
            for label, r in replays.items()
        },
        "stages_s": stages.times,
    }
    write_json_atomic(out / "report.json", _json_clean(report), inputs=inputs)
    _print_report(shown, scene_text, variants, eager_miou, replays, stages, out, ok)
    for replay in replays.values():
        if not replay.passed:
            print(printable(format_table(replay), multiline=True))  # case names
    return 0 if ok else 1


def _outputs(out: Path, args: argparse.Namespace) -> list[Path]:
    """Every path the demo writes under ``--out``."""
    written = [out / "report.json", out / "demo.png"]
    if args.artifact is None:
        written += [out / f"{args.model}-{variant}.lattice" for variant in seg.VARIANTS]
    return written


def _json_clean(value: Any) -> Any:
    """JSON-safe copy: numpy scalars to Python, non-finite floats to null, paths to str."""
    if isinstance(value, dict):
        return {str(k): _json_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice demo``."""
    args = build_parser().parse_args(argv)
    try:
        return run_demo(args)
    except (DemoError, RuntimeUnavailable, OSError, ValueError) as exc:
        log.error("lattice demo: %s", exc)
        return EXIT_USAGE

"""``conformance geometry-profile``: the neural bpp estimate of the fixed geometry profile.

Usage::

    conformance geometry-profile --weights W --input cloud.ply [--levels 8]
                                 [--device cpu|gpu|metal] [--runtime mlx|torch]
                                 [--repeat 5] [--warmup 1] [--threads 1]
                                 [--codec context|model|off] [--report r.json]

The input cloud is read and voxelised into a ``2^L`` grid (a cloud already
holding integer coordinates inside the grid is taken as is), its occupancy
hierarchy is built down to the root, and the fixed profile model
(:class:`torch_lattice.geometry.GeometryModel`) predicts every coded child bit
level by level, coarsest first, teacher-forced with the true child level.  The
neural bpp estimate is ``sum(-log2 p) / P`` over all coded child bits, with
``P`` the number of points in the input file; beside it stands the octree
baseline, 8 bits for every occupied parent (the uncompressed occupancy codes).

``--runtime mlx`` (the default) executes the model's verified artifact with
``mlx_lattice``: ``W`` is the artifact's ``weights.safetensors`` (the
``graph.mlir`` beside it is used) or the artifact directory; bare weights with
no graph beside them are exported to a temporary artifact through the torch
exporter first.  ``--runtime torch`` runs the eager ``torch_lattice`` model
built from the same weights.  The two estimates agree to well within 1e-3
relative (the tests check it).

**Timed region** (median over ``--repeat`` runs after ``--warmup`` untimed ones,
default 5 and 1), per run:

1. the FOG hierarchy: ``L`` occupancy downsamplings of the voxelised cloud,
   each level in Morton (canonical) order, with its child-occupancy codes;
2. for every level transition: wrapping the parent and child rows (already
   unique and ordered, so without validation) as the two sparse inputs with a
   constant feature, the model forward (conv stack, generative expansion to
   the 8 candidates, logits, label gather, ``-log2 p`` and its sum, all in the
   artifact graph), and
3. the wait for the last result (MLX evaluation / CUDA synchronisation) and
   the per-level bit counts copied to the host.

Outside it: PLY parsing, voxelisation of the points and upload to the device
(the sparse input construction), loading or exporting the weights and
compiling the artifact, and the codec run below (timed on its own).

**What a user has instead** (after the timed runs, on the same voxel set):
the geometry codec's real file (``conformance geometry-codec``; ``--codec
context`` uses its non-neural methods, ``--codec model`` adds the artifact's
neural methods, ``off`` skips it), encoded, decoded and checked, with its
encode and decode wall times, next to LZMA (xz preset 9e) of the octree byte
stream, its order-0 entropy and Draco (DracoPy, lossless at the level's
quantisation bits; a note when it is not installed), all in bits per occupied
voxel.  The numbers come from the codec's own measurement function, so the
profile and ``geometry-codec encode`` print the same thing.

**Threads**: torch runs with ``--threads`` threads (default 1: deterministic,
and on a shared CPU far faster than the default pool); the setting is
restored afterwards and recorded in the report.

Exit status: 0 on success, 2 when the input, weights or device cannot be used.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from lattice_contract.artifact import (
    OutputClashError,
    WriterLockedError,
    atomic_write_file,
    check_outputs,
    printable,
)
from lattice_contract.plan import ArtifactCapabilityError

from lattice_conformance.ply import PlyFormatError, read_ply

REPORT_FORMAT = "lattice-geometry-profile"
REPORT_VERSION = 1
DEFAULT_LEVELS = 8
ARTIFACT_INPUTS = ("parents", "children")

TIMED_REGION = (
    "FOG hierarchy (L occupancy downsamplings with Morton order and child codes) + per level: "
    "trusted sparse inputs from the hierarchy rows, model forward with in-graph -log2 p sum + "
    "final device sync and copy of the per-level bits to the host"
)
UNTIMED = (
    "PLY parsing, voxelisation and upload of the input cloud, weight loading / export, "
    "artifact compilation; the geometry codec run and the baselines (timed on their own)"
)


class GeometryProfileError(ValueError):
    """The profile cannot run (bad input, weights or device); the message says why."""


# ---------------------------------------------------------------------------
# Results.


@dataclass(frozen=True)
class LevelResult:
    """One transition ``level -> level + 1``: parents coded, children found, bits spent."""

    level: int
    parents: int
    children: int
    bits: float
    octree_bits: int


@dataclass
class ProfileResult:
    """Everything the command reports (also the JSON report's body)."""

    runtime: str
    device: str
    input: str
    levels: int
    points: int
    voxels: int
    per_level: list[LevelResult]
    timed_runs_s: list[float]
    hierarchy_runs_s: list[float]
    model_runs_s: list[float]
    quantised_fit: bool
    warmup_runs: int = 0
    setup_s: dict[str, float] = field(default_factory=dict)
    torch_threads: int = 1
    codec: dict[str, Any] | None = None

    @property
    def bits_per_voxel(self) -> float:
        """The neural estimate per occupied voxel (the codec's unit), not per input point."""
        return self.total_bits / max(self.voxels, 1)

    @property
    def total_bits(self) -> float:
        return math.fsum(level.bits for level in self.per_level)

    @property
    def octree_bits(self) -> int:
        return sum(level.octree_bits for level in self.per_level)

    @property
    def bpp(self) -> float:
        return self.total_bits / self.points

    @property
    def octree_bpp(self) -> float:
        return self.octree_bits / self.points

    @property
    def timed_median_s(self) -> float:
        return statistics.median(self.timed_runs_s)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "runtime": self.runtime,
            "device": self.device,
            "input": self.input,
            "levels": self.levels,
            "points": self.points,
            "voxels": self.voxels,
            "quantised_fit": self.quantised_fit,
            "neural_bits": self.total_bits,
            "neural_bpp": self.bpp,
            "octree_bits": self.octree_bits,
            "octree_bpp": self.octree_bpp,
            "ratio_to_octree": self.total_bits / self.octree_bits if self.octree_bits else None,
            "neural_bits_per_voxel": self.bits_per_voxel,
            "codec": self.codec,
            "torch_threads": self.torch_threads,
            "per_level": [asdict(level) for level in self.per_level],
            "timing": {
                "timed_region": TIMED_REGION,
                "excluded": UNTIMED,
                "median_s": self.timed_median_s,
                "runs_s": self.timed_runs_s,
                "warmup_runs": self.warmup_runs,
                "hierarchy_median_s": statistics.median(self.hierarchy_runs_s),
                "model_median_s": statistics.median(self.model_runs_s),
                "setup_s": self.setup_s,
            },
            "host": {"python": platform.python_version(), "machine": platform.machine()},
        }


# ---------------------------------------------------------------------------
# Runtimes.


@dataclass(frozen=True)
class _Run:
    bits: list[float]
    counts: list[int]
    hierarchy_s: float
    model_s: float


class _Profiler(Protocol):
    def prepare(self, points: np.ndarray) -> tuple[Any, int, bool]: ...

    def run(self, coords: Any) -> _Run: ...


def _fits_grid(points: np.ndarray, levels: int) -> bool:
    side = float(1 << levels)
    return bool(np.all((points >= 0) & (points < side)) and np.all(points == np.floor(points)))


def _artifact_dir(weights: Path) -> Path | None:
    """The artifact directory W names (the directory, or the one holding W), if any."""
    if weights.is_dir():
        if not (weights / "graph.mlir").is_file():
            raise GeometryProfileError(
                f"{weights} is a directory without graph.mlir; pass an artifact directory or "
                "a weights.safetensors file"
            )
        return weights
    if not weights.is_file():
        raise GeometryProfileError(f"weights {str(weights)!r} do not exist")
    if weights.name == "weights.safetensors" and (weights.parent / "graph.mlir").is_file():
        return weights.parent
    return None


def _weights_file(weights: Path) -> Path:
    found = _artifact_dir(weights)
    return found / "weights.safetensors" if found is not None else weights


def _metal_device(runtime: str) -> str:
    """``--device metal``: MLX's GPU when it is Metal, else an error that says there is none.

    Metal is Apple's GPU API; MLX uses it on Apple silicon.  Elsewhere (an
    NVIDIA machine, a CPU-only install) ``metal`` is refused rather than run
    on another device under its name.
    """
    if runtime != "mlx":
        raise GeometryProfileError(
            f"--device metal runs MLX's Metal backend, not the {runtime} runtime; use "
            "--runtime mlx, or --device gpu / cpu"
        )
    import mlx.core as mx

    if not mx.metal.is_available():
        raise GeometryProfileError(
            "--device metal needs MLX's Metal backend (Apple silicon), and this machine has "
            "none; use --device cpu, or --device gpu where MLX has a CUDA backend"
        )
    return "gpu"


class _MLXProfiler:
    """Runs the verified artifact with mlx_lattice, one program call per level."""

    def __init__(self, weights: Path, levels: int, device: str) -> None:
        import mlx.core as mx

        if device == "gpu":
            if not mx.is_available(mx.gpu):
                raise GeometryProfileError(
                    "this MLX install has no GPU backend (mlx[cpu]); use --device cpu, or "
                    "install mlx[cuda13] (NVIDIA) / mlx (macOS, Metal)"
                )
            mx.set_default_device(mx.gpu)
        else:
            mx.set_default_device(mx.cpu)
        from mlx_lattice.artifact import load_lattice_program

        self._mx = mx
        self.levels = levels
        self.setup: dict[str, float] = {}
        start = time.perf_counter()
        artifact = _artifact_dir(weights)
        if artifact is None:
            with tempfile.TemporaryDirectory(prefix="geometry-") as tmp:
                exported = Path(tmp) / "model.lattice"
                _export_from_weights(weights, exported)
                self.setup["export_s"] = time.perf_counter() - start
                self.program = load_lattice_program(exported)
        else:
            from torch_lattice.geometry import load_geometry_model

            # the proof that makes MLX's logits torch's, run on the weights this program holds
            # (ValueError naming the layer, or an artifact that predates the level features)
            load_geometry_model(artifact / "weights.safetensors")
            self.program = load_lattice_program(artifact)
        self.setup["load_s"] = time.perf_counter() - start
        names = tuple(item.name for item in self.program.logical_inputs)
        outputs = tuple(item.abi_name for item in self.program.outputs)
        if names != ARTIFACT_INPUTS or "bits" not in outputs:
            raise GeometryProfileError(
                f"the artifact takes {names} and returns {outputs}; a geometry profile artifact "
                f"takes {ARTIFACT_INPUTS} and returns 'bits' (export it with "
                "torch_lattice.geometry.export_geometry_artifact)"
            )
        self._bits_index = outputs.index("bits")

    def prepare(self, points: np.ndarray) -> tuple[Any, int, bool]:
        from mlx_lattice.occupancy import quantize_points

        fit = not _fits_grid(points, self.levels)
        coords = quantize_points(points, self.levels, fit=fit)
        self._mx.eval(coords)
        return coords, int(coords.shape[0]), fit

    def run(self, coords: Any) -> _Run:
        mx = self._mx
        from mlx_lattice import SparseTensor
        from mlx_lattice.occupancy import occupancy_hierarchy
        from torch_lattice.geometry import level_features

        start = time.perf_counter()
        hierarchy = occupancy_hierarchy(coords, self.levels, assume_canonical=True)
        mx.eval(list(hierarchy.levels))
        built = time.perf_counter()
        scale = mx.array([1, 2, 2, 2], dtype=mx.int32)
        per_level = []
        for level in range(self.levels):
            parents = hierarchy.levels[level]
            children = hierarchy.levels[level + 1]
            row = np.asarray(level_features(level, self.levels), np.float32)
            feats = mx.array(np.tile(row, (parents.shape[0], 1)))
            p = SparseTensor.trusted(parents * scale, feats, stride=2)
            c = SparseTensor.trusted(
                children, mx.ones((children.shape[0], 1), dtype=mx.float32), stride=1
            )
            outputs = self.program.call_with_trusted_sparse_inputs(p, c)
            per_level.append(mx.sum(outputs[self._bits_index]))
        totals = mx.stack(per_level)
        mx.eval(totals)
        bits = [float(v) for v in np.asarray(totals).astype(np.float64)]
        done = time.perf_counter()
        return _Run(bits, hierarchy.counts(), built - start, done - built)


class _TorchProfiler:
    """Runs the eager torch_lattice GeometryModel built from the same weights."""

    def __init__(self, weights: Path, levels: int, device: str) -> None:
        import torch

        if device == "gpu":
            if not torch.cuda.is_available():
                raise GeometryProfileError("torch has no CUDA device here; use --device cpu")
            self._device = torch.device("cuda")
        else:
            self._device = torch.device("cpu")
        from torch_lattice.geometry import load_geometry_model

        self._torch = torch
        self.levels = levels
        start = time.perf_counter()
        self.model = load_geometry_model(_weights_file(weights), device=str(self._device))
        self.setup = {"load_s": time.perf_counter() - start}

    def _sync(self) -> None:
        if self._device.type == "cuda":
            self._torch.cuda.synchronize()

    def prepare(self, points: np.ndarray) -> tuple[Any, int, bool]:
        from torch_lattice.occupancy import quantize_points

        fit = not _fits_grid(points, self.levels)
        pts = self._torch.from_numpy(np.ascontiguousarray(points)).to(self._device)
        coords = quantize_points(pts, self.levels, fit=fit)
        self._sync()
        return coords, int(coords.shape[0]), fit

    def run(self, coords: Any) -> _Run:
        torch = self._torch
        from torch_lattice.geometry import level_inputs
        from torch_lattice.occupancy import occupancy_hierarchy

        start = time.perf_counter()
        hierarchy = occupancy_hierarchy(coords, self.levels, assume_canonical=True)
        self._sync()
        built = time.perf_counter()
        per_level = []
        with torch.no_grad():
            for level in range(self.levels):
                parents, children = level_inputs(
                    hierarchy.levels[level],
                    hierarchy.levels[level + 1],
                    level=level,
                    levels=self.levels,
                )
                _, level_bits = self.model(parents, children)
                per_level.append(level_bits.sum())
            totals = torch.stack(per_level).to(torch.float64).cpu()
        bits = [float(v) for v in totals.tolist()]
        done = time.perf_counter()
        return _Run(bits, hierarchy.counts(), built - start, done - built)


def _export_from_weights(weights: Path, dest: Path) -> None:
    from torch_lattice.geometry import export_geometry_artifact, load_geometry_model

    export_geometry_artifact(load_geometry_model(weights), dest)


def _profiler(runtime: str, weights: Path, levels: int, device: str) -> _Profiler:
    try:
        if runtime == "mlx":
            return _MLXProfiler(weights, levels, device)
        return _TorchProfiler(weights, levels, device)
    except GeometryProfileError:
        raise
    except (ValueError, OSError) as exc:
        raise GeometryProfileError(f"cannot load the weights {str(weights)!r}: {exc}") from exc
    except ArtifactCapabilityError as exc:  # no native lattice_mlir module
        raise GeometryProfileError(
            f"cannot run the artifact: {exc}; build the native module (./dev) or use "
            "--runtime torch"
        ) from exc


def run_profile(
    weights: str | os.PathLike[str],
    input_path: str | os.PathLike[str],
    *,
    levels: int = DEFAULT_LEVELS,
    runtime: str = "mlx",
    device: str = "cpu",
    repeat: int = 5,
    warmup: int = 1,
    threads: int = 1,
    codec: str = "context",
) -> ProfileResult:
    """Run the geometry profile and return its measurements (see the module docstring)."""
    if codec not in ("context", "model", "off"):
        raise GeometryProfileError(f"codec must be 'context', 'model' or 'off', got {codec!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise GeometryProfileError(f"threads must be a positive int, got {threads!r}")
    if runtime not in ("mlx", "torch"):
        raise GeometryProfileError(f"runtime must be 'mlx' or 'torch', got {runtime!r}")
    if device not in ("cpu", "gpu", "metal"):
        raise GeometryProfileError(f"device must be 'cpu', 'gpu' or 'metal', got {device!r}")
    if device == "metal":
        device = _metal_device(runtime)
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= 16:
        raise GeometryProfileError(f"levels must be an int in [1, 16], got {levels!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise GeometryProfileError(f"repeat must be a positive int, got {repeat!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise GeometryProfileError(f"warmup must be an int >= 0, got {warmup!r}")
    source = Path(input_path)
    try:
        points = read_ply(source)
    except (FileNotFoundError, PlyFormatError) as exc:
        raise GeometryProfileError(str(exc)) from None
    if points.shape[0] == 0:
        raise GeometryProfileError(f"{source}: the cloud has no points")
    if not np.all(np.isfinite(points)):
        raise GeometryProfileError(f"{source}: the cloud holds NaN or infinite coordinates")
    import torch

    saved_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        profiler = _profiler(runtime, Path(weights), levels, device)
        coords, voxels, fit = profiler.prepare(points)
        runs = [profiler.run(coords) for _ in range(warmup + repeat)][warmup:]
        measured = None if codec == "off" else _codec(coords, levels, runtime, weights, codec)
    finally:
        torch.set_num_threads(saved_threads)
    last = runs[-1]
    per_level = [
        LevelResult(
            level=level,
            parents=last.counts[level],
            children=last.counts[level + 1],
            bits=last.bits[level],
            octree_bits=8 * last.counts[level],
        )
        for level in range(levels)
    ]
    return ProfileResult(
        runtime=runtime,
        device=device,
        input=str(source),
        levels=levels,
        points=int(points.shape[0]),
        voxels=voxels,
        per_level=per_level,
        timed_runs_s=[r.hierarchy_s + r.model_s for r in runs],
        hierarchy_runs_s=[r.hierarchy_s for r in runs],
        model_runs_s=[r.model_s for r in runs],
        quantised_fit=fit,
        warmup_runs=warmup,
        setup_s=dict(getattr(profiler, "setup", {})),
        torch_threads=threads,
        codec=measured,
    )


def _codec(
    coords: Any, levels: int, runtime: str, weights: str | os.PathLike[str], codec: str
) -> dict[str, Any]:
    """The codec's file and the baselines on the profiled voxel set (host copy of ``coords``)."""
    from lattice_conformance.codec import NeuralModel
    from lattice_conformance.codec.baselines import codec_measurement

    rows = np.asarray(coords.cpu() if hasattr(coords, "cpu") else coords)[:, 1:]
    model = None
    if codec == "model":
        artifact = _artifact_dir(Path(weights))
        if artifact is None:
            raise GeometryProfileError(
                "--codec model needs the artifact directory (graph.mlir beside the weights); "
                "pass it as --weights, or use --codec context"
            )
        model = NeuralModel(artifact, runtime)
    measured = codec_measurement(rows.astype(np.int64), levels, model)
    measured.pop("data")
    measured["codec_methods"] = codec
    return measured


# ---------------------------------------------------------------------------
# Command line.


def _table(result: ProfileResult) -> str:
    lines = [
        f"geometry profile: {printable(result.input)}  ({result.points} points -> "
        f"{result.voxels} voxels "
        f"in a {1 << result.levels}^3 grid{', rescaled to fit' if result.quantised_fit else ''})",
        f"runtime {result.runtime} on {result.device}",
        "",
        f"{'level':>5} {'parents':>9} {'children':>9} {'bits':>12} {'bits/parent':>11} "
        f"{'octree bits':>12}",
    ]
    for lv in result.per_level:
        lines.append(
            f"{lv.level:>5} {lv.parents:>9} {lv.children:>9} {lv.bits:>12.1f} "
            f"{lv.bits / lv.parents:>11.3f} {lv.octree_bits:>12}"
        )
    lines += [
        "",
        f"neural bpp estimate : {result.bpp:.4f}  ({result.total_bits:.1f} bits / "
        f"{result.points} points)",
        f"octree baseline     : {result.octree_bpp:.4f}  (8 bits per occupied parent)",
        f"ratio               : {result.total_bits / result.octree_bits:.3f} of the octree",
        f"neural estimate     : {result.bits_per_voxel:.4f} bits per occupied voxel",
        "",
        f"timed region        : median {result.timed_median_s * 1e3:.1f} ms over "
        f"{len(result.timed_runs_s)} runs (hierarchy "
        f"{statistics.median(result.hierarchy_runs_s) * 1e3:.1f} ms, model "
        f"{statistics.median(result.model_runs_s) * 1e3:.1f} ms)",
        f"  inside            : {TIMED_REGION}",
        f"  outside           : {UNTIMED}",
        f"torch threads       : {result.torch_threads}",
    ]
    if result.codec is not None:
        from lattice_conformance.codec.baselines import format_bits_per_voxel

        lines += [
            "",
            f"geometry codec ({result.codec['codec_methods']} methods; {result.codec['mode']}, "
            f"levels: {' '.join(result.codec['methods'])}), decoded and checked:",
            format_bits_per_voxel(result.codec),
        ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance geometry-profile",
        description="Neural bpp estimate of the fixed occupancy-hierarchy geometry model.",
    )
    parser.add_argument("--weights", required=True, type=Path, help="weights.safetensors or dir")
    parser.add_argument("--input", required=True, type=Path, help="point cloud (.ply)")
    parser.add_argument("--levels", type=int, default=DEFAULT_LEVELS, help="grid depth L")
    parser.add_argument(
        "--device",
        choices=("cpu", "gpu", "metal"),
        default="cpu",
        help="metal: MLX's Metal GPU (Apple silicon), mlx-lattice 0.6's spelling",
    )
    parser.add_argument("--runtime", choices=("mlx", "torch"), default="mlx")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before them")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--codec",
        choices=("context", "model", "off"),
        default="context",
        help="also encode/decode with the geometry codec (model: with the artifact's methods)",
    )
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``conformance geometry-profile``."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    log = logging.getLogger(__name__)
    inputs = [args.weights, args.input]
    try:  # the report never replaces (or lands in) the weights or the cloud
        check_outputs([args.report] if args.report is not None else [], inputs)
    except OutputClashError as exc:
        log.error("conformance geometry-profile: error: %s", exc)
        return 2
    try:
        result = run_profile(
            args.weights,
            args.input,
            levels=args.levels,
            runtime=args.runtime,
            device=args.device,
            repeat=args.repeat,
            warmup=args.warmup,
            threads=args.threads,
            codec=args.codec,
        )
    except GeometryProfileError as exc:
        log.error("conformance geometry-profile: error: %s", exc)
        return 2
    print(printable(_table(result), multiline=True))  # the cloud's file name
    if args.report is not None:
        text = json.dumps(result.as_dict(), indent=2) + "\n"
        try:
            atomic_write_file(
                args.report, lambda tmp: tmp.write_text(text, encoding="utf-8"), inputs=inputs
            )
        except (OSError, ValueError, WriterLockedError) as exc:
            log.error("conformance geometry-profile: cannot write the report: %s", exc)
            return 2
    return 0

"""``conformance replay``: run a fixture archive on MLX and judge every case.

Usage::

    conformance replay ARCHIVE --report report.json [--plot errors.png]
                       [--device cpu|gpu] [--runtime mlx|torch] [--no-progress]

For every case the artifact is called on the exact stored inputs; each output
is compared with the expected one (sparse: canonical order, exact
coordinates and stride, then features within ``atol + rtol * |expected|``;
dense: exact shape, then values).  A table goes to stdout, a progress bar to
stderr for suites of ten cases or more, and the JSON report (format in
``docs/conformance-report.md``) to ``--report``.

Exit status: 0 when every case passes, 1 when any case fails its
comparison, 2 when the archive or artifact cannot be used at all or a case
is rejected (its arrays unreadable, the runtime refusing the call) -- the
reason is printed and, with ``--report``, recorded; a report is written
whatever happens, even on an internal error.  The graph is first verified
natively in a child process (:mod:`lattice_conformance.native_check`), so a
graph that crashes the parser is a recorded failure, not a dead replayer,
and the extraction directory is always removed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import numpy as np
from lattice_contract.artifact import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    OutputClashError,
    WriterLockedError,
    atomic_write_file,
    check_outputs,
    fingerprint,
    printable,
)
from lattice_contract.dialect import WEIGHT_FILE

from lattice_conformance.archive import (
    FixtureArchiveError,
    SparseArrays,
    open_fixture_archive,
)
from lattice_conformance.metrics import OutputResult, compare_dense, compare_sparse
from lattice_conformance.native_check import native_verification_crash
from lattice_conformance.runners import Runner, RuntimeUnavailable, make_runner

REPORT_FORMAT: Final = "lattice-conformance-report"
REPORT_VERSION: Final = 1
log = logging.getLogger(__name__)

PROGRESS_MIN_CASES: Final = 10
"""Suites at least this long get a progress bar on stderr."""
PROGRESS_MIN_WEIGHT_BYTES: Final = 32 << 20
"""... and so do archives of large models (weights of at least this size), whose every
case takes long enough that a silent terminal looks hung."""


# ---------------------------------------------------------------------------
# Results.


@dataclass
class CaseResult:
    name: str
    description: str
    atol: float
    rtol: float
    passed: bool
    reasons: list[str]
    outputs: list[OutputResult]
    load_s: float = 0.0
    prepare_s: float = 0.0
    compute_s: float = 0.0
    convert_s: float = 0.0
    compare_s: float = 0.0
    rejected: bool = False
    """The case could not run at all (unreadable arrays, a runtime refusal)."""

    @property
    def status(self) -> str:
        """``passed``, ``failed`` (outputs off) or ``rejected`` (never compared)."""
        return "passed" if self.passed else ("rejected" if self.rejected else "failed")

    @property
    def overhead_s(self) -> float:
        """Replay's own time for the case: everything except the runtime's compute."""
        return self.load_s + self.prepare_s + self.convert_s + self.compare_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "passed": self.passed,
            "status": self.status,
            "reasons": self.reasons,
            "atol": self.atol,
            "rtol": self.rtol,
            "outputs": [o.as_dict() for o in self.outputs],
            "timing": {
                "load_s": self.load_s,
                "prepare_s": self.prepare_s,
                "compute_s": self.compute_s,
                "convert_s": self.convert_s,
                "compare_s": self.compare_s,
                "overhead_s": self.overhead_s,
            },
        }


@dataclass
class ReplayResult:
    archive: Path
    runtime: str
    device: str
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None
    archive_sha256: str = ""
    format_version: int | None = None
    producer: dict[str, Any] = field(default_factory=dict)
    op_counts: dict[str, int] = field(default_factory=dict)
    abi: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    open_s: float = 0.0
    compile_s: float = 0.0
    total_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.cases) and all(c.passed for c in self.cases)

    @property
    def exit_code(self) -> int:
        """0 every case passed; 1 a case failed its comparison; 2 unusable input.

        Unusable input: the archive or its artifact could not be used, or a
        case's inputs were rejected (unreadable arrays, a runtime refusing them).
        """
        if self.error is not None or any(c.rejected for c in self.cases):
            return EXIT_USAGE
        return EXIT_OK if self.passed else EXIT_FAILED

    def summary(self) -> dict[str, Any]:
        outputs = [o for c in self.cases for o in c.outputs]
        sparse = [o for o in outputs if o.coordinates is not None]

        def worst(kind: str) -> float | None:
            values = [
                getattr(o, kind).max
                for o in outputs
                if getattr(o, kind) is not None and np.isfinite(getattr(o, kind).max)
            ]
            return max(values) if values else None

        return {
            "cases": len(self.cases),
            "passed": sum(c.passed for c in self.cases),
            "failed": sum(not c.passed for c in self.cases),
            "rejected": sum(c.rejected for c in self.cases),
            "all_passed": self.passed,
            "sparse_outputs": len(sparse),
            "coordinates_equal": all(
                o.coordinates is not None and o.coordinates.equal for o in sparse
            ),
            "max_abs_error": worst("abs_error"),
            "max_rel_error": worst("rel_error"),
            "compute_s": sum(c.compute_s for c in self.cases),
            "overhead_s": sum(c.overhead_s for c in self.cases),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "report_format": REPORT_FORMAT,
            "report_version": REPORT_VERSION,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "archive": {
                "path": str(self.archive),
                "sha256": self.archive_sha256,
                "format_version": self.format_version,
                "producer": self.producer,
            },
            "runtime": {
                "name": self.runtime,
                "device": self.device,
                "versions": _versions(self.runtime),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "artifact": {"op_counts": self.op_counts, "abi": self.abi},
            "timing": {"open_s": self.open_s, "compile_s": self.compile_s, "total_s": self.total_s},
            "error": self.error,
            "summary": self.summary(),
            "cases": [c.as_dict() for c in self.cases],
        }


def _versions(runtime: str) -> dict[str, str]:
    from importlib import metadata

    from lattice_contract.artifact import DISTRIBUTIONS, distribution_version

    packages = ["lattice_conformance", "lattice_contract"]
    packages += ["mlx_lattice"] if runtime == "mlx" else ["torch_lattice"]
    out = {DISTRIBUTIONS[name]: distribution_version(name) for name in packages}
    for name in ["numpy", "mlx" if runtime == "mlx" else "torch"]:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


# ---------------------------------------------------------------------------
# Progress bar (tqdm).


class Progress:
    """The replay's bar (tqdm on ``stream``): cases done, elapsed time, failures so far.

    On a terminal tqdm redraws one line; into a file or pipe it writes a
    line at most every few seconds, so logs stay short.
    """

    def __init__(self, total: int, stream: IO[str], enabled: bool) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=total,
            desc="replay",
            unit="case",
            file=stream,
            disable=not enabled,
            leave=True,
            mininterval=0.5 if getattr(stream, "isatty", lambda: False)() else 5.0,
            dynamic_ncols=True,
        )

    def update(self, done: int, label: str, failed: int) -> None:
        self._bar.set_postfix_str(f"failed {failed}  {label[:40]}", refresh=False)
        self._bar.update(done - self._bar.n)
        if done >= self._bar.total:
            self._bar.close()


# ---------------------------------------------------------------------------
# Replay.


def _compare(spec_outputs: Sequence[Any], case: Any, actual: Sequence[Any]) -> list[OutputResult]:
    results = []
    for out_spec, got in zip(spec_outputs, actual, strict=True):
        expected = case.expected[out_spec.name]
        got_kind = "sparse" if isinstance(got.value, SparseArrays) else "dense"
        compare = compare_sparse if got_kind == "sparse" else compare_dense
        if got_kind != out_spec.kind:
            result = OutputResult(
                out_spec.name, out_spec.kind, False, [], case.atol, case.rtol, out_spec.dtype, ""
            )
            result.reasons.append(
                f"kind: expected a {out_spec.kind} output, the runtime returned {got_kind}"
            )
        else:
            result = compare(
                out_spec.name,
                got.value,
                expected,
                atol=case.atol,
                rtol=case.rtol,
                expected_dtype=out_spec.dtype,
                actual_dtype=got.dtype,
            )
        results.append(result)
    return results


def replay_archive(
    archive: str | os.PathLike[str],
    *,
    runtime: str = "mlx",
    device: str = "cpu",
    progress: bool | None = None,
    progress_stream: IO[str] | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    coords: str = "physical",
) -> ReplayResult:
    """Replay every case of ``archive`` on ``runtime`` and return the verdicts.

    Never raises for a bad archive, artifact or case: the problem is recorded
    in ``ReplayResult.error`` (archive-wide) or in a case's ``reasons``, so a
    report can always be written.  ``progress=None`` shows the bar for suites
    of at least :data:`PROGRESS_MIN_CASES` cases.  An upstream fixture tree
    (directory or ``.tar.gz``) is replayed by
    :func:`lattice_conformance.upstream_tree.replay_tree`, with ``coords``.
    """
    from lattice_conformance import upstream_tree

    if upstream_tree.is_upstream_tree(archive):
        return upstream_tree.replay_tree(
            archive, runtime=runtime, device=device, coords=coords, on_case=on_case
        )
    path = Path(archive)
    result = ReplayResult(archive=path, runtime=runtime, device=device)
    started = time.perf_counter()
    try:
        result.archive_sha256 = fingerprint(path)
    except (OSError, ValueError) as exc:  # ValueError: a FIFO or a device, never read
        result.error = f"cannot read {path}: {exc}"
        return result
    try:
        with open_fixture_archive(path) as fixtures:
            result.format_version = fixtures.format_version
            result.producer = fixtures.producer
            result.open_s = time.perf_counter() - started
            t0 = time.perf_counter()
            crash = native_verification_crash(fixtures.artifact_dir / "graph.mlir")
            if crash is not None:
                result.error = crash
                return result
            try:
                runner: Runner = make_runner(runtime, fixtures.artifact_dir, device)
            except RuntimeUnavailable as exc:
                result.error = str(exc)
                return result
            except Exception as exc:  # the artifact is refused: report, never crash
                result.error = (
                    f"the artifact does not load on {runtime}: {type(exc).__name__}: {exc}"
                )
                return result
            result.compile_s = time.perf_counter() - t0
            result.op_counts = runner.op_counts()
            result.abi = runner.abi()
            large = (
                fixtures.artifact_dir / WEIGHT_FILE
            ).stat().st_size >= PROGRESS_MIN_WEIGHT_BYTES
            auto = len(fixtures.cases) >= PROGRESS_MIN_CASES or large
            show = auto if progress is None else progress
            bar = Progress(len(fixtures.cases), progress_stream or sys.stderr, show)
            for index, spec in enumerate(fixtures.cases):
                case_result = _replay_case(fixtures, spec, runner)
                result.cases.append(case_result)
                if on_case is not None:
                    on_case(case_result)
                bar.update(index + 1, spec.name, sum(not c.passed for c in result.cases))
    except FixtureArchiveError as exc:
        result.error = str(exc)
    except Exception as exc:  # never lose the report to an unforeseen failure
        result.error = f"replay failed: {type(exc).__name__}: {exc}"
    finally:
        result.total_s = time.perf_counter() - started
    return result


def _replay_case(fixtures: Any, spec: Any, runner: Runner) -> CaseResult:
    t0 = time.perf_counter()
    outcome = CaseResult(spec.name, spec.description, spec.atol, spec.rtol, False, [], [])
    try:
        case = fixtures.load_case(spec)
    except FixtureArchiveError as exc:
        outcome.reasons.append(f"fixture: {exc}")
        outcome.rejected = True
        return outcome
    outcome.load_s = time.perf_counter() - t0
    dtypes = [spec.input_dtypes[name] for name in spec.input_names]
    try:
        run = runner.run([case.inputs[n] for n in spec.input_names], dtypes)
    except Exception as exc:  # a runtime refusal is a rejected case, not a crash
        outcome.reasons.append(f"runtime: {type(exc).__name__}: {exc}")
        outcome.rejected = True
        return outcome
    outcome.prepare_s, outcome.compute_s, outcome.convert_s = (
        run.prepare_s,
        run.compute_s,
        run.convert_s,
    )
    t1 = time.perf_counter()
    if len(run.outputs) != len(spec.outputs):
        outcome.reasons.append(
            f"outputs: the artifact returned {len(run.outputs)} values, the fixture expects "
            f"{len(spec.outputs)}"
        )
    else:
        outcome.outputs = _compare(spec.outputs, case, run.outputs)
        outcome.reasons += [f"{o.name}: {r}" for o in outcome.outputs for r in o.reasons]
    outcome.compare_s = time.perf_counter() - t1
    outcome.passed = not outcome.reasons
    return outcome


# ---------------------------------------------------------------------------
# Output: table and JSON (the PNG is lattice_conformance.plots).


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if not np.isfinite(value):
        return "inf"
    return "0" if value == 0 else f"{value:.2e}"


def format_table(result: ReplayResult) -> str:
    """A fixed-width table of every case-output plus a summary line.

    The case and output columns are as wide as the longest name, so names
    that differ only at the end (``quantized_classifier_int4`` / ``_int8``)
    stay apart however many cases a suite has.
    """
    case_w = max([4, *(len(c.name) for c in result.cases)])
    out_w = max([6, *(len(o.name) for c in result.cases for o in c.outputs)])
    header = (
        f"{'case':<{case_w}} {'output':<{out_w}} {'rows':>7} {'coords':<8} {'abs max':>9} "
        f"{'abs p99':>9} {'rel max':>9} {'atol':>8} {'rtol':>8} {'ms':>8}  result"
    )
    lines = [header, "-" * len(header)]
    for case in result.cases:
        ms = f"{case.compute_s * 1e3:8.1f}"
        verdict = "PASS" if case.passed else "FAIL"
        if not case.outputs:
            lines.append(
                f"{case.name:<{case_w}} {'-':<{out_w}} {'-':>7} {'-':<8} {'-':>9} {'-':>9} "
                f"{'-':>9} {case.atol:8.1e} {case.rtol:8.1e} {ms}  {verdict}"
            )
        for out in case.outputs:
            coords = "-"
            rows = "-"
            if out.coordinates is not None:
                coords = "equal" if out.coordinates.equal else f"{out.coordinates.rows_differing}≠"
                rows = str(out.coordinates.expected_rows)
            abs_e, rel_e = out.abs_error, out.rel_error
            lines.append(
                f"{case.name:<{case_w}} {out.name:<{out_w}} {rows:>7} {coords:<8} "
                f"{_fmt(abs_e.max if abs_e else None):>9} {_fmt(abs_e.p99 if abs_e else None):>9} "
                f"{_fmt(rel_e.max if rel_e else None):>9} {case.atol:8.1e} {case.rtol:8.1e} "
                f"{ms}  {'PASS' if out.passed else 'FAIL'}"
            )
    for case in result.cases:
        for reason in case.reasons:
            lines.append(f"  {case.name}: {reason}")
    s = result.summary()
    coords = (
        "n/a (no sparse outputs)"
        if not s["sparse_outputs"]
        else ("yes" if s["coordinates_equal"] else "NO")
    )
    if result.error is not None:
        lines.append(f"ERROR: {result.error}")
        if not result.cases:
            # Nothing ran: statistics ("0/0 passed", "no sparse outputs") would misdescribe
            # an archive that was never read.
            lines.append(f"no case replayed on {result.runtime} ({result.device})")
            return "\n".join(lines)
    lines.append(
        f"{s['passed']}/{s['cases']} cases passed on {result.runtime} ({result.device}); "
        f"coordinates equal: {coords}; "
        f"max abs error {_fmt(s['max_abs_error'])}; compute {s['compute_s']:.3f}s, "
        f"replay overhead {s['overhead_s']:.3f}s"
    )
    return "\n".join(lines)


def write_json_atomic(
    path: str | os.PathLike[str],
    payload: dict[str, Any],
    *,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> Path:
    """Write JSON to ``path`` atomically (:func:`~lattice_contract.artifact.atomic_write_file`).

    ``inputs`` are what the report describes (an archive, a tree): the report
    never replaces them or lands inside them.
    """
    text = json.dumps(payload, indent=2, allow_nan=False) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_file(
        path, lambda tmp: tmp.write_text(text, encoding="utf-8"), inputs=inputs
    )


PLOT_FORMATS: Final = ("png", "pdf", "svg")
"""What ``--plot`` writes, chosen by the file's suffix."""


def output_problem(args: argparse.Namespace) -> str | None:
    """Why ``--report``/``--plot`` cannot be written, checked before the replay runs."""
    outputs = [p for p in (args.report, args.plot) if p is not None]
    if args.plot is not None and args.plot.suffix.lstrip(".").lower() not in PLOT_FORMATS:
        return f"--plot {str(args.plot)!r}: the suffix picks the format; use one of " + ", ".join(
            f".{kind}" for kind in PLOT_FORMATS
        )
    try:
        check_outputs(outputs, [args.archive])
    except OutputClashError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------------------
# CLI.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance replay",
        description=(
            "Replay a fixture archive: run every case's exact inputs through the artifact and "
            "check exact coordinates and feature errors against the stored outputs."
        ),
    )
    parser.add_argument(
        "archive",
        type=Path,
        help="fixture archive (.tar.gz), or an upstream fixture tree (directory or .tar.gz)",
    )
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--plot", type=Path, help="write a PNG of the error distributions here")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument(
        "--runtime",
        choices=("mlx", "torch"),
        default="mlx",
        help="runtime to replay on (default mlx; torch replays the producer's own runtime)",
    )
    parser.add_argument(
        "--coords",
        choices=("physical", "lattice-units"),
        default="physical",
        help="upstream trees only: lattice-units multiplies sparse coordinates by the stride",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--progress", action="store_true", help="always show the progress bar")
    group.add_argument("--no-progress", action="store_true", help="never show it")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``conformance replay``; returns the exit status."""
    args = build_parser().parse_args(argv)
    problem = output_problem(args)
    if problem is not None:
        log.error("conformance replay: %s", problem)
        return EXIT_USAGE
    progress = True if args.progress else (False if args.no_progress else None)
    result = replay_archive(
        args.archive,
        runtime=args.runtime,
        device=args.device,
        progress=progress,
        coords=args.coords,
    )
    print(printable(format_table(result), multiline=True))  # case names come from the file
    if result.producer.get("coords") == "lattice-units":
        print("coordinates: sparse coordinates read in lattice units (multiplied by the stride)")
    if args.report is not None:
        try:
            write_json_atomic(args.report, result.as_dict(), inputs=[args.archive])
        except (OSError, ValueError, WriterLockedError) as exc:
            log.error("conformance replay: cannot write the report: %s", exc)
            return EXIT_USAGE
        log.info("report: %s", args.report)
    if args.plot is not None and result.cases:
        from lattice_conformance.plots import plot_replay_errors

        try:
            plot_replay_errors(result, args.plot)
        except (OSError, ValueError, WriterLockedError) as exc:
            log.error("conformance replay: cannot write the plot: %s", exc)
            return EXIT_USAGE
        log.info("plot:   %s", args.plot)
    if result.error is not None:
        log.error("conformance replay: %s", result.error)
    log.info(
        "stage times: open %.3f s, compile %.3f s, total %.3f s",
        result.open_s,
        result.compile_s,
        result.total_s,
    )
    return result.exit_code

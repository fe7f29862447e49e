"""Upstream fixture trees: mlx-lattice 0.6's ``torch_lattice_e2e_fixtures/v1`` for replay.

A tree is a directory (or a ``.tar.gz`` of one) holding ``manifest.json``
(``{"schema": "torch_lattice_e2e_fixtures/v1", "cases": [{"name",
"output_kind", "atol", "rtol", ...}]}``) and one directory per case with its
own artifact and tensors: ``graph.mlir``, ``weights.safetensors``,
``inputs.safetensors`` (one tensor per ``lattice.input_names`` entry) and
``expected.safetensors`` (per output ``out``: ``out`` when dense, or
``out.coords``, ``out.features``, ``out.active`` trimmed to the active rows).
Unlike a Lattice fixture archive, every case is its own artifact, so each
case is compiled on the runtime before it runs.

Trees whose graphs still carry upstream's schema digest are refused: they run
here after the explicit, one-time ``lattice migrate`` (nothing migrates at
load time).  Some upstream fixtures store sparse input coordinates in
lattice units (not divisible by their stride); with ``coords="lattice-units"``
every sparse input's coordinates -- and every expected sparse output's -- are
multiplied by the stride, and the report says so.  Upstream's expected files
carry no stride, so an expected sparse output takes the stride the runtime
reports; its coordinates are still compared exactly.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from lattice_contract.constants import GRAPH_FILE, KNOWN_PRODUCER_DIGESTS, WEIGHT_FILE
from safetensors import numpy as stnp

from lattice_conformance.archive import ArchiveLimits, FixtureArchiveError, SparseArrays
from lattice_conformance.metrics import OutputResult, compare_dense, compare_sparse
from lattice_conformance.native_check import native_verification_crash
from lattice_conformance.replay import CaseResult, ReplayResult
from lattice_conformance.runners import Runner, RuntimeUnavailable, make_runner
from lattice_conformance.safe_extract import extract_members, load_bounded_json

Array = npt.NDArray[Any]

TREE_SCHEMA: Final = "torch_lattice_e2e_fixtures/v1"
"""The ``schema`` of an upstream fixture tree's manifest."""

COORD_UNITS: Final = ("physical", "lattice-units")
"""How a tree's sparse coordinates are read: as stored, or multiplied by the stride."""


CASE_FILES: Final = (GRAPH_FILE, WEIGHT_FILE, "inputs.safetensors", "expected.safetensors")
MANIFEST: Final = "manifest.json"
_MANIFEST_LIMIT: Final = 1 << 20


class UpstreamTreeError(FixtureArchiveError):
    """The tree is malformed or cannot be replayed as it is (the message names the fix)."""


@dataclass(frozen=True)
class TreeCase:
    """One case of a tree: its directory and the manifest's kind and tolerances."""

    name: str
    family: str
    output_kind: str
    atol: float
    rtol: float
    directory: Path


def _manifest_of(raw: bytes, where: str) -> dict[str, Any] | None:
    try:  # bounded: a hostile manifest's depth or numbers must not crash the sniffing
        manifest = load_bounded_json(raw, where, ArchiveLimits())
    except FixtureArchiveError:
        return None
    if isinstance(manifest, dict) and manifest.get("schema") == TREE_SCHEMA:
        return manifest
    return None


def is_upstream_tree(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an upstream fixture tree (a directory or a ``.tar.gz`` of one)."""
    p = Path(path)
    if p.is_dir():
        found = p / MANIFEST
        if not found.is_file():
            return False
        return _manifest_of(found.read_bytes()[:_MANIFEST_LIMIT], str(p)) is not None
    if not p.is_file() or not tarfile.is_tarfile(p):
        return False
    try:
        with tarfile.open(p, "r:*") as tar:
            for member in tar:
                parts = Path(member.name).parts
                if member.isfile() and parts[-1:] == (MANIFEST,) and len(parts) <= 2:
                    handle = tar.extractfile(member)
                    raw = handle.read(_MANIFEST_LIMIT) if handle is not None else b""
                    return _manifest_of(raw, str(p)) is not None
    except (tarfile.TarError, OSError):
        return False
    return False


def _root_of(extracted: Path) -> Path:
    """The tree's root inside an extracted archive (the archive may wrap it in one folder)."""
    if (extracted / MANIFEST).is_file():
        return extracted
    children = [c for c in extracted.iterdir() if c.is_dir()]
    if len(children) == 1 and (children[0] / MANIFEST).is_file():
        return children[0]
    raise UpstreamTreeError("bad_manifest", f"no {MANIFEST} at the top of the archive")


def _parse_cases(root: Path) -> tuple[TreeCase, ...]:
    manifest = _manifest_of((root / MANIFEST).read_bytes()[:_MANIFEST_LIMIT], str(root))
    if manifest is None:
        raise UpstreamTreeError(
            "bad_manifest", f"{root / MANIFEST} is not a {TREE_SCHEMA} manifest"
        )
    raw_cases = manifest.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise UpstreamTreeError("bad_manifest", f"{root / MANIFEST} lists no cases")
    cases = []
    for index, raw in enumerate(raw_cases):
        where = f"manifest case {index}"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise UpstreamTreeError("bad_manifest", f"{where} needs a string name")
        name = raw["name"]
        if not name or "/" in name or name.startswith("."):
            raise UpstreamTreeError("bad_manifest", f"{where}: case name {name!r} is not a folder")
        kind = raw.get("output_kind", "")
        if kind not in ("dense", "sparse"):
            raise UpstreamTreeError(
                "bad_manifest", f"case {name!r}: output_kind must be dense or sparse, got {kind!r}"
            )
        tolerances = []
        for key in ("atol", "rtol"):
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise UpstreamTreeError(
                    "bad_manifest", f"case {name!r}: {key} must be a number >= 0, got {value!r}"
                )
            tolerances.append(float(value))
        directory = root / name
        missing = [f for f in CASE_FILES if not (directory / f).is_file()]
        if missing:
            raise UpstreamTreeError(
                "missing_member", f"case {name!r} lacks {', '.join(missing)} in {directory}"
            )
        cases.append(
            TreeCase(
                name, str(raw.get("family", "")), kind, tolerances[0], tolerances[1], directory
            )
        )
    return tuple(cases)


@contextmanager
def open_upstream_tree(
    path: str | os.PathLike[str], limits: ArchiveLimits | None = None
) -> Iterator[tuple[Path, tuple[TreeCase, ...]]]:
    """``(root, cases)`` of a tree; a ``.tar.gz`` is extracted (checked) into a temporary folder."""
    p = Path(path)
    if p.is_dir():
        yield p, _parse_cases(p)
        return
    with tempfile.TemporaryDirectory(prefix="lattice-upstream-") as tmp:
        extract_members(p, Path(tmp), limits or ArchiveLimits())
        root = _root_of(Path(tmp))
        yield root, _parse_cases(root)


def _graph_digest(graph: Path) -> str | None:
    text = graph.read_text(encoding="utf-8", errors="replace")
    marker = "lattice.schema_digest"
    at = text.find(marker)
    if at < 0:
        return None
    rest = text[at + len(marker) :].lstrip(" =")
    return rest[1:65] if rest.startswith('"') else None


def _load(path: Path, where: str) -> dict[str, Array]:
    try:
        return stnp.load(path.read_bytes())
    except Exception as exc:  # safetensors raises its own error types
        raise UpstreamTreeError(
            "bad_arrays", f"{where}: {path.name} is unreadable ({exc})"
        ) from exc


def _sparse_input_strides(runner: Runner) -> dict[str, tuple[int, int, int]]:
    """ABI name of each sparse-coordinates argument -> the stride its ``sparse.make`` declares."""
    plan: Any = cast(Any, runner).program.plan
    by_label = {a.name: a.abi_name for a in plan.args}
    strides: dict[str, tuple[int, int, int]] = {}
    for op in plan.ops:
        if op.definition.name == "sparse.make" and op.operands and op.operands[0] in by_label:
            x, y, z = (int(v) for v in op.attrs["stride"])
            strides[by_label[op.operands[0]]] = (x, y, z)
    return strides


def _scaled(coords: Array, stride: Sequence[int]) -> Array:
    scaled: Array = coords * np.asarray((1, *stride), dtype=coords.dtype)
    return scaled


def _inputs(
    runner: Runner, case: TreeCase, arrays: Mapping[str, Array], coords: str
) -> tuple[list[Array], list[str]]:
    """The case's input arrays in ABI order with their dtypes (coordinates scaled if asked)."""
    abi = runner.abi()["inputs"]
    strides = _sparse_input_strides(runner)
    values, dtypes = [], []
    for arg in abi:
        name = arg["name"]
        if name not in arrays:
            raise UpstreamTreeError(
                "bad_arrays", f"case {case.name!r}: inputs.safetensors has no {name!r}"
            )
        value = arrays[name]
        if name in strides:
            stride = strides[name]
            if value.ndim != 2 or value.shape[1] != 4:
                raise UpstreamTreeError(
                    "bad_arrays",
                    f"case {case.name!r}: input {name!r} has shape {value.shape}; sparse "
                    "coordinates are (N, 4) rows (batch, x, y, z)",
                )
            if coords == "lattice-units":
                value = _scaled(value, stride)
            elif value.size and np.any(value[:, 1:] % np.asarray(stride)):
                raise UpstreamTreeError(
                    "lattice_units",
                    f"case {case.name!r}: input {name!r} holds coordinates not divisible by its "
                    f"stride {stride}: they are in lattice units; replay with --coords "
                    "lattice-units to multiply them by the stride",
                )
        values.append(value)
        dtypes.append("bf16" if "bf16" in arg["type"] else "other")  # only bf16 is converted
    return values, dtypes


def _compare_case(
    case: TreeCase,
    expected: Mapping[str, Array],
    runner: Runner,
    outputs: Sequence[Any],
    coords: str,
) -> list[OutputResult]:
    names = [o["name"] for o in runner.abi()["outputs"]]
    results = []
    for name, got in zip(names, outputs, strict=True):
        if isinstance(got.value, SparseArrays):
            keys = (f"{name}.coords", f"{name}.features")
            if not all(k in expected for k in keys):
                raise UpstreamTreeError(
                    "bad_arrays", f"case {case.name!r}: expected.safetensors lacks {keys}"
                )
            want_coords = expected[keys[0]]
            if coords == "lattice-units":
                want_coords = _scaled(want_coords, got.value.stride)
            want = SparseArrays(want_coords, expected[keys[1]], got.value.stride)
            results.append(
                compare_sparse(
                    name,
                    got.value,
                    want,
                    atol=case.atol,
                    rtol=case.rtol,
                    expected_dtype=got.dtype,
                    actual_dtype=got.dtype,
                )
            )
        else:
            if name not in expected:
                raise UpstreamTreeError(
                    "bad_arrays", f"case {case.name!r}: expected.safetensors lacks {name!r}"
                )
            results.append(
                compare_dense(
                    name,
                    got.value,
                    expected[name],
                    atol=case.atol,
                    rtol=case.rtol,
                    expected_dtype=got.dtype,
                    actual_dtype=got.dtype,
                )
            )
    return results


def _stage(case: TreeCase, staging: Path) -> Path:
    """The case's artifact alone in a bundle directory (its tensors files are not weights)."""
    bundle = staging / case.name
    bundle.mkdir()
    for name in (GRAPH_FILE, WEIGHT_FILE):
        shutil.copyfile(case.directory / name, bundle / name)
    return bundle


def _replay_case(
    case: TreeCase, runtime: str, device: str, coords: str, staging: Path
) -> tuple[CaseResult, Any]:
    outcome = CaseResult(case.name, case.family, case.atol, case.rtol, False, [], [])
    digest = _graph_digest(case.directory / GRAPH_FILE)
    if digest is not None and digest in KNOWN_PRODUCER_DIGESTS:
        outcome.reasons.append(
            f"artifact: {case.name}/graph.mlir carries the schema digest of "
            f"{KNOWN_PRODUCER_DIGESTS[digest]} ({digest[:12]}...); run `lattice migrate SRC DST` "
            "on the tree first and replay DST"
        )
        return outcome, None
    crash = native_verification_crash(case.directory / GRAPH_FILE)
    if crash is not None:  # the parser died in the child: one failed case, no dead replayer
        outcome.reasons.append(f"artifact: {crash}")
        outcome.rejected = True
        return outcome, None
    try:
        runner = make_runner(runtime, _stage(case, staging), device)
    except RuntimeUnavailable:
        raise
    except Exception as exc:  # the artifact is refused: a failed case, never a crash
        outcome.reasons.append(f"artifact: does not load on {runtime}: {type(exc).__name__}: {exc}")
        return outcome, None
    t0 = time.perf_counter()
    try:
        arrays = _load(case.directory / "inputs.safetensors", f"case {case.name!r}")
        expected = _load(case.directory / "expected.safetensors", f"case {case.name!r}")
        values, dtypes = _inputs(runner, case, arrays, coords)
    except UpstreamTreeError as exc:
        outcome.reasons.append(f"fixture: {exc}")
        return outcome, runner
    outcome.load_s = time.perf_counter() - t0
    try:
        run = runner.run(values, dtypes)
    except Exception as exc:  # a runtime refusal is a failed case, not a crash
        outcome.reasons.append(f"runtime: {type(exc).__name__}: {exc}")
        return outcome, runner
    outcome.prepare_s, outcome.compute_s, outcome.convert_s = (
        run.prepare_s,
        run.compute_s,
        run.convert_s,
    )
    t1 = time.perf_counter()
    try:
        outcome.outputs = _compare_case(case, expected, runner, run.outputs, coords)
    except UpstreamTreeError as exc:
        outcome.reasons.append(f"fixture: {exc}")
    outcome.reasons += [f"{o.name}: {r}" for o in outcome.outputs for r in o.reasons]
    outcome.compare_s = time.perf_counter() - t1
    outcome.passed = not outcome.reasons
    return outcome, runner


def replay_tree(
    path: str | os.PathLike[str],
    *,
    runtime: str = "mlx",
    device: str = "cpu",
    coords: str = "physical",
    on_case: Callable[[CaseResult], None] | None = None,
) -> ReplayResult:
    """Replay every case of an upstream fixture tree; never raises for a bad tree or case.

    ``coords`` is ``"physical"`` (as stored; lattice-unit inputs are refused
    with the fix) or ``"lattice-units"``.  The result is reported like a
    fixture archive's; ``producer`` records the tree schema and the
    coordinate units used.
    """
    result = ReplayResult(archive=Path(path), runtime=runtime, device=device)
    if coords not in COORD_UNITS:
        result.error = f"coords must be one of {', '.join(COORD_UNITS)}, got {coords!r}"
        return result
    result.producer = {"tree_schema": TREE_SCHEMA, "coords": coords}
    started = time.perf_counter()
    try:
        with (
            open_upstream_tree(path) as (_, cases),
            tempfile.TemporaryDirectory(prefix="lattice-upstream-case-") as staging,
        ):
            result.open_s = time.perf_counter() - started
            for case in cases:
                t0 = time.perf_counter()
                outcome, runner = _replay_case(case, runtime, device, coords, Path(staging))
                result.compile_s += time.perf_counter() - t0 - outcome.compute_s
                if runner is not None:
                    for op, count in runner.op_counts().items():
                        result.op_counts[op] = result.op_counts.get(op, 0) + count
                result.cases.append(outcome)
                if on_case is not None:
                    on_case(outcome)
    except RuntimeUnavailable as exc:
        result.error = str(exc)
    except FixtureArchiveError as exc:
        result.error = str(exc)
    except OSError as exc:
        result.error = f"cannot read {path}: {exc}"
    finally:
        result.total_s = time.perf_counter() - started
    return result

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

Each output is compared with what the fixture stores: its dtype (the stored
features' dtype, so an f16 fixture fails an f32 result), and for a sparse
output only the rows ``[0, out.active)`` (rows past it are capacity padding;
an ``active`` that is missing, not one integer or beyond the stored rows is
a fixture error).  Tensor files are read by
:mod:`lattice_conformance.upstream_tensors` (the contract's header policy,
bf16 widened exactly).  The manifest is bounded (:data:`MANIFEST_LIMIT`,
refused beyond it, never truncated) and an archive is sniffed without
writing anything, under the safe extractor's caps.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
from lattice_contract.artifact import open_regular_file
from lattice_contract.dialect import GRAPH_FILE, KNOWN_PRODUCER_DIGESTS, WEIGHT_FILE

from lattice_conformance.archive import ArchiveLimits, FixtureArchiveError, SparseArrays
from lattice_conformance.metrics import OutputResult, compare_dense, compare_sparse
from lattice_conformance.native_check import native_verification_crash
from lattice_conformance.replay import CaseResult, ReplayResult
from lattice_conformance.runners import Runner, RuntimeUnavailable, make_runner
from lattice_conformance.safe_extract import (
    check_headers,
    extract_members,
    find_member,
    load_bounded_json,
)
from lattice_conformance.upstream_tensors import TensorFile, read_tensors

Array = npt.NDArray[Any]

TREE_SCHEMA: Final = "torch_lattice_e2e_fixtures/v1"
"""The ``schema`` of an upstream fixture tree's manifest."""

COORD_UNITS: Final = ("physical", "lattice-units")
"""How a tree's sparse coordinates are read: as stored, or multiplied by the stride."""


CASE_FILES: Final = (GRAPH_FILE, WEIGHT_FILE, "inputs.safetensors", "expected.safetensors")
MANIFEST: Final = "manifest.json"
MANIFEST_LIMIT: Final = 1 << 20
"""Largest tree manifest read (bytes); a larger one is refused with its size."""


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


def _manifest_limits() -> ArchiveLimits:
    return ArchiveLimits(max_manifest_bytes=MANIFEST_LIMIT)


def _read_manifest(path: Path) -> bytes:
    """At most one byte past the limit, so an oversized manifest is refused, never truncated."""
    _plain(path, "file")
    with open_regular_file(path, what="fixture-tree manifest") as handle:
        return handle.read(MANIFEST_LIMIT + 1)


def _plain(path: Path, kind: str) -> None:
    """A tree is read like an archive: a link (or a FIFO, a device) in it is refused.

    A link could make a replay or a migration read (and copy into its
    output) any file of the machine, ``/proc/self/environ`` included, so no
    link is followed, whatever it points to.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return  # reported as missing by the caller
    if stat.S_ISLNK(mode):
        raise UpstreamTreeError(
            "link",
            f"{path} is a symbolic link; a fixture tree holds plain files only (links are "
            "never followed): copy the file into the tree",
        )
    plain = stat.S_ISDIR(mode) if kind == "directory" else stat.S_ISREG(mode)
    if not plain:
        raise UpstreamTreeError("not_regular", f"{path} is not a plain {kind}")


def _is_tree_manifest(raw: bytes, where: str) -> bool:
    if len(raw) > MANIFEST_LIMIT:
        # Too large to parse; say it is a tree when it names the tree schema, so that
        # the replay refuses it for its size instead of reading it as something else.
        return TREE_SCHEMA.encode() in raw
    try:  # bounded: a hostile manifest's depth or numbers must not crash the sniffing
        manifest = load_bounded_json(raw, where, _manifest_limits())
    except FixtureArchiveError:
        return False
    return isinstance(manifest, dict) and manifest.get("schema") == TREE_SCHEMA


def _tree_manifest_member(path: PurePosixPath) -> bool:
    return path.name == MANIFEST and len(path.parts) <= 2


def is_upstream_tree(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an upstream fixture tree (a directory or a ``.tar.gz`` of one).

    An archive is sniffed with the bounded reader of
    :func:`lattice_conformance.safe_extract.find_member` (nothing is written;
    a hostile archive is not a tree here and is refused by whichever reader
    takes it next).
    """
    p = Path(path)
    try:
        if p.is_dir():
            found = p / MANIFEST
            return found.is_file() and _is_tree_manifest(_read_manifest(found), str(found))
        if not p.is_file():
            return False
        raw = find_member(p, _tree_manifest_member, ArchiveLimits(), max_bytes=MANIFEST_LIMIT)
    except (FixtureArchiveError, OSError):
        return False
    return raw is not None and _is_tree_manifest(raw, f"{p}: {MANIFEST}")


def _root_of(extracted: Path) -> Path:
    """The tree's root inside an extracted archive (the archive may wrap it in one folder)."""
    if (extracted / MANIFEST).is_file():
        return extracted
    children = [c for c in extracted.iterdir() if c.is_dir()]
    if len(children) == 1 and (children[0] / MANIFEST).is_file():
        return children[0]
    raise UpstreamTreeError("bad_manifest", f"no {MANIFEST} at the top of the archive")


def tree_cases(root: Path) -> tuple[TreeCase, ...]:
    """The cases of the tree at ``root``, checked; :class:`UpstreamTreeError` names each defect.

    The manifest is read by the bounded JSON reader and refused (not
    truncated) past :data:`MANIFEST_LIMIT` bytes.
    """
    where = str(root / MANIFEST)
    try:
        raw = _read_manifest(root / MANIFEST)
    except OSError as exc:
        raise UpstreamTreeError("bad_manifest", f"cannot read {where}: {exc}") from None
    if len(raw) > MANIFEST_LIMIT:
        raise UpstreamTreeError(
            "bad_manifest",
            f"{where} is over {MANIFEST_LIMIT} bytes, the limit of a fixture tree's manifest "
            "(a list of cases and tolerances is a few KiB); it is refused, not truncated",
        )
    manifest = load_bounded_json(raw, where, _manifest_limits())
    if not isinstance(manifest, dict) or manifest.get("schema") != TREE_SCHEMA:
        schema = manifest.get("schema") if isinstance(manifest, dict) else None
        raise UpstreamTreeError(
            "bad_manifest",
            f"{where} has schema {schema!r}; a fixture tree's manifest has schema "
            f"{TREE_SCHEMA!r} (an artifact bundle holds no manifest)",
        )
    raw_cases = manifest.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise UpstreamTreeError("bad_manifest", f"{root / MANIFEST} lists no cases")
    cases = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_cases):
        where = f"manifest case {index}"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise UpstreamTreeError("bad_manifest", f"{where} needs a string name")
        name = raw["name"]
        if not name or "/" in name or name.startswith(".") or "\0" in name:
            raise UpstreamTreeError("bad_manifest", f"{where}: case name {name!r} is not a folder")
        if name in seen:
            raise UpstreamTreeError(
                "duplicate_case", f"{where}: case {name!r} is listed twice; list each case once"
            )
        seen.add(name)
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
        _plain(directory, "directory")
        for file in CASE_FILES:
            _plain(directory / file, "file")
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
        yield p, tree_cases(p)
        return
    limits = limits or ArchiveLimits()
    check_headers(p, limits)  # a tree declares no sizes: every header against the caps first
    with tempfile.TemporaryDirectory(prefix="lattice-upstream-") as tmp:
        extract_members(p, Path(tmp), limits)
        root = _root_of(Path(tmp))
        yield root, tree_cases(root)


def _graph_digest(graph: Path) -> str | None:
    text = graph.read_text(encoding="utf-8", errors="replace")
    marker = "lattice.schema_digest"
    at = text.find(marker)
    if at < 0:
        return None
    rest = text[at + len(marker) :].lstrip(" =")
    return rest[1:65] if rest.startswith('"') else None


def _load(path: Path, where: str) -> TensorFile:
    try:
        return read_tensors(path)
    except FixtureArchiveError as exc:
        raise UpstreamTreeError("bad_arrays", f"{where}: {exc}") from None


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


def _scaled(coords: Array, stride: Sequence[int], where: str) -> Array:
    """Lattice-unit coordinates times the stride, refused where a product leaves int32."""
    wide = coords.astype(np.int64) * np.asarray((1, *stride), dtype=np.int64)
    if wide.size and (int(wide.max()) > _INT32_MAX or int(wide.min()) < -_INT32_MAX - 1):
        raise UpstreamTreeError(
            "lattice_units",
            f"{where}: coordinates times the stride {tuple(stride)} leave the int32 range, so "
            "they cannot be lattice units of this graph; replay without --coords lattice-units",
        )
    scaled: Array = wide.astype(coords.dtype)
    return scaled


_INT32_MAX: Final = 2**31 - 1
_ELEMENT_TYPE = re.compile(r"x(bf16|f16|f32|f64|i8|i16|i32|i64)>\s*$")


def _check_input_dtype(case: TreeCase, name: str, declared_type: str, inputs: TensorFile) -> str:
    """The declared element type of an input, which the stored tensor must hold exactly."""
    found = _ELEMENT_TYPE.search(declared_type)
    declared = found.group(1) if found else "other"
    stored = inputs.dtypes[name]
    if found is None or stored == declared:
        return declared
    value = inputs.arrays[name]
    if declared == "bf16" and stored == "f32" and not np.any(value.view(np.uint32) & 0xFFFF):
        return declared  # bf16 values carried as f32 (as Lattice archives carry them): exact
    raise UpstreamTreeError(
        "bad_arrays",
        f"case {case.name!r}: input {name!r} is stored as {stored} but the graph declares "
        f"{declared} ({declared_type}); store it as {declared}",
    )


def _inputs(
    runner: Runner, case: TreeCase, inputs: TensorFile, coords: str
) -> tuple[list[Array], list[str]]:
    """The case's input arrays in ABI order with their dtypes (coordinates scaled if asked)."""
    abi = runner.abi()["inputs"]
    strides = _sparse_input_strides(runner)
    arrays: Mapping[str, Array] = inputs.arrays
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
                value = _scaled(value, stride, f"case {case.name!r}: input {name!r}")
            elif value.size and np.any(value[:, 1:] % np.asarray(stride)):
                raise UpstreamTreeError(
                    "lattice_units",
                    f"case {case.name!r}: input {name!r} holds coordinates not divisible by its "
                    f"stride {stride}: they are in lattice units; replay with --coords "
                    "lattice-units to multiply them by the stride",
                )
        declared = _check_input_dtype(case, name, arg["type"], inputs)
        values.append(value)
        dtypes.append("bf16" if declared == "bf16" else "other")  # only bf16 is converted
    return values, dtypes


def _expected_sparse(
    case: TreeCase, expected: TensorFile, name: str, stride: tuple[int, int, int], coords: str
) -> tuple[SparseArrays, str]:
    """The expected rows ``[0, active)`` of sparse output ``name`` and its features' dtype."""
    keys = (f"{name}.coords", f"{name}.features", f"{name}.active")
    missing = [k for k in keys if k not in expected.arrays]
    if missing:
        raise UpstreamTreeError(
            "bad_arrays",
            f"case {case.name!r}: expected.safetensors lacks {', '.join(missing)}; a sparse "
            f"output is stored as {', '.join(keys)}",
        )
    want_coords, want_feats, active = (expected.arrays[k] for k in keys)
    rows = len(want_coords)
    if want_coords.ndim != 2 or want_coords.shape[1] != 4 or len(want_feats) != rows:
        raise UpstreamTreeError(
            "bad_arrays",
            f"case {case.name!r}: expected {keys[0]} {want_coords.shape} and {keys[1]} "
            f"{want_feats.shape} are not (N, 4) and (N, C) rows",
        )
    if active.shape != (1,) or active.dtype.kind not in "iu" or not 0 <= int(active[0]) <= rows:
        raise UpstreamTreeError(
            "bad_arrays",
            f"case {case.name!r}: expected {keys[2]} is {active.tolist()} ({active.dtype}); it "
            f"is one integer, the active rows, between 0 and the {rows} stored rows",
        )
    count = int(active[0])
    want_coords, want_feats = want_coords[:count], want_feats[:count]  # rows past it: padding
    if coords == "lattice-units":
        want_coords = _scaled(want_coords, stride, f"case {case.name!r}: expected {keys[0]}")
    return SparseArrays(want_coords, want_feats, stride), expected.dtypes[keys[1]]


def _compare_case(
    case: TreeCase,
    expected: TensorFile,
    runner: Runner,
    outputs: Sequence[Any],
    coords: str,
) -> list[OutputResult]:
    """Each output against the fixture: its rows, values and its stored dtype."""
    names = [o["name"] for o in runner.abi()["outputs"]]
    results = []
    for name, got in zip(names, outputs, strict=True):
        if isinstance(got.value, SparseArrays):
            want, want_dtype = _expected_sparse(case, expected, name, got.value.stride, coords)
            results.append(
                compare_sparse(
                    name,
                    got.value,
                    want,
                    atol=case.atol,
                    rtol=case.rtol,
                    expected_dtype=want_dtype,
                    actual_dtype=got.dtype,
                )
            )
        else:
            if name not in expected.arrays:
                raise UpstreamTreeError(
                    "bad_arrays", f"case {case.name!r}: expected.safetensors lacks {name!r}"
                )
            results.append(
                compare_dense(
                    name,
                    got.value,
                    expected.arrays[name],
                    atol=case.atol,
                    rtol=case.rtol,
                    expected_dtype=expected.dtypes[name],
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

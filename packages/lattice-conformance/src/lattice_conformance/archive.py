"""Fixture archives: an artifact plus exact inputs, expected outputs and tolerances.

A fixture archive is the unit that travels from the training side (torch,
usually CUDA) to a deployment machine (MLX on CPU, CUDA or Metal), where
``conformance replay`` runs it.  It is a gzip-compressed tar file::

    manifest.json                       format name, format_version, cases, checksums
    artifact/graph.mlir                 the artifact, byte for byte
    artifact/weights.safetensors
    cases/0000/inputs.safetensors       one entry per ABI input, by ABI name
    cases/0000/expected.safetensors     "<out>.coords" / "<out>.features" (sparse) or
    ...                                 "<out>.value" (dense), per output ABI name

Arrays are stored with safetensors in numpy dtypes only (int32, float16,
float32), so the reader needs neither torch nor MLX.  bfloat16 values are
stored as float32 (which represents them exactly) and the manifest records
their logical dtype; the replayer casts back before calling the program.

Archives come from elsewhere, so the reader treats them as hostile
(:mod:`lattice_conformance.safe_extract`): it streams the tar once with the
manifest first, so every size is known and capped before anything is
written; it refuses absolute paths, ``..`` components, links, devices and
FIFOs, duplicate (or case-colliding) names, oversized members, gzip bombs
and unlisted files; bounds the manifest's size, nesting and numbers; checks
every file against the SHA-256 and size recorded in the manifest and every
array file against the safetensors reader policy.  Each refusal is a
:class:`FixtureArchiveError` whose ``reason`` is a short machine-readable
code.

The writer is deterministic (sorted members, zero mtimes and owners) so the
same fixtures give the same bytes, and atomic (a temporary file in the
destination directory renamed into place), so a crash never leaves a
half-written archive under the final name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import safetensors.numpy as stnp
from lattice_contract.artifact import WeightFileError, atomic_write_file, check_safetensors_bytes
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE

from lattice_conformance.safe_extract import (
    ArchiveLimits,
    FixtureArchiveError,
    extract_members,
    load_bounded_json,
)

__all__ = [
    "ArchiveLimits",
    "CaseSpec",
    "FixtureArchive",
    "FixtureArchiveError",
    "FixtureCase",
    "OutputSpec",
    "SparseArrays",
    "copy_artifact",
    "open_fixture_archive",
    "write_fixture_archive",
]

FORMAT_NAME: Final = "lattice-conformance-fixtures"
"""Value of the manifest's ``format`` key."""

FORMAT_VERSION: Final = 1
"""The manifest ``format_version`` this release writes and reads."""

MANIFEST_NAME: Final = "manifest.json"
ARTIFACT_DIR: Final = "artifact"
CASES_DIR: Final = "cases"

# Storage dtypes an archive may hold, by the name used in the manifest.
_STORAGE_DTYPES: Final[dict[str, np.dtype[Any]]] = {
    "i32": np.dtype(np.int32),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
}
# Logical dtypes: what the program sees.  bf16 travels as f32.
_LOGICAL_FROM_STORAGE: Final[dict[str, frozenset[str]]] = {
    "i32": frozenset({"i32"}),
    "f16": frozenset({"f16"}),
    "f32": frozenset({"f32", "bf16"}),
}
_CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=@-]{0,127}$")
_ABI_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

Array = npt.NDArray[Any]


# ---------------------------------------------------------------------------
# In-memory model of fixtures.


@dataclass(frozen=True)
class SparseArrays:
    """One sparse value as plain arrays: physical coords, features, stride."""

    coords: Array
    features: Array
    stride: tuple[int, int, int] = (1, 1, 1)


ExpectedValue = SparseArrays | Array


@dataclass(frozen=True)
class FixtureCase:
    """One replayable call: inputs by ABI name, expected outputs by ABI name.

    ``inputs`` must list every entry argument of the artifact in ABI order
    (coords, features, active of each sparse input); ``expected`` every output
    in return order.  ``dtypes`` overrides the logical dtype of an input (by
    ABI name) or an output's features (``"<out>.features"``/``"<out>.value"``)
    where the storage dtype differs -- today only bf16 stored as f32.
    """

    name: str
    inputs: Mapping[str, Array]
    expected: Mapping[str, ExpectedValue]
    atol: float
    rtol: float
    dtypes: Mapping[str, str] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class OutputSpec:
    """Manifest description of one expected output."""

    name: str
    kind: str  # "sparse" | "dense"
    dtype: str  # logical dtype of features / values
    stride: tuple[int, int, int] | None


@dataclass(frozen=True)
class CaseSpec:
    """Manifest description of one case; arrays load on demand."""

    index: int
    name: str
    description: str
    atol: float
    rtol: float
    input_names: tuple[str, ...]
    input_dtypes: Mapping[str, str]
    inputs_file: str
    outputs: tuple[OutputSpec, ...]
    expected_file: str


# ---------------------------------------------------------------------------
# Writer.


def _check_array(where: str, value: object) -> Array:
    if not isinstance(value, np.ndarray):
        raise FixtureArchiveError(
            "bad_case",
            f"{where}: expected a numpy array, got {type(value).__name__}; "
            "convert tensors with .numpy() (bf16: .float().numpy() and declare dtypes)",
        )
    name = _dtype_name(value.dtype)
    if name is None:
        raise FixtureArchiveError(
            "bad_case",
            f"{where}: dtype {value.dtype} cannot be stored; use int32, float16 or float32",
        )
    return np.ascontiguousarray(value)


def _dtype_name(dtype: np.dtype[Any]) -> str | None:
    for name, candidate in _STORAGE_DTYPES.items():
        if dtype == candidate:
            return name
    return None


def _logical_dtype(where: str, storage: Array, declared: str | None) -> str:
    stored = _dtype_name(storage.dtype)
    assert stored is not None
    if declared is None:
        return stored
    if declared not in _LOGICAL_FROM_STORAGE[stored]:
        raise FixtureArchiveError(
            "bad_case",
            f"{where}: logical dtype {declared!r} cannot be stored as {stored}; "
            "bf16 must be stored as float32, other dtypes as themselves",
        )
    if declared == "bf16":
        as_bits = storage.view(np.uint32)
        if np.any(as_bits & np.uint32(0xFFFF)):
            raise FixtureArchiveError(
                "bad_case",
                f"{where}: declared bf16 but the float32 values are not bf16-representable; "
                "store tensor.to(torch.bfloat16).float()",
            )
    return declared


def _check_stride(where: str, stride: Sequence[int]) -> tuple[int, int, int]:
    items = tuple(stride)
    if len(items) != 3 or not all(
        isinstance(s, int | np.integer) and not isinstance(s, bool) and int(s) > 0 for s in items
    ):
        raise FixtureArchiveError(
            "bad_case", f"{where}: stride must be three positive ints, got {stride!r}"
        )
    return (int(items[0]), int(items[1]), int(items[2]))


def _case_payload(index: int, case: FixtureCase) -> tuple[dict[str, Any], bytes, bytes]:
    """Validate one case and serialise it: (manifest entry, inputs, expected)."""
    where = f"case {index} ({case.name!r})"
    if not isinstance(case.name, str) or not _CASE_NAME.match(case.name):
        raise FixtureArchiveError(
            "bad_case",
            f"{where}: case names must be 1-128 characters of letters, digits and ._+=@- "
            "starting with a letter or digit",
        )
    for label, tol in (("atol", case.atol), ("rtol", case.rtol)):
        if not isinstance(tol, int | float) or isinstance(tol, bool) or not math.isfinite(tol):
            raise FixtureArchiveError("bad_case", f"{where}: {label} must be a finite number")
        if tol < 0:
            raise FixtureArchiveError("bad_case", f"{where}: {label} must be >= 0, got {tol}")
    if not case.inputs:
        raise FixtureArchiveError("bad_case", f"{where}: a case needs at least one input")
    if not case.expected:
        raise FixtureArchiveError("bad_case", f"{where}: a case needs at least one output")
    known_dtype_keys: set[str] = set()
    input_arrays: dict[str, Array] = {}
    input_dtypes: dict[str, str] = {}
    for name, raw_input in case.inputs.items():
        if not _ABI_NAME.match(name):
            raise FixtureArchiveError("bad_case", f"{where}: bad input ABI name {name!r}")
        array = _check_array(f"{where} input {name!r}", raw_input)
        input_arrays[name] = array
        input_dtypes[name] = _logical_dtype(f"{where} input {name!r}", array, case.dtypes.get(name))
        known_dtype_keys.add(name)
    expected_arrays: dict[str, Array] = {}
    outputs: list[dict[str, Any]] = []
    for name, value in case.expected.items():
        if not _ABI_NAME.match(name):
            raise FixtureArchiveError("bad_case", f"{where}: bad output ABI name {name!r}")
        if isinstance(value, SparseArrays):
            coords = _check_array(f"{where} output {name!r} coords", value.coords)
            feats = _check_array(f"{where} output {name!r} features", value.features)
            if coords.dtype != np.int32 or coords.ndim != 2 or coords.shape[1] != 4:
                raise FixtureArchiveError(
                    "bad_case",
                    f"{where} output {name!r}: coords must be int32 (N, 4), "
                    f"got {coords.dtype} {coords.shape}",
                )
            if feats.ndim != 2 or feats.shape[0] != coords.shape[0]:
                raise FixtureArchiveError(
                    "bad_case",
                    f"{where} output {name!r}: features must be (N, C) with N = "
                    f"{coords.shape[0]} coordinate rows, got {feats.shape}",
                )
            key = f"{name}.features"
            dtype = _logical_dtype(f"{where} output {name!r}", feats, case.dtypes.get(key))
            known_dtype_keys.add(key)
            expected_arrays[f"{name}.coords"] = coords
            expected_arrays[key] = feats
            stride = _check_stride(f"{where} output {name!r}", value.stride)
            outputs.append({"name": name, "kind": "sparse", "dtype": dtype, "stride": list(stride)})
        else:
            array = _check_array(f"{where} output {name!r}", value)
            key = f"{name}.value"
            dtype = _logical_dtype(f"{where} output {name!r}", array, case.dtypes.get(key))
            known_dtype_keys.add(key)
            expected_arrays[key] = array
            outputs.append({"name": name, "kind": "dense", "dtype": dtype, "stride": None})
    unknown = sorted(set(case.dtypes) - known_dtype_keys)
    if unknown:
        raise FixtureArchiveError(
            "bad_case",
            f"{where}: dtypes names {unknown}, which are neither inputs nor output values",
        )
    base = f"{CASES_DIR}/{index:04d}"
    entry = {
        "name": case.name,
        "description": case.description,
        "atol": float(case.atol),
        "rtol": float(case.rtol),
        "inputs": {
            "file": f"{base}/inputs.safetensors",
            "names": list(input_arrays),
            "dtypes": input_dtypes,
        },
        "expected": {"file": f"{base}/expected.safetensors", "outputs": outputs},
    }
    return entry, stnp.save(input_arrays), stnp.save(expected_arrays)


def _tar_add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(payload))


def write_fixture_archive(
    path: str | os.PathLike[str],
    artifact_dir: str | os.PathLike[str],
    cases: Sequence[FixtureCase],
    *,
    producer: Mapping[str, str] | None = None,
) -> Path:
    """Write a fixture archive atomically; return its path.

    ``artifact_dir`` must hold ``graph.mlir`` and ``weights.safetensors``
    (exactly what the artifact is; other files in the directory are not
    copied).  ``producer`` is free-form provenance (runtime, versions,
    device) stored in the manifest.  Nothing is written unless every case
    validates; the archive appears under ``path`` only when complete.
    """
    target = Path(path)
    artifact = Path(artifact_dir)
    if not cases:
        raise FixtureArchiveError("bad_case", "a fixture archive needs at least one case")
    names = [case.name for case in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise FixtureArchiveError("bad_case", f"duplicate case names {duplicates}; rename them")
    files: dict[str, bytes] = {}
    for file_name in (GRAPH_FILE, WEIGHT_FILE):
        source = artifact / file_name
        if not source.is_file():
            raise FixtureArchiveError(
                "bad_artifact",
                f"artifact directory {artifact} has no {file_name}; write the artifact first "
                "(save_lattice_model_artifact)",
            )
        files[f"{ARTIFACT_DIR}/{file_name}"] = source.read_bytes()
    entries = []
    for index, case in enumerate(cases):
        entry, inputs, expected = _case_payload(index, case)
        entries.append(entry)
        files[entry["inputs"]["file"]] = inputs
        files[entry["expected"]["file"]] = expected
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "artifact": ARTIFACT_DIR,
        "producer": dict(producer or {}),
        "cases": entries,
        "files": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            for name, data in sorted(files.items())
        },
    }
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()

    def write(tmp: Path) -> None:
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            _tar_add(tar, MANIFEST_NAME, manifest_bytes)
            for name in sorted(files):
                _tar_add(tar, name, files[name])

    return atomic_write_file(target, write)


# ---------------------------------------------------------------------------
# Reader.


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise FixtureArchiveError("bad_manifest", message)


def _parse_manifest(raw: bytes, limits: ArchiveLimits) -> dict[str, Any]:
    manifest = load_bounded_json(raw, MANIFEST_NAME, limits)
    _require(isinstance(manifest, dict), f"{MANIFEST_NAME} must hold a JSON object")
    if manifest.get("format") != FORMAT_NAME:
        raise FixtureArchiveError(
            "bad_manifest",
            f"{MANIFEST_NAME} format is {manifest.get('format')!r}, expected {FORMAT_NAME!r}; "
            "this is not a lattice fixture archive",
        )
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise FixtureArchiveError(
            "unsupported_version",
            f"fixture archive format_version {version!r} is not supported (this reader "
            f"reads version {FORMAT_VERSION}); regenerate the archive or upgrade "
            "lattice-conformance",
        )
    result: dict[str, Any] = manifest
    return result


def _parse_cases(manifest: Mapping[str, Any]) -> tuple[CaseSpec, ...]:
    raw_cases: Any = manifest.get("cases")
    _require(isinstance(raw_cases, list) and len(raw_cases) > 0, "manifest lists no cases")
    cases = []
    names: set[str] = set()
    for index, raw in enumerate(raw_cases):
        where = f"manifest case {index}"
        _require(isinstance(raw, dict), f"{where} is not an object")
        name = raw.get("name")
        _require(isinstance(name, str) and bool(_CASE_NAME.match(name)), f"{where}: bad name")
        _require(name not in names, f"{where}: duplicate case name {name!r}")
        names.add(name)
        atol, rtol = raw.get("atol"), raw.get("rtol")
        for label, tol in (("atol", atol), ("rtol", rtol)):
            _require(
                isinstance(tol, int | float)
                and not isinstance(tol, bool)
                and math.isfinite(tol)
                and tol >= 0,
                f"{where}: {label} must be a finite number >= 0",
            )
        inputs = raw.get("inputs")
        expected = raw.get("expected")
        _require(isinstance(inputs, dict) and isinstance(expected, dict), f"{where}: malformed")
        in_names = inputs.get("names")
        in_dtypes = inputs.get("dtypes")
        _require(
            isinstance(in_names, list)
            and all(isinstance(n, str) and _ABI_NAME.match(n) for n in in_names)
            and len(set(in_names)) == len(in_names)
            and len(in_names) > 0,
            f"{where}: inputs.names must be distinct ABI names",
        )
        _require(
            isinstance(in_dtypes, dict)
            and set(in_dtypes) == set(in_names)
            and all(v in ("i32", "f16", "f32", "bf16") for v in in_dtypes.values()),
            f"{where}: inputs.dtypes must give i32/f16/f32/bf16 for every input",
        )
        outputs = []
        raw_outputs = expected.get("outputs")
        _require(isinstance(raw_outputs, list) and len(raw_outputs) > 0, f"{where}: no outputs")
        for out in raw_outputs:
            _require(isinstance(out, dict), f"{where}: malformed output")
            kind = out.get("kind")
            oname = out.get("name")
            dtype = out.get("dtype")
            stride = out.get("stride")
            _require(isinstance(oname, str) and bool(_ABI_NAME.match(oname)), f"{where}: name")
            _require(kind in ("sparse", "dense"), f"{where}: output kind must be sparse|dense")
            _require(dtype in ("i32", "f16", "f32", "bf16"), f"{where}: bad output dtype")
            if kind == "sparse":
                _require(
                    isinstance(stride, list)
                    and len(stride) == 3
                    and all(
                        isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in stride
                    ),
                    f"{where}: sparse output {oname!r} needs a positive stride triple",
                )
                stride_t: tuple[int, int, int] | None = (stride[0], stride[1], stride[2])
            else:
                _require(stride is None, f"{where}: dense output {oname!r} has a stride")
                stride_t = None
            outputs.append(OutputSpec(oname, kind, dtype, stride_t))
        _require(len({o.name for o in outputs}) == len(outputs), f"{where}: duplicate output names")
        for key, block in (("inputs", inputs), ("expected", expected)):
            _require(isinstance(block.get("file"), str), f"{where}: {key}.file missing")
        cases.append(
            CaseSpec(
                index=index,
                name=name,
                description=str(raw.get("description", "")),
                atol=float(atol),
                rtol=float(rtol),
                input_names=tuple(in_names),
                input_dtypes=dict(in_dtypes),
                inputs_file=inputs["file"],
                outputs=tuple(outputs),
                expected_file=expected["file"],
            )
        )
    return tuple(cases)


class FixtureArchive:
    """An extracted, checked fixture archive.  Use as a context manager.

    Opening extracts into a private temporary directory (or ``into``),
    validates every member and the manifest, and verifies checksums; the
    arrays of a case are read on demand by :meth:`load_case`.  Closing removes
    the temporary directory.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        limits: ArchiveLimits | None = None,
        into: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if into is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="lattice-fixtures-")
            root = Path(self._tmp.name)
        else:
            root = Path(into)
            root.mkdir(parents=True, exist_ok=True)
            if any(root.iterdir()):
                raise FixtureArchiveError(
                    "bad_destination", f"extraction directory {root} is not empty"
                )
        self.root = root
        try:
            self._open(limits or ArchiveLimits())
        except BaseException:
            self.close()
            raise

    def _open(self, limits: ArchiveLimits) -> None:
        parsed: dict[str, Any] = {}

        def declared(raw: bytes) -> dict[str, int]:
            manifest = _parse_manifest(raw, limits)
            listed: Any = manifest.get("files")
            _require(isinstance(listed, dict), "manifest has no files table")
            for name, meta in listed.items():
                _require(
                    isinstance(meta, dict)
                    and isinstance(meta.get("sha256"), str)
                    and isinstance(meta.get("size"), int)
                    and not isinstance(meta.get("size"), bool)
                    and meta["size"] >= 0,
                    f"manifest files entry {name!r} needs sha256 and a size >= 0",
                )
            parsed["manifest"], parsed["listed"] = manifest, listed
            return {name: meta["size"] for name, meta in listed.items()}

        files = extract_members(
            self.path, self.root, limits, manifest=MANIFEST_NAME, declared=declared
        )
        if MANIFEST_NAME not in files:
            raise FixtureArchiveError(
                "bad_manifest", f"{self.path} has no {MANIFEST_NAME}; not a fixture archive"
            )
        manifest: dict[str, Any] = parsed["manifest"]
        listed: dict[str, Any] = parsed["listed"]
        for name, meta in listed.items():
            if name not in files:
                raise FixtureArchiveError(
                    "missing_member", f"manifest lists {name!r} but the archive lacks it"
                )
            size, digest = files[name]
            if size != meta["size"] or digest != meta["sha256"]:
                raise FixtureArchiveError(
                    "checksum_mismatch",
                    f"{name!r} does not match its manifest checksum (size {size}, expected "
                    f"{meta['size']}); the archive was modified or damaged in transit",
                )
        artifact = manifest.get("artifact")
        _require(artifact == ARTIFACT_DIR, f"manifest artifact must be {ARTIFACT_DIR!r}")
        for file_name in (GRAPH_FILE, WEIGHT_FILE):
            _require(
                f"{ARTIFACT_DIR}/{file_name}" in listed,
                f"archive has no {ARTIFACT_DIR}/{file_name}",
            )
        self.cases = _parse_cases(manifest)
        for case in self.cases:
            for ref in (case.inputs_file, case.expected_file):
                _require(ref in listed, f"case {case.name!r} refers to missing file {ref!r}")
        producer = manifest.get("producer", {})
        _require(isinstance(producer, dict), "manifest producer must be an object")
        self.producer: dict[str, Any] = dict(producer)
        self.format_version: int = manifest["format_version"]
        self.manifest: dict[str, Any] = manifest

    @property
    def artifact_dir(self) -> Path:
        """Directory holding the extracted ``graph.mlir`` and ``weights.safetensors``."""
        return self.root / ARTIFACT_DIR

    def _load(self, rel: str, where: str) -> dict[str, Array]:
        data = (self.root / rel).read_bytes()
        try:
            check_safetensors_bytes(data, rel)
        except WeightFileError as exc:
            raise FixtureArchiveError("bad_arrays", f"{where}: {exc}") from exc
        try:
            return stnp.load(data)
        except Exception as exc:  # safetensors raises its own error types
            raise FixtureArchiveError(
                "bad_arrays", f"{where}: {rel} is not a readable safetensors file ({exc})"
            ) from exc

    def load_case(self, case: CaseSpec | int) -> FixtureCase:
        """Read one case's arrays and check them against the manifest."""
        spec = self.cases[case] if isinstance(case, int) else case
        where = f"case {spec.name!r}"
        inputs = self._load(spec.inputs_file, where)
        if set(inputs) != set(spec.input_names):
            raise FixtureArchiveError(
                "bad_arrays",
                f"{where}: inputs file holds {sorted(inputs)}, manifest lists "
                f"{list(spec.input_names)}",
            )
        expected_raw = self._load(spec.expected_file, where)
        expected: dict[str, ExpectedValue] = {}
        wanted: set[str] = set()
        for out in spec.outputs:
            if out.kind == "sparse":
                keys = (f"{out.name}.coords", f"{out.name}.features")
                wanted.update(keys)
                if not all(k in expected_raw for k in keys):
                    raise FixtureArchiveError(
                        "bad_arrays", f"{where}: expected arrays {keys} missing"
                    )
                coords, feats = expected_raw[keys[0]], expected_raw[keys[1]]
                if (
                    coords.dtype != np.int32
                    or coords.ndim != 2
                    or coords.shape[1] != 4
                    or feats.ndim != 2
                    or feats.shape[0] != coords.shape[0]
                ):
                    raise FixtureArchiveError(
                        "bad_arrays",
                        f"{where}: expected {out.name!r} must be int32 (N, 4) coords with "
                        f"(N, C) features; got {coords.dtype} {coords.shape} and {feats.shape}",
                    )
                assert out.stride is not None
                expected[out.name] = SparseArrays(coords, feats, out.stride)
            else:
                key = f"{out.name}.value"
                wanted.add(key)
                if key not in expected_raw:
                    raise FixtureArchiveError("bad_arrays", f"{where}: expected {key} missing")
                expected[out.name] = expected_raw[key]
        extra = sorted(set(expected_raw) - wanted)
        if extra:
            raise FixtureArchiveError("bad_arrays", f"{where}: unexpected arrays {extra}")
        dtypes = {k: v for k, v in spec.input_dtypes.items() if v == "bf16"}
        for out in spec.outputs:
            if out.dtype == "bf16":
                dtypes[f"{out.name}.{'features' if out.kind == 'sparse' else 'value'}"] = "bf16"
        return FixtureCase(
            name=spec.name,
            inputs={n: inputs[n] for n in spec.input_names},
            expected=expected,
            atol=spec.atol,
            rtol=spec.rtol,
            dtypes=dtypes,
            description=spec.description,
        )

    def iter_cases(self) -> Iterator[tuple[CaseSpec, FixtureCase]]:
        """Each case spec with its loaded arrays, in manifest order."""
        for spec in self.cases:
            yield spec, self.load_case(spec)

    def close(self) -> None:
        """Remove the extraction directory (when it is the private temporary one)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> FixtureArchive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_fixture_archive(
    path: str | os.PathLike[str],
    *,
    limits: ArchiveLimits | None = None,
    into: str | os.PathLike[str] | None = None,
) -> FixtureArchive:
    """Extract and check a fixture archive (see :class:`FixtureArchive`)."""
    return FixtureArchive(path, limits=limits, into=into)


def copy_artifact(archive: FixtureArchive, dest: str | os.PathLike[str]) -> Path:
    """Copy the archive's artifact directory out (for inspection or re-use)."""
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    for name in (GRAPH_FILE, WEIGHT_FILE):
        shutil.copyfile(archive.artifact_dir / name, out / name)
    return out

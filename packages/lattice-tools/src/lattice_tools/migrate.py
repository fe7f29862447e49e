"""``lattice migrate SRC DST``: the one explicit migration of another producer's artifacts.

Lattice loads nothing written under another schema digest: the verifier's
digest diagnostic names the producer and this command.  ``lattice migrate``
reads

* an artifact bundle (a directory with ``graph.mlir`` and
  ``weights.safetensors``),
* an upstream fixture tree (``manifest.json`` of schema
  ``torch_lattice_e2e_fixtures/v1`` and one directory per case holding
  ``graph.mlir``, ``weights.safetensors``, ``inputs.safetensors`` and
  ``expected.safetensors``), or
* a bare ``graph.mlir``,

whose ``lattice.schema_digest`` is one of :data:`KNOWN_PRODUCER_DIGESTS`.
Each graph is parsed and every op verified natively before anything is
rewritten; the rewrite happens in the parsed module (MLIR prints the result),
and the result must pass every Lattice rule (op and artifact verifiers, plan
import) and reprint unchanged.  Only what has one meaning in both dialects is
rewritten:

* the schema digest becomes this build's;
* an output role ``tensor`` on a ``!lattice.sparse_tensor`` result becomes
  ``sparse_tensor`` (upstream does not distinguish them);
* a sparse input named by upstream's bare ``coords`` / ``features`` /
  ``active`` becomes ``input_coords`` / ``input_features`` / ``input_active``
  (Lattice names a sparse input's three tensors ``<name>_*``); a fixture
  tree's ``inputs.safetensors`` entries are renamed with it.

A graph whose numbers would differ is refused: a generative transposed
convolution whose stride is smaller than its kernel on some axis has taps
that meet on one output, and upstream emits a duplicate row for each where
Lattice sums them into one.  Refusals (:class:`MigrationError`) say why and
write nothing.  DST is written through :mod:`lattice_contract.artifact.atomic` (the
writer lock, a complete synced sibling swapped in with
``renameat2(RENAME_EXCHANGE)``, leftovers of interrupted runs cleaned up),
weights and fixture tensors are copied byte for byte, and a JSON manifest of
every change goes to ``DST.migration.json`` (or ``--manifest``; a bundle may
hold no JSON, so it lives beside DST).  The manifest is DST's atomic
companion: it names DST's ``destination_sha256`` (:func:`lattice_contract.
atomic.fingerprint`), is staged before DST is swapped and moved into place
after, and a run killed in between is completed by the next run to the same
DST, so a manifest on disk always describes the DST that is there.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from lattice_conformance.safe_extract import FixtureArchiveError
from lattice_conformance.upstream_tensors import UpstreamTensorError, rename_entries
from lattice_conformance.upstream_tree import CASE_FILES, MANIFEST, TREE_SCHEMA, tree_cases
from lattice_contract.artifact import (
    EXIT_OK,
    EXIT_USAGE,
    BundleError,
    Companion,
    OutputClashError,
    WeightFileError,
    WriterLockedError,
    atomic_write_dir,
    atomic_write_file,
    check_bundle_dir,
    check_safetensors_file,
    path_lock,
    printable,
    recover_interrupted,
    special_kind,
)
from lattice_contract.dialect import (
    GRAPH_FILE,
    KNOWN_PRODUCER_DIGESTS,
    SCHEMA_DIGEST,
    SPARSE_ABI_SUFFIXES,
    SPARSE_INPUT_ROLES,
    WEIGHT_FILE,
)

__all__ = [
    "FIXTURE_TREE_SCHEMA",
    "MANIFEST_SCHEMA",
    "Change",
    "MigratedGraph",
    "MigrationError",
    "MigrationReport",
    "main",
    "migrate",
    "migrate_graph",
]

log = logging.getLogger(__name__)

FIXTURE_TREE_SCHEMA = TREE_SCHEMA
"""``schema`` of an upstream fixture tree's ``manifest.json``."""

MANIFEST_SCHEMA = "lattice_migration/v1"
"""``schema`` of the manifest of changes this command writes."""

FIXTURE_CASE_FILES: tuple[str, ...] = CASE_FILES
"""Files of one fixture-tree case."""

BARE_SPARSE_NAMES: tuple[str, str, str] = ("coords", "features", "active")
"""Upstream's ABI names of an unnamed sparse input."""

RENAMED_SPARSE_INPUT = "input"
"""Logical name a bare sparse input gets (``input_coords``, ...)."""

_GENERATIVE_OPS = (
    "lattice.generative_conv_transpose3d",
    "lattice.normalized_generative_conv_transpose3d",
)


class MigrationError(ValueError):
    """A source the migration refuses; the message says why and what to do."""


@dataclass(frozen=True)
class Change:
    """One rewrite: what changed, from what, to what."""

    what: str
    before: Any
    after: Any

    def record(self) -> dict[str, Any]:
        """The change as manifest JSON."""
        return {"what": self.what, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class MigratedGraph:
    """One graph after migration: its printed text, the changes, renamed input names."""

    text: str
    producer: str
    changes: tuple[Change, ...]
    renamed_inputs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MigrationReport:
    """What :func:`migrate` did: the kind of source, per-case changes, the manifest path."""

    kind: str  # "bundle", "fixture-tree" or "graph"
    source: Path
    destination: Path
    manifest: Path
    producer: str
    cases: dict[str, tuple[Change, ...]]

    def summary(self) -> str:
        """A few readable lines for the terminal."""
        total = sum(len(c) for c in self.cases.values())
        lines = [
            f"migrated {self.kind} {printable(self.source)} ({self.producer}) -> "
            f"{printable(self.destination)}: "
            f"{len(self.cases)} graph(s), {total} change(s)"
        ]
        for name, changes in self.cases.items():
            for change in changes:
                where = f"{printable(name)}: " if self.kind == "fixture-tree" else ""
                before, after = printable(repr(change.before)), printable(repr(change.after))
                lines.append(f"  {where}{change.what}: {before} -> {after}")
        lines.append(f"manifest of changes: {printable(self.manifest)}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# One graph.


def _native() -> Any:
    try:
        import lattice_mlir
    except ImportError as exc:  # pragma: no cover - the native module ships with the stack
        raise MigrationError(
            "lattice migrate needs the native lattice_mlir module (MLIR parses, verifies and "
            f"prints the graph); install lattice-mlir ({exc})"
        ) from None
    return lattice_mlir


def _string_list(attributes: dict[str, Any], name: str, where: str) -> list[str]:
    value = attributes.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MigrationError(
            f"{where}: module attribute {name} is missing or not a list of strings ({value!r}); "
            "the graph is not a lattice artifact this command can migrate"
        )
    return value


def _output_roles(
    roles: list[str], results: list[str], where: str
) -> tuple[list[str], list[Change]]:
    """Sparse results declared ``tensor`` become sparse_tensor; dense ones so marked fail."""
    fixed = list(roles)
    changes: list[Change] = []
    for index, (role, kind) in enumerate(zip(roles, results, strict=False)):
        if kind == "sparse" and role == "tensor":
            fixed[index] = "sparse_tensor"
        elif kind != "sparse" and role == "sparse_tensor":
            raise MigrationError(
                f"{where}: output #{index} has role sparse_tensor but is a {kind} value; the "
                "declared role and the graph disagree, so the meaning of the output is not "
                "clear: fix the producer's output roles"
            )
    if fixed != roles:
        changes.append(Change("lattice.output_roles", roles, fixed))
    return fixed, changes


def _input_names(
    names: list[str], roles: list[str], where: str
) -> tuple[list[str], dict[str, str], list[Change]]:
    """Upstream's bare sparse input names get a logical name of their own."""
    renamed = list(names)
    mapping: dict[str, str] = {}
    for start in range(len(names) - 2):
        if tuple(roles[start : start + 3]) != SPARSE_INPUT_ROLES:
            continue
        if tuple(names[start : start + 3]) != BARE_SPARSE_NAMES:
            continue
        base, suffix = RENAMED_SPARSE_INPUT, 0
        while any(f"{base}{s}" in names for s in SPARSE_ABI_SUFFIXES):
            suffix += 1
            base = f"{RENAMED_SPARSE_INPUT}{suffix}"
        for offset, tail in enumerate(SPARSE_ABI_SUFFIXES):
            renamed[start + offset] = base + tail
            mapping[names[start + offset]] = base + tail
    changes = [Change("lattice.input_names", names, renamed)] if mapping else []
    return renamed, mapping, changes


def _meaning_preserved(plan: dict[str, Any], where: str) -> None:
    """Refuse ops whose Lattice numbers differ from upstream's for the same text."""
    for index, op in enumerate(plan["ops"]):
        if op["name"] not in _GENERATIVE_OPS:
            continue
        kernel, stride = op["attrs"]["kernel_size"], op["attrs"]["stride"]
        if any(s < k for s, k in zip(stride, kernel, strict=True)):
            raise MigrationError(
                f"{where}: op #{index} {op['name']} has stride {tuple(stride)} smaller than "
                f"kernel_size {tuple(kernel)} on some axis, so several (input, tap) pairs reach "
                "one output: upstream emits a duplicate row for each, Lattice sums them into one "
                "row (duplicate coordinates are invalid sparse values), so the migrated graph "
                "would compute different outputs; re-export the model with Lattice's exporter "
                "instead"
            )


def migrate_graph(text: str, *, where: str = GRAPH_FILE) -> MigratedGraph:
    """Migrate one graph's text; raises :class:`MigrationError` on any refusal."""
    native = _native()
    try:
        found = native.rewrite_module(text, {})
    except native.LatticeMLIRError as exc:
        raise MigrationError(
            f"{where} does not parse or an op does not verify, so it is not migrated:\n"
            f"{exc.diagnostics.strip()}"
        ) from None
    attributes: dict[str, Any] = found.attributes
    digest = attributes.get("lattice.schema_digest")
    if digest == SCHEMA_DIGEST:
        raise MigrationError(
            f"{where} already carries this build's schema digest {SCHEMA_DIGEST}; it is a "
            "Lattice artifact and needs no migration"
        )
    known = ", ".join(f"{p} ({d})" for d, p in KNOWN_PRODUCER_DIGESTS.items())
    producer = KNOWN_PRODUCER_DIGESTS.get(digest) if isinstance(digest, str) else None
    if producer is None:
        why = (
            f"carries schema digest {digest}, which is not a known producer's"
            if isinstance(digest, str)
            else "has no lattice.schema_digest string, so its producer is unknown"
        )
        # The artifact rules may name an earlier defect (a missing ir_version, ...).
        diagnostics = native.verify(text).diagnostics.strip()
        raise MigrationError(
            f"{where} {why}; only artifacts of a known producer are migrated: {known}. "
            f"Native verification of the graph as it is says:\n{diagnostics}"
        )
    changes = [Change("lattice.schema_digest", digest, SCHEMA_DIGEST)]
    edits: dict[str, str | list[str]] = {"lattice.schema_digest": SCHEMA_DIGEST}
    roles = _string_list(attributes, "lattice.output_roles", where)
    fixed_roles, role_changes = _output_roles(roles, found.results, where)
    if role_changes:
        edits["lattice.output_roles"] = fixed_roles
    names = _string_list(attributes, "lattice.input_names", where)
    input_roles = _string_list(attributes, "lattice.input_roles", where)
    fixed_names, renamed, name_changes = _input_names(names, input_roles, where)
    if name_changes:
        edits["lattice.input_names"] = fixed_names
    changes += role_changes + name_changes
    printed: str = native.rewrite_module(text, edits).printed
    try:
        plan = native.import_plan(printed)
    except native.LatticeMLIRError as exc:
        raise MigrationError(
            f"{where} ({producer}) does not verify under Lattice's rules after migration, so "
            f"it is not migrated:\n{exc.diagnostics.strip()}"
        ) from None
    _meaning_preserved(plan, where)
    if native.rewrite_module(printed, {}).printed != printed:  # pragma: no cover - MLIR bug
        raise MigrationError(f"{where}: the migrated graph does not reprint stably")
    return MigratedGraph(printed, producer, tuple(changes), renamed)


# ---------------------------------------------------------------------------
# Sources and atomic destinations.


def _rename_tensors(src: Path, dst: Path, renamed: dict[str, str]) -> None:
    """Copy a safetensors file with entries renamed (the migrated input names).

    Only the header changes: every entry keeps its dtype, shape and bytes
    (bf16 included, which NumPy cannot hold) and ``__metadata__`` is kept.
    """
    try:
        rename_entries(src, dst, renamed)
    except UpstreamTensorError as exc:
        raise MigrationError(str(exc)) from None


def _copy_plain(src: Path, dst: Path) -> None:
    """Copy a regular file, never through a link (``O_NOFOLLOW``), never from a FIFO or device.

    The case's files were checked link-free when the tree was read; opening
    without following closes the window in which one could be swapped in.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(src, flags)
    except OSError as exc:
        raise MigrationError(f"cannot read {src} as a plain file (a link?): {exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MigrationError(f"{src} is not a plain file; a fixture holds plain files only")
        os.set_blocking(fd, True)
        with open(dst, "wb") as out:
            shutil.copyfileobj(handle, out)


def _check_weights(path: Path) -> None:
    """A ``.safetensors`` member is what it claims: a header the reader policy accepts."""
    try:
        check_safetensors_file(path)
    except WeightFileError as exc:
        raise MigrationError(str(exc)) from None


def _source_kind(src: Path) -> str:
    if src.name.endswith((".tar.gz", ".tgz", ".tar")) and src.is_file():
        raise MigrationError(
            f"SRC {str(src)!r} is an archive; lattice migrate reads a bundle directory, a "
            "fixture tree or a graph.mlir: extract the archive and migrate the tree"
        )
    if src.is_file():
        return "graph"
    if os.path.exists(src) and not src.is_dir():
        raise MigrationError(
            f"SRC {str(src)!r} is {special_kind(src.stat().st_mode)}; name a bundle "
            "directory, a fixture tree or a graph.mlir file"
        )
    if not src.is_dir():
        raise MigrationError(f"SRC {str(src)!r} does not exist")
    if (src / MANIFEST).is_file():
        return "fixture-tree"
    return "bundle"


def _tree_cases(src: Path) -> list[str]:
    """The case names of a fixture tree, read by the replayer's own (bounded) manifest rules."""
    try:
        return [case.name for case in tree_cases(src)]
    except FixtureArchiveError as exc:
        raise MigrationError(str(exc)) from None


def _check_destination(target: Path, *, kind: str, force: bool) -> None:
    """An existing DST is replaced only with ``force`` and only if it is a migration's output."""
    if not force:
        raise MigrationError(f"DST {str(target)!r} exists; choose a new path or pass --force")
    replaceable = (
        target.is_file() and not target.is_symlink()
        if kind == "graph"
        else target.is_dir()
        and not target.is_symlink()
        and ((target / GRAPH_FILE).is_file() or (target / MANIFEST).is_file())
    )
    if not replaceable:
        raise MigrationError(
            f"refusing to replace {str(target)!r}: it is not a previous migration's "
            + ("graph file" if kind == "graph" else "artifact or fixture tree")
        )


def _read_graph(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MigrationError(f"cannot read {path}: {exc}") from None


def migrate(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    manifest: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> MigrationReport:
    """Migrate SRC (bundle, fixture tree or bare graph) into DST; see the module docs.

    Every graph is migrated in memory before anything is written, so a
    refusal leaves DST untouched.  DST must not exist unless ``force``.
    """
    source, target = Path(src), Path(dst)
    if target.name in ("", ".", ".."):
        raise MigrationError(
            f"DST {str(dst)!r} names no new file or directory; give the migrated copy a name "
            "(for example model.lattice)"
        )
    kind = _source_kind(source)
    manifest_path = (
        Path(manifest) if manifest else target.with_name(target.name + ".migration.json")
    )
    if target.resolve() == source.resolve():
        raise MigrationError("SRC and DST are the same path; migrate into a new DST")
    read, written, noted = source.resolve(), target.resolve(), manifest_path.resolve()
    if read in written.parents or written in read.parents:
        raise MigrationError(
            f"SRC {str(source)!r} and DST {str(target)!r} lie inside one another; a migration "
            "neither writes into its source nor replaces a tree that holds it: choose a DST "
            "beside SRC"
        )
    for inside, what in ((written, "DST"), (read, "SRC")):
        if noted == inside or inside in noted.parents:
            raise MigrationError(
                f"the manifest {str(manifest_path)!r} would be {what} or lie inside it; write "
                "it beside DST (the default, DST.migration.json)"
            )
    for what, folder in (("DST", target.parent), ("the manifest", manifest_path.parent)):
        if not (folder if str(folder) else Path(".")).is_dir():
            raise MigrationError(f"{what}'s directory {str(folder)!r} does not exist")
    try:  # first settle what an interrupted earlier migration to DST left behind
        with path_lock(target) as locked_at, path_lock(manifest_path):
            recover_interrupted(target, before=locked_at, companion=manifest_path)
    except WriterLockedError as exc:
        raise MigrationError(str(exc)) from None
    if os.path.lexists(target):  # checked again under the writer lock
        _check_destination(target, kind=kind, force=force)

    migrated: dict[str, MigratedGraph] = {}
    if kind == "graph":
        migrated[source.name] = migrate_graph(_read_graph(source), where=str(source))
    elif kind == "bundle":
        try:
            paths = check_bundle_dir(source)
        except BundleError as exc:
            raise MigrationError(str(exc)) from None
        migrated[source.name] = migrate_graph(_read_graph(paths.graph), where=str(paths.graph))
    else:
        for name in _tree_cases(source):
            graph_path = source / name / GRAPH_FILE
            migrated[name] = migrate_graph(_read_graph(graph_path), where=str(graph_path))
    producers = sorted({m.producer for m in migrated.values()})

    if kind == "bundle":
        _check_weights(source / WEIGHT_FILE)
    elif kind == "fixture-tree":
        for name in migrated:
            for file in FIXTURE_CASE_FILES[1:]:
                if file.endswith(".safetensors"):
                    _check_weights(source / name / file)

    def fill_bundle(root: Path) -> None:
        (graph,) = migrated.values()
        (root / GRAPH_FILE).write_text(graph.text, encoding="utf-8")
        _copy_plain(source / WEIGHT_FILE, root / WEIGHT_FILE)

    def fill_tree(root: Path) -> None:
        _copy_plain(source / MANIFEST, root / MANIFEST)
        for name, graph in migrated.items():
            os.mkdir(root / name)
            (root / name / GRAPH_FILE).write_text(graph.text, encoding="utf-8")
            for file in FIXTURE_CASE_FILES[1:]:
                if file == "inputs.safetensors" and graph.renamed_inputs:
                    _rename_tensors(source / name / file, root / name / file, graph.renamed_inputs)
                else:
                    _copy_plain(source / name / file, root / name / file)

    report = MigrationReport(
        kind=kind,
        source=source,
        destination=target,
        manifest=manifest_path,
        producer=", ".join(producers),
        cases={name: graph.changes for name, graph in migrated.items()},
    )

    def render(destination_sha256: str) -> str:
        record = {
            "schema": MANIFEST_SCHEMA,
            "kind": kind,
            "source": str(source),
            "destination": str(target),
            "destination_sha256": destination_sha256,
            "producer": report.producer,
            "schema_digest": SCHEMA_DIGEST,
            "graphs": {
                name: {
                    "changes": [c.record() for c in graph.changes],
                    "renamed_inputs": graph.renamed_inputs,
                }
                for name, graph in migrated.items()
            },
            "copied_unchanged": (
                [WEIGHT_FILE]
                if kind == "bundle"
                else [MANIFEST, *FIXTURE_CASE_FILES[1:]]
                if kind == "fixture-tree"
                else []
            ),
        }
        return json.dumps(record, indent=2, sort_keys=True) + "\n"

    # An existing manifest is replaced only with --force (the user named DST, not it).
    companion = Companion(manifest_path, render, replace=force)
    check = partial(_check_destination, kind=kind, force=force)
    try:
        if kind == "graph":
            (graph,) = migrated.values()
            atomic_write_file(
                target,
                lambda tmp: tmp.write_text(graph.text, encoding="utf-8"),
                check_existing=check,
                companion=companion,
                inputs=[source],
            )
        else:
            fill = fill_bundle if kind == "bundle" else fill_tree
            atomic_write_dir(
                target, fill, check_existing=check, companion=companion, inputs=[source]
            )
    except (WriterLockedError, OutputClashError) as exc:
        raise MigrationError(str(exc)) from None
    return report


# ---------------------------------------------------------------------------
# Command line.


def main(argv: Sequence[str] | None = None) -> int:
    """``lattice migrate SRC DST [--manifest PATH] [--force]``."""
    parser = argparse.ArgumentParser(
        prog="lattice migrate",
        description=(
            "Migrate an artifact bundle, an upstream fixture tree or a bare graph.mlir written "
            "by a known producer ("
            + ", ".join(KNOWN_PRODUCER_DIGESTS.values())
            + ") into a Lattice artifact: verify natively, rewrite what has one meaning in "
            "both (schema digest, sparse output roles, bare sparse input names), verify again "
            "and write DST atomically with a manifest of changes."
        ),
    )
    parser.add_argument("src", type=Path, help="bundle directory, fixture tree or graph.mlir")
    parser.add_argument("dst", type=Path, help="where to write the migrated copy (must be new)")
    parser.add_argument(
        "--manifest", type=Path, help="manifest of changes (default: DST.migration.json)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing DST")
    args = parser.parse_args(argv)
    try:
        report = migrate(args.src, args.dst, manifest=args.manifest, force=args.force)
    except MigrationError as exc:
        log.error("lattice migrate: refused: %s", exc)
        return EXIT_USAGE
    except OSError as exc:
        log.error("lattice migrate: %s", exc)
        return EXIT_USAGE
    print(report.summary())
    return EXIT_OK

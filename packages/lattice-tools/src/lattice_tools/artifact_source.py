"""Commands that read an artifact take a bundle directory or a fixture archive.

A fixture archive carries its artifact inside (``artifact/graph.mlir`` and
``artifact/weights.safetensors``), so ``lattice inspect`` and ``lattice view``
accept one where they accept a ``model.lattice`` directory: the archive is
extracted with the hostile-archive checks of :mod:`lattice_conformance.archive`
into a temporary directory that disappears afterwards.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lattice_conformance.archive import open_fixture_archive
from lattice_contract.artifact import describe_path

__all__ = ["ArtifactSource", "ArtifactSourceError", "is_fixture_archive", "open_artifact_source"]


class ArtifactSourceError(ValueError):
    """The path given is neither an artifact directory nor a fixture archive (an input error)."""


@dataclass(frozen=True)
class ArtifactSource:
    """Where the artifact lies now, and (for an archive) what the archive says about it."""

    artifact_dir: Path
    archive: dict[str, Any] | None


def is_fixture_archive(path: Path) -> bool:
    """A regular file that tar can read (a bundle is a directory)."""
    return path.is_file() and tarfile.is_tarfile(path)


@contextlib.contextmanager
def open_artifact_source(path: str | os.PathLike[str]) -> Iterator[ArtifactSource]:
    """The artifact directory of ``path``; archives are extracted for the ``with`` block."""
    source = Path(path)
    kind = describe_path(source)
    if kind.startswith("missing"):
        raise ArtifactSourceError(
            f"{kind} {str(source)!r}: give a model.lattice directory (graph.mlir + "
            "weights.safetensors) or a fixture archive (.tar.gz)"
        )
    if kind == "file" and not is_fixture_archive(source):
        raise ArtifactSourceError(
            f"{str(source)!r} is a file that is not a fixture archive: give a model.lattice "
            "directory (graph.mlir + weights.safetensors) or a fixture archive (.tar.gz)"
        )
    if not is_fixture_archive(source):
        yield ArtifactSource(source, None)
        return
    with open_fixture_archive(source) as archive:
        summary = {
            "path": str(source),
            "format_version": archive.format_version,
            "producer": archive.producer,
            "cases": [
                {
                    "name": c.name,
                    "description": c.description,
                    "atol": c.atol,
                    "rtol": c.rtol,
                    "outputs": [o.name for o in c.outputs],
                }
                for c in archive.cases
            ],
        }
        yield ArtifactSource(archive.artifact_dir, summary)

"""Bundle rules no backend changes: what a ``model.lattice/`` directory may hold.

An artifact directory holds exactly ``graph.mlir`` and ``weights.safetensors``.
Loading rejects, each with its own message:

* a missing directory, graph or weight file;
* legacy JSON manifests (``manifest.json``, ``model.json`` or any other
  ``*.json``): graph semantics live only in MLIR;
* other weight payloads (a second ``*.safetensors``, ``.npz``, ``.pt``,
  ``.bin``...): only ``weights.safetensors`` is read, so anything else would
  be silently ignored.

Saving goes through :func:`atomic_bundle_write`: the bundle is written into
a temporary sibling directory and swapped into place
(:mod:`lattice_contract.artifact.atomic`), so a failed or killed save leaves no
half-written artifact and an existing bundle survives intact.
:func:`flatten_bundle_weights` turns a runtime's storage-key mapping into the
flat safetensors entries both runtimes write.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from lattice_contract.artifact.atomic import atomic_write_dir
from lattice_contract.artifact.untrusted import special_kind
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE

__all__ = [
    "LEGACY_MANIFEST_NAMES",
    "OTHER_WEIGHT_SUFFIXES",
    "BundleError",
    "BundlePaths",
    "PackedTriplet",
    "atomic_bundle_write",
    "check_bundle_dir",
    "flatten_bundle_weights",
]

LEGACY_MANIFEST_NAMES: tuple[str, ...] = ("manifest.json", "model.json", "graph.json")
"""Manifest names earlier exporters wrote beside (or instead of) the graph."""

OTHER_WEIGHT_SUFFIXES: tuple[str, ...] = (
    ".safetensors",
    ".npz",
    ".npy",
    ".pt",
    ".pth",
    ".bin",
    ".ckpt",
    ".gguf",
    ".h5",
    ".pkl",
)
"""Weight-file suffixes that must not appear besides ``weights.safetensors``."""


class BundleError(ValueError):
    """An artifact directory breaks the bundle rules."""


@dataclass(frozen=True)
class BundlePaths:
    """The two files of a checked artifact directory."""

    root: Path
    graph: Path
    weights: Path


FIXTURE_DATA_FILES = ("inputs.safetensors", "expected.safetensors")
"""A conformance fixture case's inputs and expected outputs, allowed beside the bundle.

A fixture case directory is an artifact plus these two files (never read
as weights), so ``load_lattice_program(case_dir)`` works on it directly.
"""


def check_bundle_dir(path: str | os.PathLike[str]) -> BundlePaths:
    """Check a directory against the bundle rules; return its graph and weight paths."""
    root = Path(path)
    if not root.exists():
        raise BundleError(f"artifact directory {str(root)!r} does not exist")
    if not root.is_dir():
        raise BundleError(
            f"{str(root)!r} is not a directory; an artifact is a directory holding "
            f"{GRAPH_FILE} and {WEIGHT_FILE}"
        )
    names = sorted(p.name for p in root.iterdir())
    manifests = [n for n in names if n.lower().endswith(".json")]
    if manifests:
        raise BundleError(
            f"{str(root)!r} contains legacy JSON manifest(s) {', '.join(manifests)}; graph "
            f"semantics live only in {GRAPH_FILE}: migrate the artifact once by re-exporting "
            "it, and remove the manifest"
        )
    others = [
        n
        for n in names
        if n != WEIGHT_FILE
        and n not in FIXTURE_DATA_FILES
        and any(n.lower().endswith(s) for s in OTHER_WEIGHT_SUFFIXES)
    ]
    if others:
        raise BundleError(
            f"{str(root)!r} contains weight file(s) {', '.join(others)}; an artifact stores all "
            f"weights in {WEIGHT_FILE} (lattice.weight_file), so merge them there"
        )
    graph = root / GRAPH_FILE
    weights = root / WEIGHT_FILE
    for required in (graph, weights):
        if os.path.exists(required) and not required.is_file():  # a FIFO, a device, a folder
            raise BundleError(
                f"artifact {str(root)!r}: {required.name} is "
                f"{special_kind(required.stat().st_mode)}, not a file; a bundle holds "
                f"{GRAPH_FILE} and {WEIGHT_FILE} as regular files"
            )
        if not required.is_file():
            raise BundleError(
                f"artifact {str(root)!r} has no {required.name}; a bundle holds {GRAPH_FILE} "
                f"and {WEIGHT_FILE}"
            )
    return BundlePaths(root=root, graph=graph, weights=weights)


def _refuse_foreign_directory(target: Path) -> None:
    if not target.is_dir():
        raise BundleError(f"cannot save to {str(target)!r}: it exists and is not a directory")
    if any(target.iterdir()) and not (target / GRAPH_FILE).exists():
        raise BundleError(
            f"refusing to overwrite {str(target)!r}: it is a non-empty directory that is "
            "not a lattice artifact"
        )


def atomic_bundle_write(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Create the artifact directory ``path`` by calling ``write(tmp_dir)``, atomically.

    ``write`` fills a fresh temporary directory next to ``path``; the swap,
    the writer lock, the clean-up of earlier interrupted saves and the file
    modes are :func:`lattice_contract.artifact.atomic.atomic_write_dir`'s.  An
    existing non-artifact directory with contents is never overwritten.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BundleError(f"cannot save to {str(target)!r}: {str(parent)!r} is not a directory")
    return atomic_write_dir(target, write, check_existing=_refuse_foreign_directory)


ArrayT = TypeVar("ArrayT")
ArrayT_co = TypeVar("ArrayT_co", covariant=True)


class PackedTriplet(Protocol[ArrayT_co]):
    """A packed weight as the bundle stores it: three arrays under one storage key."""

    @property
    def weight(self) -> ArrayT_co: ...

    @property
    def scales(self) -> ArrayT_co: ...

    @property
    def biases(self) -> ArrayT_co: ...


def flatten_bundle_weights(
    weights: Mapping[str, object] | None,
    *,
    array_type: type[ArrayT],
    packed_type: type[PackedTriplet[ArrayT]],
    array_name: str,
    convert: Callable[[ArrayT], ArrayT] | None = None,
) -> dict[str, ArrayT]:
    """Storage keys to safetensors entries, the same way in every runtime.

    A ``packed_type`` value (the runtime's ``QuantizedWeight``) becomes its
    ``<key>.weight``/``<key>.scales``/``<key>.biases`` entries; an
    ``array_type`` value is stored under its key.  Each entry goes through
    ``convert`` when given (torch moves tensors to plain CPU buffers there).
    The rules live here so both runtimes write identical bundles and reject
    the same inputs with the same words: a name produced twice is a
    ``ValueError`` (it would silently drop a weight), a non-string key or a
    value of another type a ``TypeError`` that names ``array_name``.
    """
    flat: dict[str, ArrayT] = {}

    def put(name: str, array: ArrayT) -> None:
        if name in flat:
            raise ValueError(
                f"safetensors entry {name!r} is given twice (a packed weight's "
                "<key>.weight/.scales/.biases collide with another weight name)"
            )
        flat[name] = array if convert is None else convert(array)

    for key, value in (weights or {}).items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"weight names must be non-empty strings, got {key!r}")
        if isinstance(value, packed_type):
            put(f"{key}.weight", value.weight)
            put(f"{key}.scales", value.scales)
            put(f"{key}.biases", value.biases)
        elif isinstance(value, array_type):
            put(key, value)
        else:
            raise TypeError(
                f"weight {key!r} is a {type(value).__name__}; pass {array_name} values "
                "(or QuantizedWeight for packed weights)"
            )
    return flat

"""Release versions, read from the installed distributions' metadata.

Each ``pyproject.toml`` is the one place a version number is written; the
``__version__`` of every package and every ``--version`` flag read it back
from the installed metadata, so they cannot drift from what pip installed.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTIONS: dict[str, str] = {
    "lattice_contract": "latticekit-contract",
    "lattice_mlir": "latticekit-mlir",
    "mlx_lattice": "latticekit-mlx",
    "torch_lattice": "latticekit-torch",
    "lattice_conformance": "latticekit-conformance",
    "lattice_tools": "latticekit-tools",
}
"""Import name -> distribution name of the six Lattice packages."""

UNKNOWN = "0+unknown"
"""The version of a package imported from a source tree that pip never installed."""


def distribution_version(import_name: str) -> str:
    """Installed version of the Lattice package ``import_name`` (``UNKNOWN`` if absent)."""
    try:
        return metadata.version(DISTRIBUTIONS[import_name])
    except metadata.PackageNotFoundError:
        return UNKNOWN


def version_report(prog: str, import_names: tuple[str, ...] = tuple(DISTRIBUTIONS)) -> str:
    """The text a ``--version`` flag prints: the command's version, then each package's."""
    lines = [f"{prog} {distribution_version('lattice_contract')}"]
    lines += [f"  {DISTRIBUTIONS[n]} {_installed(n)}" for n in import_names]
    return "\n".join(lines)


def _installed(import_name: str) -> str:
    found = distribution_version(import_name)
    return "not installed" if found == UNKNOWN else found


__version__ = distribution_version("lattice_contract")

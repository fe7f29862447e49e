"""Graph and artifact verification through real MLIR, for MLX users.

The verification machinery is shared with every runtime
(:mod:`lattice_contract.verify`): the in-process ``lattice_mlir`` module, or a
``lattice-opt`` executable passed as ``lattice_opt=`` or named by
``$MLX_LATTICE_LATTICE_OPT`` (else found beside Python or on ``PATH``).
Python never parses lattice MLIR; without any verifier the functions raise
:class:`ArtifactCapabilityError`.  Artifact-level checks add the weights: with
the native module an artifact is only valid if it compiles for MLX.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lattice_contract import verify
from lattice_contract.verify import (
    ArtifactCapabilityError,
    LatticeMLIRStatus,
    LatticeValidationError,
    import_native_plan,
    native_module,
)

if TYPE_CHECKING:
    from mlx_lattice.artifact.io import LatticeArtifact

__all__ = [
    "LATTICE_OPT_ENV",
    "ArtifactCapabilityError",
    "LatticeMLIRStatus",
    "LatticeValidationError",
    "lattice_artifact_status",
    "lattice_graph_operation_names",
    "lattice_graph_status",
    "native_module",
    "validate_lattice_artifact",
    "validate_lattice_graph",
]

LATTICE_OPT_ENV = "MLX_LATTICE_LATTICE_OPT"
"""Environment variable naming a ``lattice-opt`` executable."""

PathLike = str | os.PathLike[str]


def lattice_graph_status(graph: str, *, lattice_opt: PathLike | None = None) -> LatticeMLIRStatus:
    """Parse and verify ``graph``; report the result instead of raising.

    Raises :class:`ArtifactCapabilityError` only when no verifier is available.
    """
    return verify.lattice_graph_status(graph, lattice_opt=lattice_opt, env=LATTICE_OPT_ENV)


def validate_lattice_graph(graph: str, *, lattice_opt: PathLike | None = None) -> None:
    """Parse and verify ``graph``; raise :class:`LatticeValidationError` if MLIR rejects it."""
    verify.validate_lattice_graph(graph, lattice_opt=lattice_opt, env=LATTICE_OPT_ENV)


def lattice_artifact_status(
    artifact: LatticeArtifact | PathLike, *, lattice_opt: PathLike | None = None
) -> LatticeMLIRStatus:
    """Verify an artifact: its graph, and (with the native module) its weights against it.

    ``artifact`` is a loaded :class:`LatticeArtifact` or the path of a bundle
    directory (loaded first, so the bundle rules apply).  With the in-process
    module the artifact is compiled for MLX, so weight payloads that do not
    match the graph (missing entries, incomplete packed triplets, dtype or
    shape drift) and type errors are reported too.
    """
    from mlx_lattice.artifact.io import LatticeArtifact, load_lattice_artifact

    if not isinstance(artifact, LatticeArtifact):
        artifact = load_lattice_artifact(artifact)
    status = lattice_graph_status(artifact.graph, lattice_opt=lattice_opt)
    if not status.valid or native_module() is None:
        return status
    from mlx_lattice.artifact.runtime import compile_lattice_artifact

    try:
        compile_lattice_artifact(artifact)
    except ValueError as exc:
        return LatticeMLIRStatus(False, str(exc))
    return status


def validate_lattice_artifact(
    artifact: LatticeArtifact | PathLike, *, lattice_opt: PathLike | None = None
) -> None:
    """Raise :class:`LatticeValidationError` unless :func:`lattice_artifact_status` is valid."""
    status = lattice_artifact_status(artifact, lattice_opt=lattice_opt)
    if not status.valid:
        raise LatticeValidationError(
            "the lattice artifact does not verify:\n" + status.diagnostics, status.diagnostics
        )


def lattice_graph_operation_names(graph: str) -> tuple[str, ...]:
    """Names of the entry's operations in order, from the natively verified plan.

    Needs the in-process module; there is deliberately no textual fallback.
    """
    return tuple(op.name for op in import_native_plan(graph).ops)

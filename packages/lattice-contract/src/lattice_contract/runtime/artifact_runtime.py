"""One artifact runtime for every backend: load, save, validate and compile bundles.

Each runtime package (``mlx_lattice.artifact``, ``torch_lattice.artifact``)
builds one :class:`ArtifactRuntime` from its
:class:`~lattice_contract.runtime.ops.RuntimeAdapter`, its lowering registry
and its ``LatticeArtifact`` / ``LatticeProgram`` classes, and publishes the
runtime's methods under the public names; what depends on no runtime (importing
a plan, the operation names, whether the native module is there) is a plain
function here that both runtimes re-export.  The control flow is written here
once, so both runtimes enforce the same bundle rules, verify through the
same native calls and fail with the same error types and words:

* :meth:`ArtifactRuntime.load_artifact` checks the directory
  (:func:`lattice_contract.artifact.bundle.check_bundle_dir`) and the safetensors
  header (:func:`lattice_contract.artifact.safetensors_header.check_safetensors_file`)
  before the library reads the payload, then refuses entries whose shape the
  library read differently and float entries holding NaN or infinity;
* :meth:`ArtifactRuntime.save_artifact` flattens packed weights into their
  triplets and writes the bundle atomically;
* :meth:`ArtifactRuntime.artifact_status` verifies the graph through real
  MLIR and, with the native module, compiles it against the weights so that
  payload drift and type errors are reported as an invalid status;
* :meth:`ArtifactRuntime.compile` and :meth:`ArtifactRuntime.load_program`
  need the native module and say so first (no fallback interpreter exists).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from lattice_contract.artifact import (
    FLOAT_DTYPES,
    BundleError,
    WeightFileError,
    atomic_bundle_write,
    check_bundle_dir,
    check_safetensors_file,
    flatten_bundle_weights,
    non_finite_error,
)
from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE
from lattice_contract.plan import LatticeMLIRStatus, LatticeValidationError, RuntimePlan, verify
from lattice_contract.runtime.lowering import LoweringRegistry
from lattice_contract.runtime.ops import RuntimeAdapter

log = logging.getLogger(__name__)

__all__ = [
    "ARTIFACT_IO_NAMES",
    "ARTIFACT_NAMES",
    "ARTIFACT_PROGRAM_NAMES",
    "ARTIFACT_VERIFY_NAMES",
    "ArtifactRuntime",
    "LatticeArtifactBase",
    "import_lattice_plan",
    "lattice_graph_operation_names",
    "native_artifact_execution_available",
]

ARTIFACT_IO_NAMES: tuple[str, ...] = (
    "BundleError",
    "LatticeArtifact",
    "WeightFileError",
    "load_lattice_artifact",
    "save_lattice_artifact",
)
"""The public names of each runtime's ``artifact.io`` module (bundle IO)."""

ARTIFACT_VERIFY_NAMES: tuple[str, ...] = (
    "LATTICE_OPT_ENV",
    "ArtifactCapabilityError",
    "LatticeMLIRStatus",
    "LatticeValidationError",
    "import_lattice_plan",
    "lattice_artifact_status",
    "lattice_graph_operation_names",
    "lattice_graph_status",
    "native_module",
    "validate_lattice_artifact",
    "validate_lattice_graph",
)
"""The public names of each runtime's verification module (MLX: ``artifact.validation``,
torch: ``artifact.runtime``): the :class:`ArtifactRuntime` methods that verify (they read
the runtime's ``lattice-opt`` variable or compile for it) and the functions of this
module that no runtime changes (:func:`import_lattice_plan`,
:func:`lattice_graph_operation_names`)."""

ARTIFACT_PROGRAM_NAMES: tuple[str, ...] = (
    "RUNTIME",
    "LatticeArtifact",
    "LatticeProgram",
    "ProgramCallError",
    "compile_lattice_artifact",
    "load_lattice_program",
    "native_artifact_execution_available",
)
"""The public names of each runtime's ``artifact.runtime`` module that compile and run."""

ARTIFACT_NAMES: tuple[str, ...] = (
    "ArtifactCapabilityError",
    "BundleError",
    "LatticeArtifact",
    "LatticeMLIRStatus",
    "LatticeProgram",
    "LatticeValidationError",
    "PlanArgument",
    "PlanError",
    "PlanOperation",
    "PlanOutput",
    "PlanTypeError",
    "ProgramCallError",
    "RuntimePlan",
    "artifact_lowering",
    "compile_lattice_artifact",
    "import_lattice_plan",
    "lattice_artifact_status",
    "lattice_graph_operation_names",
    "lattice_graph_status",
    "load_lattice_artifact",
    "load_lattice_program",
    "native_artifact_execution_available",
    "save_lattice_artifact",
    "validate_lattice_artifact",
    "validate_lattice_graph",
)
"""The public names every runtime's ``artifact`` package exports (each adds its own few).

The two packages are one API over :class:`ArtifactRuntime`; declaring the list
here keeps them from drifting apart (a test checks both export exactly these
plus their declared extras).
"""

PathLike = str | os.PathLike[str]


# -- what no runtime changes: one function each, re-exported by both runtimes --------


def import_lattice_plan(graph: str) -> RuntimePlan:
    """Verify ``graph`` in process and freeze its plan (schema- and ABI-checked).

    MLIR's rejection is a :class:`~lattice_contract.plan.LatticeValidationError`
    carrying MLIR's diagnostics; a malformed payload a
    :class:`~lattice_contract.plan.PlanError`.  The plan is the same on every
    runtime (it holds no arrays), so both runtimes publish this one function.
    """
    return verify.import_native_plan(graph)


def lattice_graph_operation_names(graph: str) -> tuple[str, ...]:
    """Names of the entry's operations in order, from the natively verified plan.

    Needs the in-process module; there is deliberately no textual fallback.
    """
    return tuple(op.name for op in verify.import_native_plan(graph).ops)


def native_artifact_execution_available() -> bool:
    """Whether this install has the native MLIR importer needed to execute artifacts."""
    return verify.native_module() is not None


ArrayT = TypeVar("ArrayT")
ArtifactT = TypeVar("ArtifactT", bound="LatticeArtifactBase[Any]")
ProgramT = TypeVar("ProgramT")


@dataclass
class LatticeArtifactBase(Generic[ArrayT]):
    """An artifact in memory: the MLIR text and the safetensors entries by name.

    Packed weights appear as their three entries ``<key>.weight``,
    ``<key>.scales`` and ``<key>.biases``, exactly as stored.  Each runtime
    derives its own ``LatticeArtifact`` (so an artifact holding one library's
    arrays is never taken for the other's).
    """

    graph: str
    weights: dict[str, ArrayT] = field(default_factory=dict)


class ArtifactRuntime(Generic[ArtifactT, ProgramT]):
    """The load / validate / compile glue of one runtime, parameterised by its adapter.

    ``program(plan, weights, **options)`` builds the runtime's
    ``LatticeProgram`` (``options`` are runtime-specific, such as torch's
    ``device``); ``artifact_type(graph, weights)`` its ``LatticeArtifact``.
    """

    def __init__(
        self,
        adapter: RuntimeAdapter,
        lowerings: LoweringRegistry,
        *,
        artifact_type: type[ArtifactT],
        program: Callable[..., ProgramT],
    ) -> None:
        self.adapter = adapter
        self.lowerings = lowerings
        self.artifact_type = artifact_type
        self.program = program

    # -- bundle IO ----------------------------------------------------------------

    def flatten_weights(self, weights: Mapping[str, Any] | None) -> dict[str, Any]:
        """Storage keys to safetensors entries: a packed weight becomes its triplet.

        Entries pass through the adapter's ``storage_buffer`` (torch detaches
        and moves them to the CPU); a name produced twice is an error.
        """
        adapter = self.adapter
        return flatten_bundle_weights(
            weights,
            array_type=adapter.array_type,
            packed_type=adapter.packed_type,
            array_name=adapter.array_type_name,
            convert=adapter.storage_buffer,
        )

    def save_artifact(
        self,
        path: PathLike,
        graph: str,
        weights: Mapping[str, Any] | None = None,
        *,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Write the artifact directory ``path`` atomically.

        ``weights`` maps storage keys to arrays; a packed weight is written as
        its ``.weight``/``.scales``/``.biases`` triplet.  ``metadata`` goes
        into the safetensors ``__metadata__`` header (string to string),
        where reports about the weights travel with them; it never changes
        what the artifact computes.  The bundle appears only once both files
        are complete; on any error nothing is left behind and an artifact
        already at ``path`` is kept.
        """
        if not isinstance(graph, str) or not graph.strip():
            raise TypeError("graph must be the non-empty MLIR text of the artifact")
        flat = self.flatten_weights(weights)
        meta = dict(metadata) if metadata else None

        def write(tmp: Path) -> None:
            (tmp / GRAPH_FILE).write_text(graph, encoding="utf-8")
            self.adapter.write_weights(tmp / WEIGHT_FILE, flat, meta)

        atomic_bundle_write(path, write)

    def load_artifact(self, path: PathLike) -> ArtifactT:
        """Read an artifact directory, enforcing the bundle rules.

        Rejects legacy JSON manifests, other weight files and missing files
        (:class:`~lattice_contract.artifact.bundle.BundleError`).  The weight file's
        header is checked against the reader policy both runtimes share
        (:func:`lattice_contract.artifact.safetensors_header.check_safetensors_file`)
        before the array library reads it; an entry the library reads at
        another shape, and a float entry holding NaN or infinity, are refused.
        """
        paths = check_bundle_dir(path)
        layout = check_safetensors_file(paths.weights)
        try:
            graph = paths.graph.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise BundleError(f"{paths.graph} is not UTF-8 text: {exc}") from None
        adapter = self.adapter
        try:
            loaded = adapter.read_weights(paths.weights)
        except adapter.read_errors as exc:
            raise BundleError(
                f"{paths.weights} is not a readable safetensors file ({exc}); re-save the artifact"
            ) from None
        where = str(paths.weights)
        for name, entry in layout.entries.items():
            problem = (
                adapter.loaded_shape_problem(name, entry.shape, loaded[name])
                if name in loaded
                else f"is in the header but {adapter.name} did not read it"
            )
            if problem is not None:
                raise WeightFileError(where, name, problem)
        floats = [name for name, entry in layout.entries.items() if entry.dtype in FLOAT_DTYPES]
        if floats:
            counts = adapter.non_finite_counts([loaded[name] for name in floats])
            for name, count in zip(floats, counts, strict=True):
                if count:
                    raise non_finite_error(where, name, int(count))
        return self.artifact_type(graph, dict(loaded))

    # -- verification ---------------------------------------------------------------

    def graph_status(self, graph: str, *, lattice_opt: PathLike | None = None) -> LatticeMLIRStatus:
        """Parse and verify ``graph`` with real MLIR; report the result instead of raising.

        Uses the in-process native module, or a ``lattice-opt`` executable
        (``lattice_opt=``, the runtime's environment variable, beside Python
        or on ``PATH``); raises
        :class:`~lattice_contract.plan.verify.ArtifactCapabilityError` only when
        no verifier is available.
        """
        return verify.lattice_graph_status(
            graph, lattice_opt=lattice_opt, env=self.adapter.lattice_opt_env
        )

    def validate_graph(self, graph: str, *, lattice_opt: PathLike | None = None) -> None:
        """Raise :class:`~lattice_contract.plan.LatticeValidationError` unless MLIR accepts it."""
        verify.validate_lattice_graph(
            graph, lattice_opt=lattice_opt, env=self.adapter.lattice_opt_env
        )

    def artifact_status(
        self, artifact: ArtifactT | PathLike, *, lattice_opt: PathLike | None = None
    ) -> LatticeMLIRStatus:
        """Verify an artifact: its graph, and (with the native module) its weights against it.

        ``artifact`` is a loaded ``LatticeArtifact`` or the path of a bundle
        directory (loaded first, so the bundle rules apply).  The graph is
        verified in process or, without the native module, by a
        ``lattice-opt`` executable, so an install without ``lattice_mlir``
        can still vet a bundle.  With the native module the artifact is also
        compiled for this runtime, so weight payloads that do not match the
        graph (missing entries, incomplete packed triplets, dtype or shape
        drift) and type errors are reported too.
        """
        if isinstance(artifact, self.artifact_type):
            loaded: ArtifactT = artifact
        else:
            loaded = self.load_artifact(artifact)  # type: ignore[arg-type]
        if lattice_opt is None and isinstance(loaded.graph, str):
            # One native call parses, verifies and imports the graph (without the
            # native module it verifies through lattice-opt and gives no plan).
            status, plan = verify.graph_status_and_plan(
                loaded.graph, env=self.adapter.lattice_opt_env
            )
            if not status.valid or plan is None:
                return status
        else:
            # The caller's lattice-opt verifies the graph; the weights are still
            # checked against it whenever the native module can import the plan.
            status, plan = self.graph_status(loaded.graph, lattice_opt=lattice_opt), None
            if not status.valid or verify.native_module() is None:
                return status
        try:
            if plan is None:
                plan = verify.import_native_plan(loaded.graph)
            self.program(plan, loaded.weights)
        except LatticeValidationError as exc:
            return LatticeMLIRStatus(False, exc.diagnostics)
        except ValueError as exc:
            return LatticeMLIRStatus(False, str(exc))
        return status

    def validate_artifact(
        self, artifact: ArtifactT | PathLike, *, lattice_opt: PathLike | None = None
    ) -> None:
        """Raise :class:`~lattice_contract.plan.LatticeValidationError` for an invalid artifact.

        Valid means what :meth:`artifact_status` reports.
        """
        status = self.artifact_status(artifact, lattice_opt=lattice_opt)
        if not status.valid:
            raise LatticeValidationError(
                "the lattice artifact does not verify:\n" + status.diagnostics, status.diagnostics
            )

    # -- execution --------------------------------------------------------------------

    def compile(self, artifact: ArtifactT, **options: Any) -> ProgramT:
        """Verify, import and compile a loaded artifact (needs the native module)."""
        verify.require_native("compiling a lattice artifact")
        started = time.perf_counter()
        plan = verify.import_native_plan(artifact.graph)
        imported = time.perf_counter()
        program = self.program(plan, artifact.weights, **options)
        log.info(
            "lattice program: %d ops; verify + import %.3f s, compile %.3f s",
            len(plan.ops),
            imported - started,
            time.perf_counter() - imported,
        )
        return program

    def load_program(self, path: PathLike, **options: Any) -> ProgramT:
        """Load an artifact directory and compile it (needs the native module).

        The capability check comes first, so a missing native module is
        reported as such rather than as a later bundle or graph error.
        """
        verify.require_native("loading a lattice program")
        return self.compile(self.load_artifact(path), **options)

"""What an artifact is on disk: the bundle layout, the weight file's header, atomic writes.

Above :mod:`lattice_contract.dialect`.  :mod:`.bundle` says what a
``model.lattice/`` directory may hold, :mod:`.safetensors_header` reads an
untrusted ``weights.safetensors`` header, :mod:`.atomic` writes every output
of every command so that the destination is never half-written,
:mod:`.export_report` is the quantization report, :mod:`.version` the
release versions stamped into artifacts.
"""

from __future__ import annotations

from lattice_contract.artifact import atomic
from lattice_contract.artifact.atomic import (
    Companion,
    OutputClashError,
    WriterLockedError,
    atomic_write_dir,
    atomic_write_file,
    check_outputs,
    fingerprint,
    path_lock,
    recover_interrupted,
)
from lattice_contract.artifact.bundle import (
    BundleError,
    atomic_bundle_write,
    check_bundle_dir,
    flatten_bundle_weights,
)
from lattice_contract.artifact.command import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    configure_logging,
    describe_path,
    run_command,
    split_verbosity,
)
from lattice_contract.artifact.export_report import (
    METADATA_KEY,
    DenseWeight,
    OutputError,
    QuantizationReport,
    format_report,
)
from lattice_contract.artifact.safetensors_header import (
    FLOAT_DTYPES,
    MAX_HEADER_BYTES,
    SafetensorsLayout,
    WeightFileError,
    check_safetensors_bytes,
    check_safetensors_file,
    non_finite_error,
)
from lattice_contract.artifact.untrusted import (
    NotRegularFileError,
    open_regular_file,
    printable,
    read_regular_file,
    special_kind,
)
from lattice_contract.artifact.version import (
    DISTRIBUTIONS,
    __version__,
    distribution_version,
    version_report,
)

__all__ = [
    "DISTRIBUTIONS",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "FLOAT_DTYPES",
    "MAX_HEADER_BYTES",
    "METADATA_KEY",
    "BundleError",
    "Companion",
    "DenseWeight",
    "NotRegularFileError",
    "OutputClashError",
    "OutputError",
    "QuantizationReport",
    "SafetensorsLayout",
    "WeightFileError",
    "WriterLockedError",
    "__version__",
    "atomic",
    "atomic_bundle_write",
    "atomic_write_dir",
    "atomic_write_file",
    "check_bundle_dir",
    "check_outputs",
    "check_safetensors_bytes",
    "check_safetensors_file",
    "configure_logging",
    "describe_path",
    "distribution_version",
    "fingerprint",
    "flatten_bundle_weights",
    "format_report",
    "non_finite_error",
    "open_regular_file",
    "path_lock",
    "printable",
    "read_regular_file",
    "recover_interrupted",
    "run_command",
    "special_kind",
    "split_verbosity",
    "version_report",
]

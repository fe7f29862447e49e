"""lattice_contract: the one definition of the lattice dialect and its artifact rules.

Standard library only.  Backends import from here; this package imports no
backend.
"""

from lattice_contract.artifact import __version__
from lattice_contract.builder import BuilderError, MLIRModuleBuilder, Value, ValueType
from lattice_contract.dialect import (
    CURRENT_IR_VERSION,
    GRAPH_FILE,
    INPUT_ROLES,
    OUTPUT_ROLES,
    SCHEMA,
    SCHEMA_DIGEST,
    WEIGHT_FILE,
    DialectSchema,
    OpDef,
    as_triple,
    centred_tap_offsets,
    kernel_taps,
    kernel_volume,
    schema_digest,
    subm_offsets,
    tap_index,
    tap_offsets,
)

__all__ = [
    "CURRENT_IR_VERSION",
    "GRAPH_FILE",
    "INPUT_ROLES",
    "OUTPUT_ROLES",
    "SCHEMA",
    "SCHEMA_DIGEST",
    "WEIGHT_FILE",
    "BuilderError",
    "DialectSchema",
    "MLIRModuleBuilder",
    "OpDef",
    "Value",
    "ValueType",
    "__version__",
    "as_triple",
    "centred_tap_offsets",
    "kernel_taps",
    "kernel_volume",
    "schema_digest",
    "subm_offsets",
    "tap_index",
    "tap_offsets",
]

"""lattice_contract: the one definition of the lattice dialect and its artifact rules.

Standard library only.  Backends import from here; this package imports no
backend.  It is a stack of subpackages, each importing only those below it
(docs/architecture.md; import-linter checks it):

* ``codegen``: the build-time generators (TableGen, C++ tables, builder methods);
* ``runtime``: running a verified plan on a backend (lowerings, execution);
* ``frontend``: what the runtimes' user APIs share (op and layer declarations,
  sparse-value rules);
* ``builder``: the textual MLIR builder;
* ``plan``: the frozen execution plan and native verification;
* ``artifact``: bundle layout, weight-file header, atomic writes;
* ``dialect``: the schema, its rules and the value sets.

Each subpackage's ``__init__`` is its face; the names below are the everyday
few (with mlx-lattice 0.6's spellings of the constants), and
:mod:`lattice_contract.mlir` is 0.6's graph-builder API over the builder.
The flat module paths of 0.2 (``lattice_contract.schema``, ...) still
import, with a DeprecationWarning naming the new path.
"""

from lattice_contract import _moved
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

_moved.install()

# mlx-lattice 0.6's spellings of the same constants (one value, two names).
DIALECT_SCHEMA_DIGEST = SCHEMA_DIGEST
DIALECT_IR_VERSION = CURRENT_IR_VERSION
ARTIFACT_GRAPH_FILE = GRAPH_FILE
ARTIFACT_WEIGHTS_FILE = WEIGHT_FILE

__all__ = [
    "ARTIFACT_GRAPH_FILE",
    "ARTIFACT_WEIGHTS_FILE",
    "CURRENT_IR_VERSION",
    "DIALECT_IR_VERSION",
    "DIALECT_SCHEMA_DIGEST",
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

"""Artifact-level constants every producer and consumer agrees on."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

CURRENT_IR_VERSION = 2
"""The only ``lattice.ir_version`` this release reads or writes."""

GRAPH_FILE = "graph.mlir"
"""File name of the MLIR graph inside an artifact directory."""

WEIGHT_FILE = "weights.safetensors"
"""File name of the weight payload; ``lattice.weight_file`` must equal it."""

INPUT_ROLES: tuple[str, ...] = ("tensor", "sparse_coords", "sparse_features", "sparse_active")
"""Roles an entry argument may declare in ``lattice.input_roles``."""

OUTPUT_ROLES: tuple[str, ...] = ("tensor", "sparse_tensor")
"""Roles an entry result may declare in ``lattice.output_roles``."""

SPARSE_INPUT_ROLES: tuple[str, str, str] = ("sparse_coords", "sparse_features", "sparse_active")
"""The three consecutive roles of one logical sparse input, in order."""

SPARSE_ABI_SUFFIXES: tuple[str, str, str] = ("_coords", "_features", "_active")
"""ABI-name suffixes of the three arguments of one logical sparse input."""

KNOWN_PRODUCER_DIGESTS: Mapping[str, str] = MappingProxyType(
    {
        "1380f1e819fc0eb1af587202ecec3c14ec2c981d249333c5061f0263f82072ad": "mlx-lattice 0.6.x",
    }
)
"""Schema digests of other producers whose artifacts ``lattice migrate`` reads.

An artifact carrying one of these is never loaded as is: the verifier's
digest diagnostic names the producer and the migration command."""

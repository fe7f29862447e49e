"""The flat module paths of lattice_contract 0.2, kept importable while users move.

Until this release every module of the contract sat directly under
``lattice_contract`` (``lattice_contract.schema``, ``lattice_contract.verify``,
...).  The modules now live in layered subpackages; each old path is an alias
of its new module (the same module object), and importing it warns once with
the new path, so old code keeps working and says what to change.  One table,
one finder: no stub files.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import MappingProxyType, ModuleType

MOVED = MappingProxyType(
    {
        "api_attrs": "frontend.op_attrs",
        "api_checks": "frontend.op_checks",
        "api_ops": "frontend.ops",
        "api_quant": "frontend.quant",
        "api_signatures": "frontend.signatures",
        "atomic": "artifact.atomic",
        "builder_args": "builder.args",
        "builder_codegen": "codegen.builder_methods",
        "builder_methods": "builder.methods",
        "builder_rules": "builder.result_types",
        "builder_text": "builder.text",
        "bundle": "artifact.bundle",
        "constants": "dialect.constants",
        "coord_range": "dialect.coord_range",
        "digest": "dialect.digest",
        "execute": "runtime.execute",
        "export_report": "artifact.export_report",
        "geometry": "dialect.geometry",
        "kernel": "dialect.kernel",
        "lowering": "runtime.lowering",
        "nn_activations": "frontend.nn_activations",
        "nn_convs": "frontend.nn_convs",
        "nn_features": "frontend.nn_features",
        "nn_layers": "frontend.nn_layers",
        "nn_names": "frontend.nn_names",
        "op_rules": "dialect.extra_semantics",
        "options": "dialect.values",
        "plan_abi": "plan.abi",
        "plan_attrs": "plan.attrs",
        "plan_freeze": "plan.freeze",
        "plan_payload": "plan.payload",
        "plan_records": "plan.records",
        "runtime_artifact": "runtime.artifact_runtime",
        "runtime_lowerings": "runtime.standard_lowerings",
        "runtime_ops": "runtime.ops",
        "safetensors_header": "artifact.safetensors_header",
        "schema": "dialect.schema",
        "schema_extra_ops": "dialect.extra_ops",
        "schema_rules": "dialect.rules",
        "schema_types": "dialect.types",
        "shared_errors": "frontend.op_errors",
        "shared_float": "frontend.float_formats",
        "shared_kernel_map": "frontend.kernel_map",
        "shared_names": "frontend.feature_names",
        "shared_nn": "frontend.nn_args",
        "shared_occupancy": "frontend.occupancy",
        "shared_order": "frontend.row_order",
        "shared_points": "frontend.points",
        "shared_sparse": "frontend.sparse_tensor",
        "sparse_errors": "frontend.sparse_errors",
        "tablegen": "codegen.tablegen",
        "tablegen_names": "codegen.names",
        "tablegen_td": "codegen.td",
        "typecheck": "plan.typecheck",
        "verify": "plan.verify",
        "version": "artifact.version",
    }
)
"""Old module name (under ``lattice_contract.``) -> its new dotted path."""


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self._new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self._new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the already imported new one."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves ``lattice_contract.<old>`` to the module's new home, with a DeprecationWarning."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, name = fullname.rpartition(".")
        if prefix != "lattice_contract" or name not in MOVED:
            return None
        new = f"lattice_contract.{MOVED[name]}"
        warnings.warn(
            f"{fullname} moved to {new}; import from {new.rsplit('.', 1)[0]} "
            "(the old path goes in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())

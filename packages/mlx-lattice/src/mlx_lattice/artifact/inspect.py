"""``lattice inspect PATH``: what an artifact takes, does, holds and whether it verifies.

Prints the call ABI (logical inputs with their ABI arrays and roles, outputs),
the op list in program order with the shapes of the weights each op binds,
the parameter count, a quantization summary and the verification status.
The op list comes from the natively verified plan; without the native module
only the ABI-free parts (weights, ``lattice-opt`` verification) are shown,
because Python never reads the MLIR text itself.

Exit status: 0 when the artifact verifies (and compiles for MLX when the
native module is present), 1 when it does not or cannot be verified, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import mlx.core as mx
from lattice_contract.execute import compile_plan
from lattice_contract.lowering import ResolvedWeight
from lattice_contract.plan import PlanOperation, RuntimePlan

from mlx_lattice.artifact.backend import MLX_BACKEND, dtype_name
from mlx_lattice.artifact.io import LatticeArtifact, load_lattice_artifact
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS
from mlx_lattice.artifact.validation import (
    ArtifactCapabilityError,
    LatticeMLIRStatus,
    lattice_graph_status,
    native_module,
)

__all__ = ["inspect_artifact", "main"]

_SKIP_ATTRS = ("accumulation", "sym_name", "storage_key", "layout", "packing")


def _fmt_attr(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 3 and len(set(value)) == 1:
        return str(value[0])
    if isinstance(value, tuple):
        return "x".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _weight_text(weight: ResolvedWeight) -> str:
    shape = "x".join(map(str, weight.logical_shape))
    if weight.packing is None:
        return f"{weight.storage_key} {weight.dtype}[{shape}]"
    pack = weight.packing
    return (
        f"{weight.storage_key} {weight.dtype}[{shape}] packed {pack['bits']} "
        f"group {pack['group_size']} scales {pack['scale_dtype']}"
    )


def _op_line(index: int, op: PlanOperation, weights: Mapping[str, ResolvedWeight]) -> str:
    results = ", ".join(op.results)
    attrs = " ".join(f"{k}={_fmt_attr(v)}" for k, v in op.attrs.items() if k not in _SKIP_ATTRS)
    line = f"  #{index:<3} {results} = {op.name}({', '.join(op.operands)})"
    if attrs:
        line += f" {{{attrs}}}"
    if op.definition.name == "weight":
        key = op.attrs["storage_key"]
        bound = weights.get(key)
        line += "  <- " + (_weight_text(bound) if bound else f"{key} (unresolved)")
    return line


def _param_summary(weights: Mapping[str, ResolvedWeight], out: TextIO) -> None:
    total = sum(w.parameter_count for w in weights.values())
    packed = [w for w in weights.values() if w.packing is not None]
    packed_params = sum(w.parameter_count for w in packed)
    print(f"parameters: {total:,} in {len(weights)} weight(s)", file=out)
    if not packed:
        print("quantization: none (all weights dense)", file=out)
        return
    groups: dict[tuple[str, int, str], int] = {}
    for w in packed:
        assert w.packing is not None
        key = (w.packing["bits"], w.packing["group_size"], w.packing["scale_dtype"])
        groups[key] = groups.get(key, 0) + 1
    share = 100.0 * packed_params / total if total else 0.0
    print(
        f"quantization: {len(packed)} packed weight(s), {packed_params:,} parameters "
        f"({share:.1f}%)",
        file=out,
    )
    for (bits, group, scale), count in sorted(groups.items()):
        print(f"  {count} x {bits} affine, group_size {group}, scales {scale}", file=out)


def _storage_summary(artifact: LatticeArtifact, out: TextIO) -> None:
    total = sum(int(a.nbytes) for a in artifact.weights.values())
    print(f"weights.safetensors: {len(artifact.weights)} entries, {total:,} bytes", file=out)


def inspect_artifact(
    path: str, *, lattice_opt: str | None = None, out: TextIO | None = None
) -> int:
    """Print the report for the artifact at ``path`` (to stdout by default); return the status."""
    out = sys.stdout if out is None else out
    try:
        artifact = load_lattice_artifact(path)
    except ValueError as exc:
        print(f"error: {exc}", file=out)
        return 1
    print(f"artifact: {path}", file=out)
    _storage_summary(artifact, out)

    try:
        status = lattice_graph_status(artifact.graph, lattice_opt=lattice_opt)
    except ArtifactCapabilityError as exc:
        status = None
        print(f"verification: not run ({exc})", file=out)
    if status is not None:
        via = "lattice-opt" if lattice_opt or native_module() is None else "lattice_mlir"
        if status.valid:
            print(f"verification: valid ({via})", file=out)
        else:
            print(f"verification: INVALID ({via})", file=out)
            print(_indent(status.diagnostics), file=out)
            return 1

    native = native_module()
    if native is None:
        print(
            "ops: not shown (the op list comes from the native lattice_mlir importer, which "
            "is not installed)",
            file=out,
        )
        _fallback_weights(artifact, out)
        return 0 if status is not None else 1
    try:
        plan = RuntimePlan.from_native(native.import_plan(artifact.graph))
    except ValueError as exc:
        print(f"plan: INVALID\n{_indent(str(exc))}", file=out)
        return 1
    return _report_plan(plan, artifact, status, out)


def _report_plan(
    plan: RuntimePlan,
    artifact: LatticeArtifact,
    status: LatticeMLIRStatus | None,
    out: TextIO,
) -> int:
    failure: str | None = None
    weights: Mapping[str, ResolvedWeight] = {}
    try:
        weights = compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, artifact.weights).weights
    except ValueError as exc:
        failure = str(exc)

    print("inputs:", file=out)
    for item in plan.logical_inputs:
        print(f"  {item.name} ({item.kind})", file=out)
        for arg in item.args:
            print(f"    {arg.abi_name:<20} {arg.role:<16} {arg.type}", file=out)
    print("outputs:", file=out)
    for output in plan.outputs:
        print(f"  {output.abi_name:<22} {output.role:<16} {output.type}", file=out)
    print(f"ops: {len(plan.ops)}", file=out)
    for index, op in enumerate(plan.ops):
        print(_op_line(index, op, weights), file=out)
    if failure is None:
        _param_summary(weights, out)
        unused = sorted(
            set(artifact.weights) - {k for w in weights.values() for k in w.storage_keys}
        )
        if unused:
            print(f"unreferenced entries: {', '.join(unused)}", file=out)
        print("compile (mlx): ok", file=out)
        return 0 if status is not None else 1
    print(f"compile (mlx): FAILED\n{_indent(failure)}", file=out)
    return 1


def _fallback_weights(artifact: LatticeArtifact, out: TextIO) -> None:
    print("entries:", file=out)
    for key, array in sorted(artifact.weights.items()):
        shape = "x".join(map(str, array.shape))
        print(f"  {key:<32} {dtype_name(array.dtype)}[{shape}]", file=out)
    total = sum(int(a.size) for a in artifact.weights.values() if a.dtype != mx.uint32)
    print(f"stored values (dense and scale entries): {total:,}", file=out)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice inspect``."""
    parser = argparse.ArgumentParser(
        prog="lattice inspect",
        description="Print an artifact's ABI, ops, weights and verification status.",
    )
    parser.add_argument("path", help="artifact directory (graph.mlir + weights.safetensors)")
    parser.add_argument(
        "--lattice-opt",
        metavar="TOOL",
        help="verify with this lattice-opt executable instead of the in-process module",
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return inspect_artifact(args.path, lattice_opt=args.lattice_opt)

"""``lattice inspect PATH``: what an artifact takes, does, holds and whether it verifies.

PATH is an artifact directory (``graph.mlir`` + ``weights.safetensors``) or a
fixture archive; for an archive the report first says what the archive adds
about its artifact (format version, producer, cases with their tolerances),
or puts it under the key ``archive`` with ``--json``.

Prints the call ABI (logical inputs with their ABI arrays and roles, outputs),
the op list in program order with the shapes of the weights each op binds,
the parameter count, a quantization summary (and, for an artifact the
exporter quantized, what quantization cost against the float model) and the
verification status; ``--json`` prints the same facts as one JSON object for
scripts.  The op list comes from the natively verified plan; without the
native module only the ABI-free parts (weights, ``lattice-opt``
verification) are shown, because Python never reads the MLIR text itself.

The report is collected once (:func:`collect_artifact_report`) and rendered
as text or JSON, so the two forms cannot disagree.

Exit status (the convention of every Lattice command): 0 when the artifact
verifies (and compiles for MLX when the native module is present), 1 when it
does not verify or compile, 2 for usage errors and for a path that is not a
readable artifact directory or fixture archive (the message names which).
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import mlx.core as mx
from lattice_conformance.archive import FixtureArchiveError
from lattice_contract.artifact import (
    EXIT_USAGE,
    METADATA_KEY,
    QuantizationReport,
    format_report,
    printable,
)
from lattice_contract.dialect import REFERENCE_SYSTEM, WEIGHT_FILE, outside_reference
from lattice_contract.plan import RuntimePlan
from lattice_contract.runtime import ResolvedWeight, compile_plan
from mlx_lattice.artifact.backend import MLX_BACKEND, dtype_name
from mlx_lattice.artifact.io import LatticeArtifact, load_lattice_artifact
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS
from mlx_lattice.artifact.validation import (
    ArtifactCapabilityError,
    lattice_graph_status,
    native_module,
)

from lattice_tools.artifact_source import ArtifactSourceError, open_artifact_source

__all__ = [
    "build_parser",
    "collect_artifact_report",
    "inspect_artifact",
    "main",
    "render_text",
]

_SKIP_ATTRS = ("accumulation", "sym_name", "storage_key", "layout", "packing")

Report = dict[str, Any]


def _jsonable(value: Any) -> Any:
    """Plan attribute values (frozen tuples, enums, mappings) as plain JSON values."""
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _weight_entry(weight: ResolvedWeight) -> dict[str, Any]:
    return {
        "storage_key": weight.storage_key,
        "dtype": weight.dtype,
        "shape": list(weight.logical_shape),
        "packing": None if weight.packing is None else _jsonable(weight.packing),
    }


def _quantization_report(path: str) -> tuple[QuantizationReport | None, str | None]:
    """The exporter's report from the safetensors header, or why it cannot be read."""
    from safetensors import safe_open

    try:
        with safe_open(str(Path(path) / WEIGHT_FILE), framework="numpy") as handle:
            metadata = handle.metadata() or {}
    except Exception as exc:
        return None, f"header unreadable: {exc}"
    text = metadata.get(METADATA_KEY)
    if text is None:
        return None, None
    try:
        return QuantizationReport.from_json(text), None
    except ValueError as exc:
        return None, str(exc)


def collect_artifact_report(path: str, *, lattice_opt: str | None = None) -> tuple[Report, int]:
    """Everything ``lattice inspect`` reports about ``path``, and the exit status."""
    report: Report = {"artifact": str(path)}
    try:
        artifact = load_lattice_artifact(path)
    except ValueError as exc:  # not a readable bundle: an input error, not a failed check
        report["error"] = str(exc)
        return report, EXIT_USAGE
    report["weights_file"] = {
        "entries": len(artifact.weights),
        "bytes": sum(int(a.nbytes) for a in artifact.weights.values()),
    }
    quant, quant_problem = _quantization_report(path)
    report["quantization_report"] = None if quant is None else json.loads(quant.to_json())
    if quant_problem:
        report["quantization_report_problem"] = quant_problem

    verification: dict[str, Any]
    try:
        status = lattice_graph_status(artifact.graph, lattice_opt=lattice_opt)
    except ArtifactCapabilityError as exc:
        status = None
        verification = {"valid": None, "skipped": str(exc)}
    if status is not None:
        via = "lattice-opt" if lattice_opt or native_module() is None else "lattice_mlir"
        verification = {"valid": status.valid, "via": via, "diagnostics": status.diagnostics}
    report["verification"] = verification
    if status is not None and not status.valid:
        return report, 1

    native = native_module()
    if native is None:
        report["ops"] = None
        report["entries"] = [
            {"key": key, "dtype": dtype_name(a.dtype), "shape": list(a.shape)}
            for key, a in sorted(artifact.weights.items())
        ]
        report["stored_values"] = sum(
            int(a.size) for a in artifact.weights.values() if a.dtype != mx.uint32
        )
        return report, 0 if status is not None else 1
    try:
        plan = RuntimePlan.from_native(native.import_plan(artifact.graph))
    except ValueError as exc:
        report["plan_error"] = str(exc)
        return report, 1
    outside = outside_reference(plan.ops)
    report["reference_dialect"] = {
        "system": REFERENCE_SYSTEM,
        "within": not outside,
        "outside": outside,
    }
    ok = _collect_plan(report, plan, artifact)
    return report, 0 if ok and status is not None else 1


def _collect_plan(report: Report, plan: RuntimePlan, artifact: LatticeArtifact) -> bool:
    failure: str | None = None
    weights: Mapping[str, ResolvedWeight] = {}
    try:
        weights = compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, artifact.weights).weights
    except ValueError as exc:
        failure = str(exc)
    report["inputs"] = [
        {
            "name": item.name,
            "kind": item.kind,
            "args": [{"abi_name": a.abi_name, "role": a.role, "type": a.type} for a in item.args],
        }
        for item in plan.logical_inputs
    ]
    report["outputs"] = [
        {"abi_name": o.abi_name, "role": o.role, "type": o.type} for o in plan.outputs
    ]
    ops = []
    for index, op in enumerate(plan.ops):
        entry: dict[str, Any] = {
            "index": index,
            "name": op.name,
            "results": list(op.results),
            "operands": list(op.operands),
            "attrs": {k: _jsonable(v) for k, v in op.attrs.items() if k not in _SKIP_ATTRS},
        }
        if op.location is not None:  # the source module path the exporter recorded
            entry["location"] = op.location
        if op.definition.name == "weight":
            bound = weights.get(op.attrs["storage_key"])
            entry["weight"] = (
                _weight_entry(bound) if bound else {"storage_key": op.attrs["storage_key"]}
            )
        ops.append(entry)
    report["ops"] = ops
    report["compile_mlx"] = {"ok": failure is None, "error": failure}
    if failure is not None:
        return False
    total = sum(w.parameter_count for w in weights.values())
    packed = [w for w in weights.values() if w.packing is not None]
    groups: dict[tuple[str, int, str], int] = {}
    for w in packed:
        assert w.packing is not None
        key = (w.packing["bits"], w.packing["group_size"], w.packing["scale_dtype"])
        groups[key] = groups.get(key, 0) + 1
    report["parameters"] = {"total": total, "weights": len(weights)}
    report["quantization"] = {
        "packed_weights": len(packed),
        "packed_parameters": sum(w.parameter_count for w in packed),
        "groups": [
            {"bits": b, "group_size": g, "scale_dtype": s, "count": n}
            for (b, g, s), n in sorted(groups.items())
        ],
    }
    report["unreferenced"] = sorted(
        set(artifact.weights) - {k for w in weights.values() for k in w.storage_keys}
    )
    return True


# ---------------------------------------------------------------------------
# Text rendering.


def _fmt_attr(value: Any) -> str:
    if isinstance(value, list) and len(value) == 3 and len(set(map(str, value))) == 1:
        return str(value[0])
    if isinstance(value, list):
        return "x".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _weight_text(weight: Mapping[str, Any]) -> str:
    if "shape" not in weight:
        return f"{weight['storage_key']} (unresolved)"
    shape = "x".join(map(str, weight["shape"]))
    text = f"{weight['storage_key']} {weight['dtype']}[{shape}]"
    pack = weight["packing"]
    if pack is None:
        return text
    return f"{text} packed {pack['bits']} group {pack['group_size']} scales {pack['scale_dtype']}"


def _op_text(op: Mapping[str, Any]) -> str:
    attrs = " ".join(f"{k}={_fmt_attr(v)}" for k, v in op["attrs"].items())
    line = f"  #{op['index']:<3} {', '.join(op['results'])} = {op['name']}"
    line += f"({', '.join(op['operands'])})"
    if attrs:
        line += f" {{{attrs}}}"
    if "weight" in op:
        line += "  <- " + _weight_text(op["weight"])
    return line


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def render_text(report: Report) -> str:
    """The human-readable form of :func:`collect_artifact_report`'s result."""
    if "error" in report:
        return f"error: {report['error']}"
    lines = [f"artifact: {report['artifact']}"]
    wf = report["weights_file"]
    lines.append(f"weights.safetensors: {wf['entries']} entries, {wf['bytes']:,} bytes")
    ver = report["verification"]
    if ver["valid"] is None:
        lines.append(f"verification: not run ({ver['skipped']})")
    elif ver["valid"]:
        lines.append(f"verification: valid ({ver['via']})")
    else:
        lines.append(f"verification: INVALID ({ver['via']})")
        lines.append(_indent(ver["diagnostics"]))
        return "\n".join(lines)
    ref = report.get("reference_dialect")
    if ref is not None:
        if ref["within"]:
            lines.append(
                f"reference dialect: within {ref['system']}'s (runs there once its digest is "
                "substituted)"
            )
        else:
            lines.append(f"reference dialect: OUTSIDE {ref['system']}'s, because of")
            lines.extend(f"  {item}" for item in ref["outside"])
    if "plan_error" in report:
        lines.append(f"plan: INVALID\n{_indent(report['plan_error'])}")
        return "\n".join(lines)
    if report.get("ops") is None:
        lines.append(
            "ops: not shown (the op list comes from the native lattice_mlir importer, which "
            "is not installed)"
        )
        lines.append("entries:")
        for e in report["entries"]:
            lines.append(f"  {e['key']:<32} {e['dtype']}[{'x'.join(map(str, e['shape']))}]")
        lines.append(f"stored values (dense and scale entries): {report['stored_values']:,}")
        return "\n".join(lines)
    lines.append("inputs:")
    for item in report["inputs"]:
        lines.append(f"  {item['name']} ({item['kind']})")
        for arg in item["args"]:
            lines.append(f"    {arg['abi_name']:<20} {arg['role']:<16} {arg['type']}")
    lines.append("outputs:")
    for out in report["outputs"]:
        lines.append(f"  {out['abi_name']:<22} {out['role']:<16} {out['type']}")
    lines.append(f"ops: {len(report['ops'])}")
    lines += [_op_text(op) for op in report["ops"]]
    compiled = report["compile_mlx"]
    if not compiled["ok"]:
        lines.append(f"compile (mlx): FAILED\n{_indent(compiled['error'])}")
        return "\n".join(lines)
    params, quant = report["parameters"], report["quantization"]
    lines.append(f"parameters: {params['total']:,} in {params['weights']} weight(s)")
    if not quant["packed_weights"]:
        lines.append("quantization: none (all weights dense)")
    else:
        share = 100.0 * quant["packed_parameters"] / params["total"] if params["total"] else 0.0
        lines.append(
            f"quantization: {quant['packed_weights']} packed weight(s), "
            f"{quant['packed_parameters']:,} parameters ({share:.1f}%)"
        )
        for g in quant["groups"]:
            lines.append(
                f"  {g['count']} x {g['bits']} affine, group_size {g['group_size']}, "
                f"scales {g['scale_dtype']}"
            )
    if report.get("quantization_report"):
        lines += format_report(
            QuantizationReport.from_json(json.dumps(report["quantization_report"]))
        )
    if report.get("quantization_report_problem"):
        lines.append(f"quantization report: unreadable ({report['quantization_report_problem']})")
    if report["unreferenced"]:
        lines.append(f"unreferenced entries: {', '.join(report['unreferenced'])}")
    lines.append("compile (mlx): ok")
    return "\n".join(lines)


def inspect_artifact(
    path: str,
    *,
    lattice_opt: str | None = None,
    out: TextIO | None = None,
    as_json: bool = False,
) -> int:
    """Print the report for the artifact at ``path`` (to stdout by default); return the status."""
    out = sys.stdout if out is None else out
    report, status = collect_artifact_report(path, lattice_opt=lattice_opt)
    if as_json:
        report["exit_status"] = status
        print(json.dumps(report, indent=2, sort_keys=True), file=out)
    else:
        print(printable(render_text(report), multiline=True), file=out)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The ``lattice inspect`` arguments (shared with the archive-aware front end)."""
    parser = argparse.ArgumentParser(
        prog="lattice inspect",
        description="Print an artifact's ABI, ops, weights and verification status.",
    )
    parser.add_argument(
        "path", help="artifact directory (graph.mlir + weights.safetensors) or fixture archive"
    )
    parser.add_argument(
        "--lattice-opt",
        metavar="TOOL",
        help="verify with this lattice-opt executable instead of the in-process module",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice inspect`` (artifact directories and fixture archives)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with open_artifact_source(args.path) as source:
            report, status = collect_artifact_report(
                str(source.artifact_dir), lattice_opt=args.lattice_opt
            )
    except (FixtureArchiveError, ArtifactSourceError) as exc:
        report, status = {"artifact": args.path, "error": str(exc)}, EXIT_USAGE
        source = None
    archive = source.archive if source is not None else None
    if archive is not None:
        report["artifact"] = f"{args.path} (artifact/ inside the fixture archive)"
    if args.json:
        report["archive"] = archive
        report["exit_status"] = status
        print(json.dumps(report, indent=2, sort_keys=True))
        return status
    if archive is not None:
        lines = [f"fixture archive: {args.path} (format version {archive['format_version']})"]
        producer = archive["producer"]
        if producer:
            lines.append(
                "  producer: " + ", ".join(f"{k} {v}" for k, v in sorted(producer.items()))
            )
        lines.append(f"  cases: {len(archive['cases'])}")
        for case in archive["cases"]:
            lines.append(
                f"    {case['name']}: atol {case['atol']:g}, rtol {case['rtol']:g}, "
                f"outputs {', '.join(case['outputs'])}"
            )
        print(printable("\n".join(lines), multiline=True))
    # Names, diagnostics and the producer come from the file: no control character of
    # theirs reaches the terminal (JSON output escapes them by itself).
    print(printable(render_text(report), multiline=True), file=sys.stdout)
    return status

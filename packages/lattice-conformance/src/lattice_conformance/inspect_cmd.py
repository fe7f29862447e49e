"""``lattice inspect PATH [--json]`` for bundle directories and fixture archives.

The artifact report itself is :mod:`mlx_lattice.artifact.inspect`'s; this
front end adds what a fixture archive says about its artifact (format
version, producer, cases with their tolerances) before it, or under the key
``archive`` with ``--json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from mlx_lattice.artifact.inspect import build_parser, collect_artifact_report, render_text

from lattice_conformance.archive import FixtureArchiveError
from lattice_conformance.artifact_source import open_artifact_source

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lattice inspect``."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with open_artifact_source(args.path) as source:
            report, status = collect_artifact_report(
                str(source.artifact_dir), lattice_opt=args.lattice_opt
            )
    except FixtureArchiveError as exc:
        report, status = {"artifact": args.path, "error": str(exc)}, 1
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
        print("\n".join(lines))
    print(render_text(report), file=sys.stdout)
    return status

"""How far a quantized artifact moves a model's outputs: the report both runtimes read.

A quantized export is checked twice.  The *conformance* check compares the
artifact with the model running the packed-then-dequantized weights: it
proves the graph and the packed layout are right, and is ~0 by construction.
It says nothing about what quantization costs.  This report is the other
number: the artifact's outputs against the **float** eager model on the
example inputs, per output -- max and p99 absolute error, and for outputs
with several channels how often the per-row argmax (the predicted class)
agrees -- plus every conv/linear weight left dense and why.

The exporter stores it as JSON in the ``__metadata__`` header of
``weights.safetensors`` under :data:`METADATA_KEY`, so it travels with the
artifact and ``lattice inspect`` prints it with :func:`format_report`, the
same lines the exporter's caller sees.  Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "METADATA_KEY",
    "DenseWeight",
    "OutputError",
    "QuantizationReport",
    "format_report",
]

METADATA_KEY = "lattice.quantization_report"
"""Key of the report in the safetensors ``__metadata__`` header (a JSON string)."""

REPORT_VERSION = 1


@dataclass(frozen=True)
class OutputError:
    """One output of the quantized artifact against the float eager model."""

    name: str
    rows: int
    max_abs_error: float
    p99_abs_error: float
    argmax_agreement: float | None
    """Fraction of rows whose argmax over channels is the float model's; None for 1 channel."""


@dataclass(frozen=True)
class DenseWeight:
    """A conv/linear weight the exporter could not pack, and the reason."""

    key: str
    reason: str


@dataclass(frozen=True)
class QuantizationReport:
    """Quantization settings, its measured cost, and what was left dense."""

    bits: int
    group_size: int
    packed: tuple[str, ...]
    dense: tuple[DenseWeight, ...]
    outputs: tuple[OutputError, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        """The compact JSON stored in the artifact."""
        data = {"version": REPORT_VERSION, **asdict(self)}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> QuantizationReport:
        """Parse :meth:`to_json`'s output; ``ValueError`` names what is malformed."""
        try:
            data: Any = json.loads(text)
            if not isinstance(data, Mapping) or data.get("version") != REPORT_VERSION:
                raise ValueError(f"unsupported report version {data.get('version')!r}")
            return cls(
                bits=int(data["bits"]),
                group_size=int(data["group_size"]),
                packed=tuple(str(k) for k in data["packed"]),
                dense=tuple(DenseWeight(str(d["key"]), str(d["reason"])) for d in data["dense"]),
                outputs=tuple(
                    OutputError(
                        name=str(o["name"]),
                        rows=int(o["rows"]),
                        max_abs_error=float(o["max_abs_error"]),
                        p99_abs_error=float(o["p99_abs_error"]),
                        argmax_agreement=(
                            None if o["argmax_agreement"] is None else float(o["argmax_agreement"])
                        ),
                    )
                    for o in data["outputs"]
                ),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            # OverflowError: int() of a 1e999 float is infinity, not a number of bits.
            raise ValueError(f"malformed {METADATA_KEY} in the artifact: {exc}") from None
        except RecursionError:
            raise ValueError(
                f"malformed {METADATA_KEY} in the artifact: nested too deeply to be a report"
            ) from None


def format_report(report: QuantizationReport) -> list[str]:
    """The report as text lines (the exporter's summary and ``lattice inspect``'s section)."""
    lines = [
        f"quantization cost (int{report.bits}, group_size {report.group_size}, "
        f"{len(report.packed)} weight(s) packed), artifact vs the float model on the "
        "example inputs:"
    ]
    for out in report.outputs:
        agree = (
            ""
            if out.argmax_agreement is None
            else f", argmax agrees on {100.0 * out.argmax_agreement:.2f}% of rows"
        )
        lines.append(
            f"  {out.name}: max abs error {out.max_abs_error:.4g}, "
            f"p99 {out.p99_abs_error:.4g} ({out.rows} rows){agree}"
        )
    for weight in report.dense:
        lines.append(f"  left dense: {weight.key} ({weight.reason})")
    return lines

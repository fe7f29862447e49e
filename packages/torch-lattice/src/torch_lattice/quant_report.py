"""What quantization costs: the exporter's float-model comparison and dense-weight warnings.

:func:`save_lattice_model_artifact` checks a quantized artifact against the
model running the packed-then-dequantized weights (the artifact must compute
exactly what its weights say).  That check is ~0 by construction and cannot
tell a user whether int4 flips their predictions.  This module measures the
other thing -- the artifact's outputs against the float eager model -- and
names every conv/linear weight left dense, as a
:class:`~lattice_contract.artifact.export_report.QuantizationReport` and one
:class:`DenseWeightWarning` per weight.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from lattice_contract.artifact import (
    DenseWeight,
    OutputError,
    QuantizationReport,
)
from lattice_contract.dialect import GROUP_SIZES, QUANT_BITS

from torch_lattice.coords import canonical_order
from torch_lattice.ops.quant import QuantizedWeight
from torch_lattice.sparse import SparseTensor

__all__ = [
    "MAPPING_FORM",
    "SHORTHANDS",
    "DenseWeightWarning",
    "expand_quantize",
    "measure_quantization",
    "warn_dense_weights",
]

SHORTHANDS: Mapping[str, Mapping[str, int]] = {
    "int8": {"bits": 8, "group_size": 32},
    "int4": {"bits": 4, "group_size": 32},
}
"""``quantize="int8"`` / ``"int4"``: group size 32, the smallest MLX supports, because
sparse CNNs have narrow layers (32-96 channels) that a group of 64 or 128 would leave dense."""


MAPPING_FORM = (
    f'{{"bits": {"|".join(map(str, QUANT_BITS))}, "group_size": {"|".join(map(str, GROUP_SIZES))}}}'
)
"""How an error spells the mapping form of ``quantize`` (the dialect's value sets)."""


class DenseWeightWarning(UserWarning):
    """A conv/linear weight stays dense in a quantized export (the message says why)."""


def expand_quantize(quantize: Mapping[str, int] | str | None) -> Mapping[str, Any] | None:
    """The mapping form of ``quantize``; strings must be one of :data:`SHORTHANDS`."""
    if isinstance(quantize, str):
        if quantize not in SHORTHANDS:
            raise ValueError(
                f"quantize={quantize!r} is not a known shorthand; use one of "
                f"{sorted(SHORTHANDS)} or {MAPPING_FORM}"
            )
        return SHORTHANDS[quantize]
    return quantize


def _dense_reason(tensor: torch.Tensor, group_size: int) -> str:
    c_in = int(tensor.shape[-1])
    why = f"its {c_in} input channels are not a multiple of group_size {group_size}"
    fits = [g for g in GROUP_SIZES if c_in % g == 0]
    if fits:
        return f"{why}; group_size {fits[0]} would pack it"
    return f"{why}, nor of any supported group size {GROUP_SIZES}; it stays dense"


def _p99(values: torch.Tensor) -> float:
    flat = values.flatten()
    k = max(1, math.ceil(0.99 * flat.numel()))
    return float(flat.kthvalue(k).values)


def _aligned(value: Any) -> torch.Tensor:
    if isinstance(value, SparseTensor):
        return value.feats[canonical_order(value.coords)]
    assert isinstance(value, torch.Tensor)
    return value


def _output_error(name: str, expected: Any, actual: Any) -> OutputError:
    e = _aligned(expected).detach().to("cpu", torch.float64)
    a = _aligned(actual).detach().to("cpu", torch.float64)
    rows = int(e.shape[0]) if e.ndim else 1
    if e.shape != a.shape:
        return OutputError(name, rows, math.inf, math.inf, 0.0)
    if e.numel() == 0:
        return OutputError(name, rows, 0.0, 0.0, None)
    diff = (a - e).abs()
    agreement = None
    if e.ndim == 2 and e.shape[1] > 1:
        agreement = float((a.argmax(dim=1) == e.argmax(dim=1)).double().mean())
    return OutputError(name, rows, float(diff.max()), _p99(diff), agreement)


def measure_quantization(
    quantize: Mapping[str, int],
    packed: Sequence[str],
    unpackable: Sequence[str],
    weights: Mapping[str, torch.Tensor | QuantizedWeight],
    float_outputs: Sequence[Any],
    artifact_outputs: Sequence[Any],
    names: Sequence[str],
) -> QuantizationReport:
    """The report of one quantized export: errors per output, dense weights with reasons."""
    group = int(quantize["group_size"])
    dense = []
    for key in unpackable:
        tensor = weights[key]
        assert isinstance(tensor, torch.Tensor)
        dense.append(DenseWeight(key, _dense_reason(tensor, group)))
    outputs = tuple(
        _output_error(n, e, a)
        for n, e, a in zip(names, float_outputs, artifact_outputs, strict=True)
    )
    return QuantizationReport(
        bits=int(quantize["bits"]),
        group_size=group,
        packed=tuple(packed),
        dense=tuple(dense),
        outputs=outputs,
    )


def warn_dense_weights(report: QuantizationReport) -> None:
    """One :class:`DenseWeightWarning` per weight left dense, attributed to the export call."""
    for weight in report.dense:
        warnings.warn(
            f"quantize: {weight.key} stays dense: {weight.reason}",
            DenseWeightWarning,
            stacklevel=4,
        )

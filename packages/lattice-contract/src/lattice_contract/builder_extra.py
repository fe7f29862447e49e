"""Result-type rules of the builder for the weight-normalised, upsampling and lookup ops.

Registered on :class:`~lattice_contract.builder.MLIRModuleBuilder` through the
same ``_rule`` mechanism as every other op (imported by ``builder`` before it
installs its methods, so the schema-completeness check sees them).  The
normalised convolutions always write ``accumulation = "canonical_f32"`` (as
upstream's producer does) although the dialect accepts its absence.
"""

from __future__ import annotations

from typing import Any

from lattice_contract.builder import (
    ValueType,
    _Call,
    _conv_like,
    _feature_input,
    _features_type,
    _rule,
    _weight_shape,
)

__all__: list[str] = []


def _write_accumulation(kwargs: dict[str, Any]) -> set[str]:
    if kwargs.get("accumulation") is None:
        kwargs["accumulation"] = "canonical_f32"
    return set()


@_rule("normalized_subm_conv3d", prepare=_write_accumulation)
def _normalized_subm(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "keep", target=False)


@_rule(
    "normalized_conv_transpose3d",
    "normalized_generative_conv_transpose3d",
    prepare=_write_accumulation,
)
def _normalized_transpose(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "divide", target=False)


@_rule("target_normalized_conv_transpose3d", prepare=_write_accumulation)
def _target_normalized_transpose(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "divide", target=True)


@_rule("pool_transpose3d", "trilinear_upsample3d")
def _upsample(call: _Call) -> tuple[ValueType, ...]:
    return _conv_like(call, "divide", target=call.operands.get("target") is not None)


@_rule("embedding_lookup")
def _embedding_lookup(call: _Call) -> tuple[ValueType, ...]:
    indices = call.value("indices").type
    table = call.value("weight").type
    if table.packing is not None:
        call.fail(
            "weight",
            "is packed",
            "embedding tables are stored dense (layout embedding_n_c, no packing)",
        )
    shape = _weight_shape(table)
    rows = indices.shape[0] if indices.shape else None
    return (_features_type(rows, shape[-1], table.dtype),)


@_rule("elementwise")
def _elementwise(call: _Call) -> tuple[ValueType, ...]:
    vt, _, _ = _feature_input(call)
    if vt.dtype != "f32":
        call.fail("input", f"has element type {vt.dtype}", "elementwise takes f32; cast first")
    return (vt,)

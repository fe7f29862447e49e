"""SCHEMA_DIGEST: stable across processes and orderings, sensitive to every schema detail."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from lattice_contract import SCHEMA, SCHEMA_DIGEST, schema_digest
from lattice_contract.dialect import (
    AttrSpec,
    DialectSchema,
    OpDef,
    PoolMode,
    PrimitiveDef,
    ResultDef,
    SchemaEnum,
    TypeDef,
    TypeKind,
    WeightFamily,
    canonical_json,
    canonical_schema,
    weight_of,
)

SRC = Path(__file__).resolve().parents[1] / "src"


def with_op(schema: DialectSchema, name: str, **changes: Any) -> DialectSchema:
    """A copy of ``schema`` whose op ``name`` has ``changes`` applied."""
    ops = dict(schema.ops)
    ops[name] = dataclasses.replace(ops[name], **changes)
    return dataclasses.replace(schema, ops=MappingProxyType(ops))


def with_attr(schema: DialectSchema, op: str, attr: str, spec: AttrSpec) -> DialectSchema:
    definition = schema.ops[op]
    attrs = tuple(
        dataclasses.replace(a, spec=spec) if a.name == attr else a for a in definition.attributes
    )
    return with_op(schema, op, attributes=attrs)


# ---------------------------------------------------------------------------
# Stability.


def test_digest_is_sha256_hex_of_the_canonical_json():
    import hashlib

    assert len(SCHEMA_DIGEST) == 64 and int(SCHEMA_DIGEST, 16) >= 0
    assert SCHEMA_DIGEST == schema_digest(SCHEMA) == schema_digest()
    assert hashlib.sha256(canonical_json().encode("ascii")).hexdigest() == SCHEMA_DIGEST


def test_canonical_json_is_sorted_compact_ascii():
    text = canonical_json()
    data = json.loads(text)
    assert data == canonical_schema()
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert text.isascii() and "\n" not in text


@pytest.mark.parametrize("seed", ["0", "1", "12345", "random"])
def test_digest_is_the_same_in_fresh_processes(seed):
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", "import lattice_contract as c; print(c.SCHEMA_DIGEST)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == SCHEMA_DIGEST


def test_digest_ignores_mapping_order():
    shuffled = dataclasses.replace(
        SCHEMA,
        ops=MappingProxyType(dict(reversed(list(SCHEMA.ops.items())))),
        primitives=MappingProxyType(dict(reversed(list(SCHEMA.primitives.items())))),
    )
    assert list(shuffled.ops) != list(SCHEMA.ops)
    assert canonical_json(shuffled) == canonical_json(SCHEMA)
    assert schema_digest(shuffled) == SCHEMA_DIGEST


def test_digest_of_an_unchanged_copy_is_equal():
    copy = with_op(SCHEMA, "conv3d")
    assert copy is not SCHEMA and schema_digest(copy) == SCHEMA_DIGEST


# ---------------------------------------------------------------------------
# Sensitivity: every kind of schema detail changes the digest.


def _renamed_enum_values() -> DialectSchema:
    class PoolModeWithMedian(SchemaEnum):
        __mnemonic__ = PoolMode.__mnemonic__
        max = "max"
        avg = "avg"
        sum = "sum"
        median = "median"

    enums = tuple(PoolModeWithMedian if e is PoolMode else e for e in SCHEMA.enums)
    return dataclasses.replace(SCHEMA, enums=enums)


def _reordered_enum_values() -> DialectSchema:
    class PoolModeReordered(SchemaEnum):
        __mnemonic__ = PoolMode.__mnemonic__
        avg = "avg"
        max = "max"
        sum = "sum"

    enums = tuple(PoolModeReordered if e is PoolMode else e for e in SCHEMA.enums)
    return dataclasses.replace(SCHEMA, enums=enums)


def _type_param_change() -> DialectSchema:
    sparse = SCHEMA.types[0]
    params = tuple(
        dataclasses.replace(p, allowed=("f16", "f32")) if p.name == "dtype" else p
        for p in sparse.params
    )
    types: tuple[TypeDef, ...] = (dataclasses.replace(sparse, params=params), *SCHEMA.types[1:])
    return dataclasses.replace(SCHEMA, types=types)


def _primitive_change(**changes: Any) -> DialectSchema:
    prims = dict(SCHEMA.primitives)
    prims["argmax"] = dataclasses.replace(prims["argmax"], **changes)
    return dataclasses.replace(SCHEMA, primitives=MappingProxyType(prims))


def _added_primitive() -> DialectSchema:
    prims = dict(SCHEMA.primitives)
    prims["argmin"] = PrimitiveDef("argmin", "smallest", ("f32",), "i32", (2,), 1)
    return dataclasses.replace(SCHEMA, primitives=MappingProxyType(prims))


def _without_op(name: str) -> DialectSchema:
    ops = {k: v for k, v in SCHEMA.ops.items() if k != name}
    return dataclasses.replace(SCHEMA, ops=MappingProxyType(ops))


def _with_extra_op() -> DialectSchema:
    softmax = SCHEMA.ops["softmax"]
    ops = {**SCHEMA.ops, "log_softmax": dataclasses.replace(softmax, name="log_softmax")}
    return dataclasses.replace(SCHEMA, ops=MappingProxyType(ops))


def _conv3d_stride() -> AttrSpec:
    return SCHEMA.ops["conv3d"].attribute("stride").spec


MODIFIED: dict[str, object] = {
    "op summary": lambda: with_op(SCHEMA, "conv3d", summary="Something else."),
    "op traits": lambda: with_op(SCHEMA, "softmax", traits=("Commutative",)),
    "attribute minimum": lambda: with_attr(
        SCHEMA, "conv3d", "stride", dataclasses.replace(_conv3d_stride(), minimum=2)
    ),
    "attribute optionality": lambda: with_attr(
        SCHEMA, "conv3d", "stride", _conv3d_stride().optional()
    ),
    "attribute allowed strings": lambda: with_attr(
        SCHEMA,
        "linear",
        "accumulation",
        dataclasses.replace(
            SCHEMA.ops["linear"].attribute("accumulation").spec,
            allowed=("canonical_f32", "native"),
        ),
    ),
    "attribute order": lambda: with_op(
        SCHEMA, "conv3d", attributes=tuple(reversed(SCHEMA.ops["conv3d"].attributes))
    ),
    "attribute renamed": lambda: with_op(
        SCHEMA,
        "softmax",
        attributes=(
            dataclasses.replace(SCHEMA.ops["rms_norm"].attribute("eps"), name="temperature"),
        ),
    ),
    "operand optional": lambda: with_op(
        SCHEMA,
        "linear",
        operands=tuple(
            dataclasses.replace(o, optional=False) if o.name == "bias" else o
            for o in SCHEMA.ops["linear"].operands
        ),
    ),
    "operand weight family": lambda: with_op(
        SCHEMA,
        "linear",
        operands=tuple(
            dataclasses.replace(o, type=weight_of(WeightFamily.linear, WeightFamily.conv3d))
            if o.name == "weight"
            else o
            for o in SCHEMA.ops["linear"].operands
        ),
    ),
    "result type": lambda: with_op(
        SCHEMA,
        "global_pool",
        results=(
            ResultDef(
                "result",
                dataclasses.replace(SCHEMA.ops["softmax"].results[0].type, kind=TypeKind.tensor),
            ),
        ),
    ),
    "enum value set": _renamed_enum_values,
    "enum value order": _reordered_enum_values,
    "type parameter": _type_param_change,
    "primitive output": lambda: _primitive_change(output="i8"),
    "primitive inputs": lambda: _primitive_change(inputs=("f16",)),
    "primitive rank": lambda: _primitive_change(output_rank=2),
    "primitive added": _added_primitive,
    "op removed": lambda: _without_op("softmax"),
    "op added": _with_extra_op,
    "packing fields": lambda: dataclasses.replace(
        SCHEMA, packing_fields=tuple(reversed(SCHEMA.packing_fields))
    ),
    "dialect name": lambda: dataclasses.replace(SCHEMA, name="lattice2"),
}


@pytest.mark.parametrize("change", sorted(MODIFIED))
def test_every_schema_change_changes_the_digest(change):
    modified = MODIFIED[change]()  # type: ignore[operator]
    assert isinstance(modified, DialectSchema)
    assert schema_digest(modified) != SCHEMA_DIGEST
    assert schema_digest(SCHEMA) == SCHEMA_DIGEST  # the real schema is untouched


def test_modified_digests_are_pairwise_distinct():
    digests = {name: schema_digest(make()) for name, make in MODIFIED.items()}  # type: ignore[operator]
    assert len(set(digests.values())) == len(digests)


def test_op_def_fields_all_reach_the_digest():
    """Guard against a new OpDef field that the canonical form forgets."""
    serialised = set(canonical_schema()["ops"]["conv3d"])
    fields = {f.name for f in dataclasses.fields(OpDef)} - {"name", "class_name"}
    assert fields == serialised

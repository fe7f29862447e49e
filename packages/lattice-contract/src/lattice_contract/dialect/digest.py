"""SHA-256 fingerprint of the dialect schema.

Two producers that both claim ``ir_version = 2`` must also agree on every op,
operand, attribute, enum value, type and registered primitive; the digest
makes that checkable.  The canonical form is JSON with sorted keys and no
whitespace, built from the schema objects (never from Python reprs), so it is
stable across runs, dict orderings and Python versions, and any change to the
schema changes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lattice_contract.dialect.constants import CURRENT_IR_VERSION
from lattice_contract.dialect.schema import (
    PACKING_GROUP_SIZES,
    SCHEMA,
    AttrSpec,
    DialectSchema,
    TypeConstraint,
    enum_synonyms,
)


def _constraint(c: TypeConstraint) -> dict[str, Any]:
    return {"kind": c.kind.value, "families": [f.value for f in c.families]}


def _attr(spec: AttrSpec) -> dict[str, Any]:
    return {
        "kind": spec.kind.value,
        "enum": spec.enum.__mnemonic__ if spec.enum else None,
        "minimum": spec.minimum,
        "exclusive_minimum": spec.exclusive_minimum,
        "allowed": list(spec.allowed),
        "required": spec.required,
        "default": spec.default,
    }


def canonical_schema(schema: DialectSchema = SCHEMA) -> dict[str, Any]:
    """The schema as plain JSON data: the exact input of the digest."""
    return {
        "dialect": schema.name,
        "ir_version": CURRENT_IR_VERSION,
        "enums": {
            e.__mnemonic__: [m.value for m in e]  # member order is part of the enum
            for e in schema.enums
        },
        "types": {
            t.mnemonic: [
                {
                    "name": p.name,
                    "kind": p.kind,
                    "enum": p.enum.__mnemonic__ if p.enum else None,
                    "allowed": list(p.allowed),
                    "keyword": p.keyword,
                }
                for p in t.params
            ]
            for t in schema.types
        },
        "enum_synonyms": {
            e.__mnemonic__: dict(enum_synonyms(e)) for e in schema.enums if enum_synonyms(e)
        },
        "packing": [[n, e.__mnemonic__ if e else None] for n, e in schema.packing_fields],
        "packing_group_sizes": list(PACKING_GROUP_SIZES),
        "ops": {
            name: {
                "summary": op.summary,
                "operands": [
                    {
                        "name": o.name,
                        "type": _constraint(o.type),
                        "optional": o.optional,
                        "variadic": o.variadic,
                    }
                    for o in op.operands
                ],
                "results": [{"name": r.name, "type": _constraint(r.type)} for r in op.results],
                "attributes": [{"name": a.name, "spec": _attr(a.spec)} for a in op.attributes],
                "traits": list(op.traits),
                "stride": op.stride.value,
            }
            for name, op in schema.ops.items()
        },
        "primitives": {
            name: {
                "inputs": list(p.inputs),
                "output": p.output,
                "input_ranks": list(p.input_ranks),
                "output_rank": p.output_rank,
            }
            for name, p in schema.primitives.items()
        },
    }


def canonical_json(schema: DialectSchema = SCHEMA) -> str:
    """Canonical serialisation: sorted keys, no insignificant whitespace, ASCII."""
    return json.dumps(canonical_schema(schema), sort_keys=True, separators=(",", ":"))


def schema_digest(schema: DialectSchema = SCHEMA) -> str:
    """SHA-256 hex digest of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(schema).encode("ascii")).hexdigest()


SCHEMA_DIGEST: str = schema_digest()
"""Digest of this release's schema; stamped as ``lattice.schema_digest``."""

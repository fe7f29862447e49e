"""What takes an artifact outside the reference system's dialect (mlx-lattice 0.6).

The ``lattice`` dialect is a superset of the reference system's: an artifact
that uses none of Lattice's extras verifies under the reference verifier once
its schema digest is substituted, and then runs on mlx-lattice.  This module
is the one list of those extras, each with the check that finds it in a plan
op, so that ``lattice inspect`` can say whether an artifact stays within the
reference dialect (and which ops take it outside), the exporter's
``portable=True`` can refuse before writing, and docs/upstream.md's table is
checked against it.

The list is kept beside the schema rather than as a field of each op's
declaration because a field would change the schema digest stamped into
every artifact, and portability is a fact about the reference system, not
about the op's meaning.  A test checks that every op named here is an op of
:data:`~lattice_contract.dialect.schema.SCHEMA`.  Three entries were found by
running the reference verifier (built against MLIR 19) on Lattice's shipped
artifacts: f16 ``voxelize`` features, ``trilinear`` interpolation and a
non-f32 ``embedding_lookup`` table are refused there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "LATTICE_ONLY",
    "REFERENCE_SYSTEM",
    "LatticeOnly",
    "PlanOpLike",
    "outside_reference",
]

REFERENCE_SYSTEM = "mlx-lattice 0.6"
"""The reference system whose dialect Lattice's is a superset of."""


class PlanOpLike(Protocol):
    """What the checks read of a plan op (``lattice_contract.plan.PlanOperation`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def attrs(self) -> Mapping[str, Any]: ...

    @property
    def operand_types(self) -> Sequence[str]: ...


def _text(value: Any) -> str:
    return str(getattr(value, "value", value))


def _always(op: PlanOpLike) -> bool:
    del op
    return True


def _attr_is(name: str, *values: str) -> Callable[[PlanOpLike], bool]:
    def check(op: PlanOpLike) -> bool:
        return name in op.attrs and _text(op.attrs[name]) in values

    return check


def _operand_not_f32(index: int) -> Callable[[PlanOpLike], bool]:
    def check(op: PlanOpLike) -> bool:
        types = op.operand_types
        return len(types) > index and not types[index].rstrip(">").endswith("f32")

    return check


def _bf16_scales(op: PlanOpLike) -> bool:
    packing = op.attrs.get("packing")
    return isinstance(packing, Mapping) and _text(packing.get("scale_dtype")) == "bf16"


def _even_kernel(op: PlanOpLike) -> bool:
    kernel = op.attrs.get("kernel_size")
    sizes = kernel if isinstance(kernel, tuple | list) else (kernel,)
    return any(isinstance(k, int) and k % 2 == 0 for k in sizes)


@dataclass(frozen=True)
class LatticeOnly:
    """One extra of Lattice's dialect that the reference verifier refuses."""

    kind: Literal["op", "attribute value", "element type"]
    op: str
    """The op it appears on (``lattice.voxelize``)."""
    what: str
    """How a reader recognises it, ``reduction = max``."""
    instead: str
    """What a portable artifact uses instead, or why there is no substitute."""
    check: Callable[[PlanOpLike], bool]

    def describe(self) -> str:
        """``lattice.voxelize: f16/bf16 features (an element type)``."""
        return f"{self.op}: {self.what} ({self.kind})"


LATTICE_ONLY: tuple[LatticeOnly, ...] = (
    LatticeOnly("op", "lattice.cast", "the op", "keep one dtype through the model", _always),
    LatticeOnly("op", "lattice.call", "the op", "inline the called function", _always),
    LatticeOnly(
        "op",
        "lattice.full_conv3d",
        "the op",
        "no substitute: the reference dialect has no full convolution",
        _always,
    ),
    LatticeOnly(
        "op",
        "lattice.full_pool3d",
        "the op",
        "no substitute: the reference dialect has no full pooling",
        _always,
    ),
    LatticeOnly(
        "op",
        "lattice.sparse.crop",
        "the op",
        "no substitute: the reference dialect has no grid bounds (spconv's dropped rows)",
        _always,
    ),
    LatticeOnly(
        "op",
        "lattice.sparse.to_dense",
        "the op",
        "no substitute: the reference dialect has no dense hand-off (return the sparse value)",
        _always,
    ),
    LatticeOnly(
        "element type",
        "lattice.voxelize",
        "f16/bf16 features",
        "voxelize f32 point features and cast after it",
        _operand_not_f32(1),
    ),
    LatticeOnly(
        "attribute value",
        "lattice.voxelize",
        "reduction = max",
        "reduction = mean",
        _attr_is("reduction", "max"),
    ),
    LatticeOnly(
        "attribute value",
        "lattice.devoxelize",
        "interpolation = trilinear",
        "interpolation = linear (corners not renormalised) or nearest",
        _attr_is("interpolation", "trilinear"),
    ),
    LatticeOnly(
        "element type",
        "lattice.embedding_lookup",
        "a non-f32 table",
        "an f32 embedding table",
        _operand_not_f32(1),
    ),
    LatticeOnly(
        "attribute value",
        "lattice.weight",
        "bf16 quantization scales",
        "scale_dtype f16 or f32",
        _bf16_scales,
    ),
    LatticeOnly(
        "attribute value",
        "lattice.subm_conv3d",
        "an even kernel size",
        "an odd kernel size",
        _even_kernel,
    ),
)
"""Every extra of Lattice's dialect that takes an artifact outside the reference one."""


def outside_reference(ops: Iterable[PlanOpLike]) -> list[str]:
    """What in ``ops`` the reference verifier refuses, one line per extra found (first op)."""
    found: dict[LatticeOnly, int] = {}
    counts: dict[LatticeOnly, int] = {}
    for index, op in enumerate(ops):
        for extra in LATTICE_ONLY:
            if op.name == extra.op and extra.check(op):
                found.setdefault(extra, index)
                counts[extra] = counts.get(extra, 0) + 1
    return [
        f"{extra.describe()} at op #{index}"
        + (f" and {counts[extra] - 1} more" if counts[extra] > 1 else "")
        + f"; portable form: {extra.instead}"
        for extra, index in found.items()
    ]

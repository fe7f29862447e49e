"""The C++ verifier's output-stride rule is the Python one, on a grid of strides.

The dialect states the rule once in Python (:func:`lattice_contract.dialect.output_stride`:
``t * s`` for the forward family, ``t / s`` for the transposed one, which needs
``s`` to divide ``t``); the builder's result types and both runtimes call it.
The C++ verifier derives strides in its own forward pass
(``packages/lattice-mlir/lib``), and the sparse type does not spell a stride,
so this test makes it visible: each graph feeds the op's result and a second
``sparse.make`` at a chosen stride ``u`` into ``sparse_binary``, whose
``stride.same`` rule holds exactly when the verifier derived ``u``.  For every
op with a ``multiply`` or ``divide`` stride rule and every ``(t, s)`` of the
grid, the native verdict must be: valid at the Python stride, ``stride.same``
one step off it, and ``stride.divides`` where Python refuses.
"""

from __future__ import annotations

import itertools
import re

import lattice_mlir  # the native verifier is the oracle here: missing fails, never skips
import pytest
from lattice_contract.builder import MLIRModuleBuilder
from lattice_contract.dialect import (
    SCHEMA,
    OpDef,
    StrideRule,
    Triple,
    output_stride,
    rule_tag,
)

STRIDED_OPS = [
    op
    for op in SCHEMA.ops.values()
    if op.stride in (StrideRule.multiply, StrideRule.divide)
    and "target" not in {o.name for o in op.operands}
]
INPUT_STRIDES: list[Triple] = [(1, 1, 1), (2, 2, 2), (4, 2, 1), (6, 3, 8)]
OP_STRIDES: list[Triple] = [(1, 1, 1), (2, 2, 2), (2, 1, 3), (3, 3, 3)]
_MAKE_STRIDE = re.compile(r"stride = array<i64: [0-9, ]+>")


def _graph(op: OpDef, s: Triple) -> str:
    """``sparse_binary(op(x), z)`` built at strides the builder accepts (replaced later)."""
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=(6, 6, 6))
    # a generative expansion's kernel is its stride; the others take a 1x1x1 kernel
    kernel = s if op.name.startswith("generative") else (1, 1, 1)
    args: dict[str, object] = {"input": x, "stride": s, "kernel_size": kernel}
    names = {a.name for a in op.attributes}
    if "mode" in names:
        args["mode"] = "max"
    if "eps" in names:
        args["eps"] = 1e-8
    if "weight" in {o.name for o in op.operands}:
        args["weight"] = b.weight(
            storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(4, *kernel, 4)
        )
    y = b.emit(op.name, **args)
    assert not isinstance(y, tuple)
    assert y.type.stride is not None
    z = b.add_sparse_input("z", channels=4, dtype="f32", stride=y.type.stride)
    b.add_output("r", b.sparse_binary(lhs=y, rhs=z, op="add", join="inner"))
    return b.build()


def _with_make_strides(text: str, x: Triple, z: Triple) -> str:
    """The graph with its two ``sparse.make`` strides (x first, z second) replaced."""
    lines = text.splitlines()
    makes = [i for i, line in enumerate(lines) if "lattice.sparse.make" in line]
    assert len(makes) == 2, text
    for row, value in zip(makes, (x, z), strict=True):
        lines[row] = _MAKE_STRIDE.sub(
            f"stride = array<i64: {value[0]}, {value[1]}, {value[2]}>", lines[row]
        )
    return "\n".join(lines) + "\n"


def test_the_grid_covers_both_rules_and_an_indivisible_case() -> None:
    assert {op.stride for op in STRIDED_OPS} == {StrideRule.multiply, StrideRule.divide}
    refused = 0
    for t, s in itertools.product(INPUT_STRIDES, OP_STRIDES):
        try:
            output_stride(StrideRule.divide, t, s, "probe")
        except ValueError:
            refused += 1
    assert 0 < refused < len(INPUT_STRIDES) * len(OP_STRIDES)


@pytest.mark.parametrize("op", STRIDED_OPS, ids=lambda op: op.name)
def test_native_output_stride_matches_the_python_rule(op: OpDef) -> None:
    for s in OP_STRIDES:
        text = _graph(op, s)
        for t in INPUT_STRIDES:
            try:
                want = output_stride(op.stride, t, s, op.name)
            except ValueError:
                status = lattice_mlir.verify(_with_make_strides(text, t, t))
                assert not status.valid, (op.name, t, s)
                assert rule_tag("stride.divides").strip() in status.diagnostics, (
                    op.name,
                    t,
                    s,
                    status.diagnostics,
                )
                continue
            status = lattice_mlir.verify(_with_make_strides(text, t, want))
            assert status.valid, (op.name, t, s, want, status.diagnostics)
            off = (want[0] + 1, want[1], want[2])
            status = lattice_mlir.verify(_with_make_strides(text, t, off))
            assert not status.valid, (op.name, t, s, off)
            assert rule_tag("stride.same").strip() in status.diagnostics, (
                op.name,
                t,
                s,
                status.diagnostics,
            )

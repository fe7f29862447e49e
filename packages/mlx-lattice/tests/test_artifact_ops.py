"""Every schema op through a real bundle on MLX: builder -> save -> load_lattice_program -> run.

The cases are the shared table of :mod:`lattice_conformance.op_cases` (one
graph, its NumPy inputs and weights, and the result in terms of the
runtime's own ops), which the torch runtime runs too.  Here each case's
artifact is written to disk, loaded through the native importer and run on
MLX arrays; its output must equal the direct ``mlx_lattice.ops`` calls on the
same inputs exactly (same rows in the same order, same bits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest
from artifact_support import MX, assert_same, save_and_load
from lattice_conformance.op_cases import OP_CASES, Packed, Sparse, Tensor, covered_ops, make_case
from lattice_contract import SCHEMA
from lattice_contract.builder import MLIRModuleBuilder
from mlx_lattice import SparseTensor, ops
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight

_DTYPES = {**MX, "i32": mx.int32}


class MLXCases:
    """The MLX side of :class:`lattice_conformance.op_cases.CaseRuntime`."""

    ops = ops

    def array(self, value: Tensor) -> mx.array:
        return mx.array(value.values).astype(_DTYPES[value.dtype])

    def sparse(self, value: Sparse) -> SparseTensor:
        feats = mx.array(value.feats).astype(MX[value.dtype])
        return SparseTensor(mx.array(value.coords), feats, stride=value.stride)

    def dtype(self, name: str) -> mx.Dtype:
        return _DTYPES[name]

    def pack(self, value: Packed) -> QuantizedWeight:
        return quantize_weight(mx.array(value.values), bits=value.bits, group_size=value.group_size)

    def dequantize(self, packed: Any) -> mx.array:
        assert isinstance(packed, QuantizedWeight)
        return packed.dequantize()


RUNTIME = MLXCases()


def test_every_schema_op_has_a_case() -> None:
    covered = covered_ops()
    assert covered == set(SCHEMA.ops), set(SCHEMA.ops) - covered


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_artifact_matches_direct_op(tmp_path: Path, name: str) -> None:
    case = make_case(name)
    weights = case.runtime_weights(RUNTIME)
    program = save_and_load(tmp_path, case.builder, weights)
    args = case.runtime_inputs(RUNTIME)
    got = program(*args)
    case.check(got, case.expected(RUNTIME, args, weights), assert_same)


def test_sparse_make_validates_inputs(tmp_path: Path) -> None:
    program = save_and_load(tmp_path, make_case("sparse_make_f16").builder)
    coords = mx.array([[0, 2, 2, 2], [0, 2, 3, 2]], dtype=mx.int32)  # 3 not divisible by 2
    feats = mx.zeros((2, 3), dtype=mx.float16)
    active = mx.array([2], dtype=mx.int32)
    with pytest.raises(ValueError, match="not divisible by the stride"):
        program(coords, feats, active)
    out = program.call_with_trusted_sparse_inputs(coords, feats, active)
    assert isinstance(out, SparseTensor) and out.num_rows == 2


def test_primitives_ties_and_bounds(tmp_path: Path) -> None:
    b = MLIRModuleBuilder()
    xv, tv = b.add_input("x", "tensor<?x8xf32>"), b.add_input("table", "tensor<8x3xf32>")
    labels = b.call(inputs=[xv], callee="argmax")
    b.add_output("labels", labels)
    b.add_output("rows", b.call(inputs=[tv, labels], callee="gather_rows"))
    program = save_and_load(tmp_path, b)
    x = mx.array([[1.0, 3.0, 3.0, 0, 0, 0, 0, 0], [5.0, 5.0, 0, 0, 0, 0, 0, 0]])
    table = mx.arange(24, dtype=mx.float32).reshape(8, 3)
    labels, rows = program(x, table)
    assert labels.tolist() == [1, 0]  # ties pick the first channel
    assert rows.tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    b = MLIRModuleBuilder()
    tv = b.add_input("table", "tensor<?x3xf32>")
    iv = b.add_input("index", "tensor<?xi32>")
    b.add_output("rows", b.call(inputs=[tv, iv], callee="gather_rows"))
    gather = save_and_load(tmp_path, b)
    assert gather(table, mx.array([7, 0], dtype=mx.int32)).tolist()[0] == [21.0, 22.0, 23.0]
    with pytest.raises(
        IndexError,
        match=r"gather_rows: index values span \[-1, 8\] but the "
        r"matrix has 8 rows",
    ):
        gather(table, mx.array([8, -1], dtype=mx.int32))

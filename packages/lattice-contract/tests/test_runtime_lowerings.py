"""The standard lowering table and the RuntimeOps protocol, on a NumPy adapter.

The contract installs every schema op's lowering from one table over a
runtime adapter; these tests drive that machinery with NumPy arrays (real
inputs: the adapter's library calls are NumPy's), so the table's coverage,
its refusal of an adapter that lacks an op, the op names each lowering
needs and the shared ``gather_rows`` refusal are pinned without either
runtime installed.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from lattice_contract import SCHEMA
from lattice_contract.runtime import (
    RUNTIME_OP_NAMES,
    STANDARD_TABLE,
    ExecutionContext,
    LoweringError,
    RuntimeAdapter,
    StandardLowerings,
    lowering_needs,
    missing_runtime_ops,
    runtime_ops_problems,
    standard_lowerings,
)


class NumpySparse:
    """A SparseTensor stand-in with the constructor shape the adapter builds."""

    def __init__(self, coords: Any, feats: Any, stride: Any = 1, active_rows: Any = None) -> None:
        self.coords, self.feats, self.stride, self.active_rows = coords, feats, stride, active_rows
        self.trusted_build = False

    @classmethod
    def trusted(cls, coords: Any, feats: Any, stride: Any = 1, active_rows: Any = None) -> Any:
        made = cls(coords, feats, stride, active_rows)
        made.trusted_build = True
        return made


def _softmax(x: Any, *, axis: int) -> Any:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _numpy_ops(without: str | None = None) -> SimpleNamespace:
    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not exercised here")

    def linear(x: Any, w: Any, b: Any = None) -> Any:
        return x @ w.T + (0 if b is None else b)

    ops: dict[str, Callable[..., Any]] = {
        name: unused for name in RUNTIME_OP_NAMES if name != without
    }
    if without != "softmax":
        ops["softmax"] = _softmax
    if without != "linear":
        ops["linear"] = linear
    return SimpleNamespace(**ops)


def _adapter(without: str | None = None) -> RuntimeAdapter:
    class NumpyAdapter(RuntimeAdapter):
        name = "numpy"
        sparse_type = NumpySparse
        array_type = np.ndarray
        packed_type = tuple
        ops = _numpy_ops(without)

        def argmax_rows(self, x: Any) -> Any:
            return np.argmax(x, axis=1).astype(np.int32)

        def index_span(self, index: Any) -> tuple[int, int] | None:
            return (int(index.min()), int(index.max())) if index.size else None

        def take_rows(self, x: Any, index: Any) -> Any:
            return x[index]

    return NumpyAdapter()


def test_the_table_lowers_every_schema_op_once() -> None:
    registry = standard_lowerings(_adapter())
    assert registry.missing() == ()
    covered: list[str] = []
    for entry in STANDARD_TABLE:
        if entry.op is not None:
            covered += [entry.op] if isinstance(entry.op, str) else list(entry.op)
    assert sorted(SCHEMA.op(name).name for name in covered) == sorted(SCHEMA.ops)
    assert registry.implemented_primitives == frozenset(SCHEMA.primitives)
    for definition in SCHEMA.ops.values():
        function = registry.lowering(definition).function
        assert isinstance(function, MethodType)  # a bound method of the lowerings object
        owner = function.__self__
        assert isinstance(owner, StandardLowerings) and owner.adapter is not None


def test_needs_are_protocol_members_and_cover_it() -> None:
    needs = {entry.attribute: lowering_needs(entry) for entry in STANDARD_TABLE}
    assert needs["conv"] == {"conv3d", "full_conv3d", "conv_transpose3d"}
    assert needs["target_conv"] == {"conv3d", "conv_transpose3d"}
    assert needs["normalized_conv_transpose3d"] == {"normalized_conv_transpose3d"}
    assert needs["weight"] == frozenset() and needs["cast"] == {"cast"}
    # Every protocol member is called by some lowering: the protocol asks for nothing idle.
    assert set().union(*needs.values()) == set(RUNTIME_OP_NAMES)


@pytest.mark.parametrize("absent", ["sparse_cat", "normalized_conv_transpose3d", "full_pool3d"])
def test_an_adapter_lacking_an_op_is_refused_naming_it(absent: str) -> None:
    assert missing_runtime_ops(_numpy_ops(absent)) == (absent,)
    with pytest.raises(LoweringError, match=rf"numpy runtime's ops lack {absent}, which"):
        standard_lowerings(_adapter(absent))


def test_lowerings_run_on_the_adapter() -> None:
    adapter = _adapter()
    registry = standard_lowerings(adapter)
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    y = registry.lowering("softmax").function(x)
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(axis=1, keepdims=True), rtol=1e-6)
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = registry.lowering("linear").function(x, w, None)
    np.testing.assert_array_equal(out, x @ w.T)

    make = registry.lowering("sparse.make").function
    context = ExecutionContext(adapter, {}, registry.primitives, trusted_sparse_inputs=True)
    coords = np.zeros((2, 4), dtype=np.int32)
    built = make(context, coords, x, np.array([2], np.int32), stride=(2, 2, 2))
    assert built.trusted_build and built.stride == (2, 2, 2) and built.feats is x
    context.trusted_sparse_inputs = False
    assert not make(context, coords, x, np.array([2], np.int32), stride=(1, 1, 1)).trusted_build


def test_primitives_share_one_refusal() -> None:
    registry = standard_lowerings(_adapter())
    gather = registry.primitives["gather_rows"]
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(gather(table, np.array([3, 0])), table[[3, 0]])
    assert gather(table, np.array([], dtype=np.int32)).shape == (0, 3)
    with pytest.raises(
        IndexError,
        match=r"^gather_rows: index values span \[-1, 4\] but the matrix has 4 rows; "
        r"indices must lie in \[0, 4\)$",
    ):
        gather(table, np.array([4, -1]))
    argmax = registry.primitives["argmax"]
    assert argmax(np.array([[1.0, 3.0, 3.0], [5.0, 0.0, 5.0]])).tolist() == [1, 0]


def test_adapter_derives_names_and_dtypes() -> None:
    adapter = _adapter()
    assert adapter.lattice_opt_env == "NUMPY_LATTICE_LATTICE_OPT"
    assert adapter.array_type_name == "numpy.ndarray"
    assert adapter.element_name(np.float16) == "f16" and adapter.element_name(np.int32) == "i32"
    assert adapter.element_dtype("u32") is np.uint32
    with pytest.raises(KeyError, match="no numpy dtype for element type 'f8'"):
        adapter.element_dtype("f8")


def test_signature_problems_are_named() -> None:
    ops = _numpy_ops("sparse_cat")

    def conv3d(input: Any, weight: Any, bias: Any = None, *, kernel_size: Any) -> Any:
        return input

    ops.conv3d = conv3d
    ops.linear = lambda x: x
    problems = runtime_ops_problems(ops)
    assert "sparse_cat: missing" in problems
    assert "conv3d: does not take keyword 'stride'" in problems
    assert "conv3d: does not take keyword 'coordinates'" in problems
    assert "linear: takes 1 positional arrays, needs 3" in problems
    assert not [p for p in problems if p.startswith(("softmax", "activation"))]

"""The element-type checker: homogeneous ops, explicit casts, registered primitives."""

from __future__ import annotations

from typing import Any

import pytest
from lattice_contract import SCHEMA
from lattice_contract.plan import PlanError, PlanTypeError, RuntimePlan, ValueType, typecheck_plan

ALL_PRIMITIVES = frozenset(SCHEMA.primitives)
PACK4 = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}


def _plan(b: Any) -> RuntimePlan:
    return RuntimePlan.from_native(b.payload())


def _features_net(
    plan_payload: Any,
    *,
    in_dtype: str = "f32",
    cast_to: str | None = "f16",
    rounding: str | None = "nearest_even",
    weight_dtype: str = "f16",
) -> Any:
    """x (f32 features) -> [cast] -> linear(f16 weight) -> result."""
    b = plan_payload()
    x = b.arg("x", b.tensor((-1, 8), in_dtype), "tensor")
    h = x
    if cast_to is not None:
        attrs = {} if rounding is None else {"rounding": rounding}
        (h,) = b.op("lattice.cast", [x], [b.tensor((-1, 8), cast_to)], **attrs)
    w = b.weight("fc.weight", "linear", weight_dtype)
    out = cast_to or in_dtype
    (y,) = b.op("lattice.linear", [h, w], [b.tensor((-1, 4), out)], accumulation="canonical_f32")
    b.ret(y, "y")
    return b


def test_every_value_gets_element_type_and_rank(plan_payload: Any) -> None:
    typed = typecheck_plan(_plan(_features_net(plan_payload)))
    assert typed["arg0"] == ValueType("tensor", "f32", (-1, 8))
    assert typed["v0"].dtype == "f16" and typed["v0"].rank == 2
    assert typed["v1"] == ValueType("weight", "f16", None, "linear")
    assert typed["v2"].dtype == "f16"
    assert set(typed.values) == {"arg0", "v0", "v1", "v2"}


def test_mixed_element_types_without_cast(plan_payload: Any) -> None:
    plan = _plan(_features_net(plan_payload, cast_to=None, weight_dtype="f16"))
    with pytest.raises(PlanTypeError) as info:
        typecheck_plan(plan)
    message = str(info.value)
    # names the value, the op and the fix
    assert "value 'v0'" in message and "lattice.linear" in message
    assert "differs from f32" in message and "insert a lattice.cast" in message
    assert message.endswith("[rule dtype.same]")


def test_mixed_sparse_and_features_in_sparse_make(plan_payload: Any) -> None:
    b = plan_payload()
    c = b.arg("x_coords", b.tensor((-1, 4), "i32"), "sparse_coords")
    f = b.arg("x_features", b.tensor((-1, 4), "f32"), "sparse_features")
    a = b.arg("x_active", b.tensor((1,), "i32"), "sparse_active")
    (s,) = b.op("lattice.sparse.make", [c, f, a], [b.sparse("f16")], stride=[1, 1, 1])
    b.ret(s, "y")
    with pytest.raises(PlanTypeError, match=r"value 'v0' of op #0 \(lattice.sparse.make -> v0\)"):
        typecheck_plan(_plan(b))


def test_cast_changes_element_type(plan_payload: Any) -> None:
    typed = typecheck_plan(_plan(_features_net(plan_payload, rounding="toward_zero")))
    assert typed["arg0"].dtype == "f32" and typed["v0"].dtype == "f16"


def test_cast_without_rounding_gets_ieees_default(plan_payload: Any) -> None:
    """Left out, ``rounding`` is IEEE's default (the typed-program text's ``nearest``)."""
    plan = _plan(_features_net(plan_payload, rounding=None))
    assert str(plan.ops[0].attrs["rounding"]) == "nearest_even"
    typecheck_plan(plan)


def test_cast_with_bad_rounding(plan_payload: Any) -> None:
    b = _features_net(plan_payload, rounding="nearest")
    with pytest.raises(PlanError, match=r"lattice.cast -> v0.*#lattice.rounding value 'nearest'"):
        _plan(b)


@pytest.mark.parametrize(
    ("src", "dst", "src_shape", "dst_shape", "message"),
    [
        ("i32", "f32", (-1, 8), (-1, 8), r"between float types"),
        ("f32", "f16", (-1, 8), (-1, 4), r"keeps the shape"),
        ("f32", "f16", (-1, 8), (-1,), r"keeps the shape"),
    ],
)
def test_cast_rules(
    plan_payload: Any,
    src: str,
    dst: str,
    src_shape: tuple[int, ...],
    dst_shape: tuple[int, ...],
    message: str,
) -> None:
    b = plan_payload()
    x = b.arg("x", b.tensor(src_shape, src), "tensor")
    (y,) = b.op("lattice.cast", [x], [b.tensor(dst_shape, dst)], rounding="upward")
    b.ret(y, "y")
    with pytest.raises(PlanTypeError, match=message):
        typecheck_plan(_plan(b))


def _call(
    plan_payload: Any,
    callee: str,
    inputs: list[tuple[tuple[int, ...], str]],
    result: tuple[tuple[int, ...], str],
) -> RuntimePlan:
    b = plan_payload()
    labels = [
        b.arg(f"in{i}", b.tensor(shape, dt), "tensor") for i, (shape, dt) in enumerate(inputs)
    ]
    (y,) = b.op("lattice.call", labels, [b.tensor(*result)], callee=callee)
    b.ret(y, "y")
    return _plan(b)


def test_registered_primitive_changes_element_type(plan_payload: Any) -> None:
    plan = _call(plan_payload, "argmax", [((-1, 5), "f32")], ((-1,), "i32"))
    typed = typecheck_plan(plan, ALL_PRIMITIVES)
    assert typed["v0"] == ValueType("tensor", "i32", (-1,))
    plan = _call(plan_payload, "gather_rows", [((-1, 5), "f32"), ((-1,), "i32")], ((-1, 5), "f32"))
    assert typecheck_plan(plan, ALL_PRIMITIVES)["v0"].dtype == "f32"


def test_unregistered_primitive(plan_payload: Any) -> None:
    plan = _call(plan_payload, "topk", [((-1, 5), "f32")], ((-1,), "i32"))
    with pytest.raises(
        PlanTypeError,
        match=r"value 'v0' of op #0 \(lattice.call -> v0\): callee "
        r"'topk' is not a registered primitive; registered: argmax, gather_rows",
    ):
        typecheck_plan(plan, ALL_PRIMITIVES)


def test_primitive_without_implementation(plan_payload: Any) -> None:
    plan = _call(plan_payload, "argmax", [((-1, 5), "f32")], ((-1,), "i32"))
    with pytest.raises(
        PlanTypeError,
        match=r"value 'v0' of op #0 \(lattice.call -> v0\): "
        r"primitive 'argmax' has no implementation in this runtime",
    ):
        typecheck_plan(plan, {"gather_rows"})


@pytest.mark.parametrize(
    ("inputs", "result", "message"),
    [
        (
            [((-1, 5), "f16")],
            ((-1,), "i32"),
            r"value 'arg0'.*input #0 of primitive 'argmax' must "
            r"be a rank-2 f32",
        ),
        ([((-1,), "f32")], ((-1,), "i32"), r"must be a rank-2 f32 tensor, got tensor<\?xf32>"),
        ([((-1, 5), "f32")], ((-1,), "f32"), r"returns a rank-1 i32 tensor"),
        ([((-1, 5), "f32"), ((-1,), "i32")], ((-1,), "i32"), r"takes 1 input\(s\), got 2"),
    ],
)
def test_primitive_signature_is_exact(
    plan_payload: Any, inputs: Any, result: Any, message: str
) -> None:
    plan = _call(plan_payload, "argmax", inputs, result)
    with pytest.raises(PlanTypeError, match=message):
        typecheck_plan(plan, ALL_PRIMITIVES)


def _conv(
    plan_payload: Any,
    *,
    x: str = "f16",
    w: str = "f16",
    family: str = "conv3d",
    packing: dict[str, Any] | None = None,
    out: str = "f16",
) -> RuntimePlan:
    b = plan_payload()
    s = b.sparse_input("x", x, 32)
    wt = b.weight("w", family, w, packing)
    (y,) = b.op("lattice.conv3d", [s, wt], [b.sparse(out)], **b.conv_attrs())
    b.ret(y, "y")
    return _plan(b)


def test_packed_weights_take_the_consumer_type(plan_payload: Any) -> None:
    typed = typecheck_plan(_conv(plan_payload, w="i4", packing=PACK4))
    assert typed["v1"].dtype == "i4"
    pack8 = dict(PACK4, bits="int8")
    typecheck_plan(_conv(plan_payload, x="f32", out="f32", w="i8", packing=pack8))
    # upstream's producer declares a packed weight with its dequantized float type
    typed = typecheck_plan(_conv(plan_payload, x="f32", out="f32", w="f32", packing=pack8))
    assert typed["v1"].dtype == "f32"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"w": "f32"},
            r"value 'v1' of op #2 \(lattice.conv3d -> v2\): element type f32 differs "
            r"from f16 of 'v0'",
        ),
        ({"out": "f32"}, r"value 'v2'.*element type f32 differs"),
        ({"w": "i4"}, r"weight dtype i4 is packed and needs a #lattice.packing"),
        ({"packing": PACK4, "w": "f32"}, r"element type f32 differs from f16"),
        ({"w": "i8", "packing": PACK4}, r"packing bits int4 do not match weight dtype i8"),
    ],
)
def test_weight_typing_rules(plan_payload: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PlanTypeError, match=message):
        typecheck_plan(_conv(plan_payload, **kwargs))


def test_weight_family_must_fit_operand(plan_payload: Any) -> None:
    b = plan_payload()
    s = b.sparse_input("x", "f16", 32)
    wt = b.weight("w", "linear", "f16")
    (y,) = b.op("lattice.conv3d", [s, wt], [b.sparse("f16")], **b.conv_attrs())
    b.ret(y, "y")
    with pytest.raises(
        PlanTypeError,
        match=r"value 'v1'.*operand 'weight' must be "
        r"!lattice.weight<conv3d, dtype>, got weight<linear, f16>",
    ):
        typecheck_plan(_plan(b))


def test_weight_layout_must_fit_family(plan_payload: Any) -> None:
    b = plan_payload()
    s = b.sparse_input("x", "f16", 32)
    wt = b.weight("w", "conv3d", "f16")
    b.ops[-1]["attrs"]["layout"] = "linear_o_i"
    (y,) = b.op("lattice.conv3d", [s, wt], [b.sparse("f16")], **b.conv_attrs())
    b.ret(y, "y")
    with pytest.raises(
        PlanTypeError,
        match=r"value 'v1'.*weights of family conv3d use layout "
        r"conv3d_o_xyz_i, not linear_o_i",
    ):
        typecheck_plan(_plan(b))


def test_packing_only_for_conv_and_linear(plan_payload: Any) -> None:
    b = plan_payload()
    s = b.sparse_input("x", "f16", 32)
    wt = b.weight("w", "conv3d", "f16")
    bias = b.weight("b", "bias", "i4", PACK4)
    (y,) = b.op("lattice.conv3d", [s, wt, bias], [b.sparse("f16")], **b.conv_attrs())
    b.ret(y, "y")
    with pytest.raises(PlanTypeError, match=r"bias weights cannot be packed"):
        typecheck_plan(_plan(b))


def test_feature_rank_and_kind(plan_payload: Any) -> None:
    b = plan_payload()
    x = b.arg("x", b.tensor((-1, 4, 2), "f32"), "tensor")
    (y,) = b.op("lattice.softmax", [x], [b.tensor((-1, 4, 2), "f32")])
    b.ret(y, "y")
    with pytest.raises(PlanTypeError, match=r"operand 'input' must be rank-2 float tensor"):
        typecheck_plan(_plan(b))

    b = plan_payload()
    x = b.sparse_input("x", "f32", 4)
    (y,) = b.op("lattice.softmax", [x], [b.tensor((-1, 4), "f32")])
    b.ret(y, "y")
    with pytest.raises(PlanTypeError, match=r"value 'v0'.*got sparse<f32>"):
        typecheck_plan(_plan(b))


def test_points_and_indices_do_not_join_the_shared_type(plan_payload: Any) -> None:
    b = plan_payload()
    s = b.sparse_input("x", "f16", 4)
    p = b.arg("points", b.tensor((-1, 3), "f32"), "tensor")
    i = b.arg("batch", b.tensor((-1,), "i32"), "tensor")
    n = b.arg("point_active_rows", b.tensor((1,), "i32"), "tensor")
    (y,) = b.op(
        "lattice.devoxelize",
        [p, s, i, n],
        [b.tensor((-1, 4), "f16")],
        voxel_size=[0.5, 0.5, 0.5],
        origin=[0.0, 0.0, 0.0],
        interpolation="trilinear",
    )
    b.ret(y, "y")
    typed = typecheck_plan(_plan(b))
    assert typed["v1"].dtype == "f16"


def test_global_pool_rows_match_batch_size(plan_payload: Any) -> None:
    b = plan_payload()
    s = b.sparse_input("x", "f32", 4)
    (y,) = b.op(
        "lattice.global_pool",
        [s],
        [b.tensor((3, 4), "f32")],
        mode="avg",
        batch_size=2,
        accumulation="canonical_f32",
    )
    b.ret(y, "y")
    with pytest.raises(PlanTypeError, match=r"result has 3 rows but batch_size is 2"):
        typecheck_plan(_plan(b))


@pytest.mark.parametrize(
    ("batch_size", "rows", "ok"), [(-1, -1, True), (-1, 2, False), (0, 0, True), (2, -1, True)]
)
def test_global_pool_dynamic_rows(plan_payload: Any, batch_size: int, rows: int, ok: bool) -> None:
    b = plan_payload()
    s = b.sparse_input("x", "f32", 4)
    (y,) = b.op(
        "lattice.global_pool", [s], [b.tensor((rows, 4), "f32")], mode="sum", batch_size=batch_size
    )
    b.ret(y, "y")
    plan = _plan(b)
    assert plan.ops[-1].attrs["accumulation"] == "canonical_f32"  # the optional default
    if ok:
        assert typecheck_plan(plan)[y].shape == (rows, 4)
    else:
        with pytest.raises(PlanTypeError, match=r"batch_size -1 infers the rows at run time"):
            typecheck_plan(plan)

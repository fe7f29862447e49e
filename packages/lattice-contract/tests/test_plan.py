"""RuntimePlan.from_native: every payload rule, one corrupted payload each."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from lattice_contract import SCHEMA
from lattice_contract.plan import PlanError, PlanOperation, RuntimePlan

Payload = dict[str, Any]

PACKING = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}


def _conv(builder_cls: Any, *, bias: bool = True, packed: bool = False) -> Payload:
    b = builder_cls()
    x = b.sparse_input("x", "f16", 32)
    w = b.weight("stem.weight", "conv3d", "i4" if packed else "f16", PACKING if packed else None)
    operands = [x, w]
    if bias:
        operands.append(b.weight("stem.bias", "bias", "f16"))
    (y,) = b.op("lattice.conv3d", operands, [b.sparse("f16")], **b.conv_attrs(3, 2, 1))
    b.ret(y, "y")
    payload: Payload = b.payload()
    return payload


@pytest.fixture
def conv(plan_payload: Any) -> Payload:
    return _conv(plan_payload)


def _op(payload: Payload, name: str) -> dict[str, Any]:
    return next(o for o in payload["ops"] if o["name"] == name)


def _set(path: str, value: Any) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        *head, last = path.split(".")
        target: Any = p
        for part in head:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is _DELETE:
            del target[int(last) if last.isdigit() else last]
        else:
            target[int(last) if last.isdigit() else last] = value

    return mutate


_DELETE = object()


def _conv_attr(name: str, value: Any) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        attrs = _op(p, "lattice.conv3d")["attrs"]
        if value is _DELETE:
            del attrs[name]
        else:
            attrs[name] = value

    return mutate


def _weight_attr(name: str, value: Any, key: str = "stem.weight") -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        op = next(o for o in p["ops"] if o["attrs"].get("storage_key") == key)
        if value is _DELETE:
            del op["attrs"][name]
        else:
            op["attrs"][name] = value

    return mutate


def _packing(**changes: Any) -> Callable[[Payload], None]:
    packing = dict(PACKING)
    for k, v in changes.items():
        if v is _DELETE:
            del packing[k]
        else:
            packing[k] = v
    return _weight_attr("packing", packing)


def _rename_op(name: str) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        _op(p, "lattice.conv3d")["name"] = name

    return mutate


def _conv_operands(fn: Callable[[list[str], list[str]], object]) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        op = _op(p, "lattice.conv3d")
        fn(op["operands"], op["operand_types"])

    return mutate


def _repeat_first_operand(operands: list[str], types: list[str]) -> None:
    """One operand too many: the first again, with its type."""
    operands.append(operands[0])
    types.append(types[0])


def _no_returns(p: Payload) -> None:
    """A function that returns nothing (no return values, no outputs)."""
    p["returns"] = []
    p["outputs"] = []


def _drop_op(name: str) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        p["ops"] = [o for o in p["ops"] if o["name"] != name]

    return mutate


def _conv_first(p: Payload) -> None:
    p["ops"].insert(0, p["ops"].pop())


def _dup_result(p: Payload) -> None:
    p["ops"][1]["results"] = list(p["ops"][0]["results"])


def _result_is_arg(p: Payload) -> None:
    p["ops"][0]["results"] = ["arg1"]


def _extra_result(p: Payload) -> None:
    op = _op(p, "lattice.conv3d")
    op["results"].append("v99")
    op["result_types"].append(op["result_types"][0])


def _missing_type(p: Payload) -> None:
    del p["types"]["!lattice.weight<bias, f16>"]


def _type_mismatch(p: Payload) -> None:
    op = _op(p, "lattice.conv3d")
    op["operand_types"][0] = op["operand_types"][0].replace("f16", "f32")


def _swap_roles(p: Payload) -> None:
    p["args"][0]["role"], p["args"][1]["role"] = p["args"][1]["role"], p["args"][0]["role"]


def _coords_type(p: Payload) -> None:
    p["types"]["tensor<?x4xi32>"]["dtype"] = "f32"


def _output_role_vs_type(p: Payload) -> None:
    p["outputs"][0]["role"] = "tensor"


CASES: list[tuple[str, Callable[[Payload], object], str]] = [
    # module-level contract
    ("ir_version missing", _set("ir_version", _DELETE), "lacks 'ir_version'"),
    ("ir_version 1", _set("ir_version", 1), r"ir_version is 1; .*only version 2"),
    ("ir_version 3", _set("ir_version", 3), r"ir_version is 3"),
    ("ir_version bool", _set("ir_version", True), r"ir_version is True"),
    ("ir_version text", _set("ir_version", "2"), r"ir_version is '2'"),
    ("digest missing", _set("schema_digest", _DELETE), "lacks 'schema_digest'"),
    ("digest empty", _set("schema_digest", ""), "schema_digest is missing"),
    ("digest mismatch", _set("schema_digest", "0" * 64), "does not match this release"),
    ("weight file", _set("weight_file", "model.safetensors"), "weight_file is 'model"),
    ("entry name", _set("name", "main"), "entry function is @main; it must be @forward"),
    ("unknown payload key", _set("graph", {}), "unknown field"),
    ("types not a mapping", _set("types", ["tensor<1xi32>"]), "'types' must be"),
    ("args not list", _set("args", "arg0"), "'args' must be a list"),
    # ops
    ("unknown op", _rename_op("lattice.conv4d"), r"'lattice.conv4d', which the lattice schema"),
    ("foreign dialect op", _rename_op("arith.addf"), r"only lattice dialect operations"),
    ("quantized op variant", _rename_op("lattice.quantized_conv3d"), r"quantized op variants"),
    (
        "too few operands",
        _conv_operands(lambda o, t: (o.pop(), t.pop(), o.pop(), t.pop())),
        r"op #\d \(lattice.conv3d -> v\d+\) has 1 operand\(s\); the schema expects 2 to 3",
    ),
    (
        "too many operands",
        _conv_operands(_repeat_first_operand),
        r"has 4 operand\(s\)",
    ),
    ("operand types length", _conv_operands(lambda o, t: t.pop()), "lists 2 operand type"),
    ("result count", _extra_result, r"has 2 result\(s\); the schema expects 1"),
    ("op missing field", lambda p: _op(p, "lattice.conv3d").pop("attrs"), "lacks 'attrs'"),
    ("unknown attribute", _conv_attr("groups", 1), r"unknown attribute\(s\) 'groups'"),
    ("missing attribute", _conv_attr("stride", _DELETE), r"lacks required attribute 'stride'"),
    ("missing accumulation", _conv_attr("accumulation", _DELETE), r"'accumulation'"),
    ("triple length", _conv_attr("stride", [2, 2]), r"'stride' must be three integers"),
    ("triple of floats", _conv_attr("stride", [2.0, 2.0, 2.0]), r"must be three integers"),
    ("triple of bools", _conv_attr("dilation", [True, True, True]), r"must be three integers"),
    ("triple as string", _conv_attr("kernel_size", "333"), r"must be three integers"),
    ("triple minimum", _conv_attr("stride", [1, 0, 1]), r"every entry >= 1"),
    ("padding negative", _conv_attr("padding", [0, -1, 0]), r"every entry >= 0"),
    ("string allowed set", _conv_attr("accumulation", "fp16"), r"must be one of canonical_f32"),
    ("string type", _conv_attr("accumulation", 1), r"must be a string"),
    ("bad enum value", _weight_attr("layout", "o_i_xyz"), r"invalid #lattice.weight_layout"),
    ("legacy zyx layout", _weight_attr("layout", "conv3d_o_zyx_i"), r"legacy z-major"),
    ("enum not string", _weight_attr("layout", 3), r"must be a string"),
    ("symbol missing", _weight_attr("sym_name", _DELETE), r"lacks required attribute 'sym_name'"),
    ("storage key empty", _weight_attr("storage_key", ""), r"must not be empty"),
    # labels
    ("use before definition", _conv_first, r"uses value 'v0' before it is defined"),
    ("undefined operand", _conv_operands(lambda o, t: o.__setitem__(1, "v42")), r"'v42' before"),
    ("duplicate op label", _dup_result, r"redefines value label"),
    ("result reuses arg label", _result_is_arg, r"redefines value label 'arg1'"),
    ("operand type drift", _type_mismatch, r"uses 'v0' as .* but it was defined as"),
    ("undefined return", _set("returns", ["v77"]), r"return value 'v77' is not defined"),
    ("no returns", _no_returns, "returns nothing"),
    # ABI
    ("bad input role", _set("args.0.role", "coords"), r"role 'coords'"),
    ("roles out of order", _swap_roles, r"three consecutive arguments|roles"),
    ("sparse triple truncated", lambda p: p["args"].pop(), r"roles from there|before|sparse"),
    ("abi prefix mismatch", _set("args.1.abi_name", "y_features"), r"expected 'x_features'"),
    ("abi coords suffix", _set("args.0.abi_name", "points"), r"named <name>_coords"),
    ("duplicate arg label", _set("args.1.name", "arg0"), r"reuses value label 'arg0'"),
    ("coords role type", _coords_type, r"role 'sparse_coords' but its type is not"),
    ("bad output role", _set("outputs.0.role", "dense"), r"role 'dense'"),
    ("output role vs type", _output_role_vs_type, r"role 'tensor' but its type"),
    ("output name mismatch", _set("outputs.0.name", "v0"), r"names value 'v0' but return #0"),
    ("output type mismatch", _set("outputs.0.type", "tensor<1xi32>"), r"declares type"),
    ("outputs count", _set("outputs", []), r"declares 0 output\(s\) for 1 returned"),
    # types table
    ("type entry missing", _missing_type, r"no entry for '!lattice.weight<bias, f16>'"),
    ("type kind", _set("types.tensor<1xi32>.kind", "memref"), r"kind is 'memref'"),
    ("type shape", _set("types.tensor<1xi32>.shape", [1.5]), r"shape must be ints"),
    (
        "sparse with shape",
        lambda p: p["types"][p["outputs"][0]["type"]].update(shape=[1]),
        r"must have shape null",
    ),
]


@pytest.mark.parametrize(("mutate", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_corrupted_payload_is_rejected(
    conv: Payload, mutate: Callable[[Payload], object], message: str
) -> None:
    RuntimePlan.from_native(conv)  # the uncorrupted payload is valid
    mutate(conv)
    with pytest.raises(PlanError, match=message):
        RuntimePlan.from_native(conv)


PACKING_CASES: list[tuple[str, Callable[[Payload], None], str]] = [
    ("not a map", _weight_attr("packing", "int4"), r"must be a packing map"),
    ("missing field", _packing(mode=_DELETE), r"missing mode"),
    ("unknown field", _packing(axis=-1), r"unknown 'axis'"),
    ("bits", _packing(bits="int3"), r"bits must be one of dense, int4, int8"),
    ("group size zero", _packing(group_size=0), r"group_size must be one of 32, 64, 128"),
    ("group size bool", _packing(group_size=True), r"group_size must be one of 32, 64, 128"),
    ("group size 12", _packing(group_size=12), r"group_size must be one of 32, 64, 128"),
    ("group size 16", _packing(group_size=16), r"MLX's affine quantization supports"),
    ("group size 2**70", _packing(group_size=2**70), r"an integer of 71 bits"),
    ("dense map", _packing(bits="dense"), r"dense weights carry none"),
    ("scale dtype", _packing(scale_dtype="f64"), r"scale_dtype must be one of"),
    ("mode", _packing(mode="symmetric"), r"mode must be one of affine"),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in PACKING_CASES], ids=[c[0] for c in PACKING_CASES]
)
def test_bad_packing_map(
    plan_payload: Any, mutate: Callable[[Payload], None], message: str
) -> None:
    payload = _conv(plan_payload, packed=True)
    RuntimePlan.from_native(payload)
    mutate(payload)
    with pytest.raises(PlanError, match=message):
        RuntimePlan.from_native(payload)


def test_valid_plan_is_typed_and_deep_frozen(plan_payload: Any) -> None:
    payload = _conv(plan_payload, packed=True)
    plan = RuntimePlan.from_native(payload)
    conv = next(op for op in plan.ops if op.name == "lattice.conv3d")
    assert isinstance(conv, PlanOperation)
    assert conv.definition is SCHEMA.ops["conv3d"]
    assert conv.attrs["stride"] == (2, 2, 2) and isinstance(conv.attrs["stride"], tuple)
    assert conv.attrs["accumulation"] == "canonical_f32"
    assert isinstance(conv.attrs, MappingProxyType)
    with pytest.raises(TypeError):
        conv.attrs["stride"] = (1, 1, 1)  # type: ignore[index]
    weight = plan.weight_operations()[0]
    packing = weight.attrs["packing"]
    assert isinstance(packing, MappingProxyType)
    assert dict(packing) == PACKING
    with pytest.raises(TypeError):
        packing["bits"] = "int8"  # type: ignore[index]
    with pytest.raises(AttributeError):
        plan.returns = ()  # type: ignore[misc]
    # the frozen plan does not alias the payload
    payload["ops"][-1]["attrs"]["stride"][0] = 9
    _op(payload, "lattice.weight")["attrs"]["packing"]["bits"] = "int8"
    assert conv.attrs["stride"] == (2, 2, 2)
    assert packing["bits"] == "int4"
    assert plan.type_info(plan.args[1].type).shape == (-1, 32)
    assert plan.producer(conv.results[0]) is conv
    assert plan.producer("arg0") is None


def test_operand_groups_follow_the_schema(plan_payload: Any) -> None:
    with_bias = RuntimePlan.from_native(_conv(plan_payload, bias=True))
    without = RuntimePlan.from_native(_conv(plan_payload, bias=False))
    (a,) = [op for op in with_bias.ops if op.name == "lattice.conv3d"]
    (b,) = [op for op in without.ops if op.name == "lattice.conv3d"]
    assert [name for name, _ in a.operand_groups()] == ["input", "weight", "bias"]
    assert a.operand_groups()[2][1] == (a.operands[2],)
    assert b.operand_groups()[2] == ("bias", ())


def test_target_conv_groups_and_variadic_call(plan_payload: Any) -> None:
    b = plan_payload()
    x = b.sparse_input("x", "f32", 4)
    t = b.sparse_input("target", "f32", 4)
    w = b.weight("w", "conv3d", "f32")
    (y,) = b.op("lattice.target_conv3d", [x, t, w], [b.sparse("f32")], **b.conv_attrs(3, 1, 1))
    (_c, f, _a) = b.op(
        "lattice.sparse.decompose",
        [y],
        [b.tensor((-1, 4), "i32"), b.tensor((-1, 4), "f32"), b.tensor((1,), "i32")],
    )
    (m,) = b.op("lattice.call", [f], [b.tensor((-1,), "i32")], callee="argmax")
    b.ret(y, "y")
    b.ret(m, "labels")
    plan = RuntimePlan.from_native(b.payload())
    target = plan.ops[2 + 1]
    assert target.name == "lattice.target_conv3d"
    assert dict(target.operand_groups()) == {
        "input": (x,),
        "target": (t,),
        "weight": (w,),
        "bias": (),
    }
    call = plan.ops[-1]
    assert dict(call.operand_groups()) == {"inputs": (f,)}
    assert [(i.name, i.kind) for i in plan.logical_inputs] == [
        ("x", "sparse"),
        ("target", "sparse"),
    ]
    assert [o.role for o in plan.outputs] == ["sparse_tensor", "tensor"]


def test_duplicate_logical_names_and_abi_names(plan_payload: Any) -> None:
    b = plan_payload()
    b.sparse_input("x", "f32", 4)
    b.arg("x", b.tensor((-1, 3), "f32"), "tensor")
    (y,) = b.op("lattice.softmax", ["arg1"], [b.tensor((-1, 4), "f32")])
    b.ret(y, "y")
    with pytest.raises(PlanError, match=r"logical input name\(s\) 'x' are used twice"):
        RuntimePlan.from_native(b.payload())

    b = plan_payload()
    b.arg("pts", b.tensor((-1, 4), "f32"), "tensor")
    b.arg("pts", b.tensor((-1, 4), "f32"), "tensor")
    (y,) = b.op("lattice.softmax", ["arg1"], [b.tensor((-1, 4), "f32")])
    b.ret(y, "y")
    with pytest.raises(PlanError, match=r"used twice|reuses ABI name"):
        RuntimePlan.from_native(b.payload())

    b = plan_payload()
    b.arg("a", b.tensor((-1, 4), "f32"), "tensor")
    (y,) = b.op("lattice.softmax", ["arg0"], [b.tensor((-1, 4), "f32")])
    (z,) = b.op("lattice.softmax", ["arg0"], [b.tensor((-1, 4), "f32")])
    b.ret(y, "out")
    b.ret(z, "out")
    with pytest.raises(PlanError, match=r"output #1 reuses ABI name 'out'"):
        RuntimePlan.from_native(b.payload())


def test_every_rule_message_names_the_op(conv: Payload) -> None:
    _conv_attr("stride", [0, 1, 1])(conv)
    with pytest.raises(PlanError) as info:
        RuntimePlan.from_native(conv)
    assert re.search(r"op #\d+ \(lattice\.conv3d -> v\d+\): attribute 'stride'", str(info.value))


def test_non_mapping_payload() -> None:
    with pytest.raises(PlanError, match="must be a mapping"):
        RuntimePlan.from_native([])  # type: ignore[arg-type]


def test_f32_attributes(plan_payload: Any) -> None:
    def norm(eps: Any) -> Payload:
        b = plan_payload()
        x = b.arg("x", b.tensor((-1, 4), "f32"), "tensor")
        s = b.weight("s", "channel", "f32")
        (y,) = b.op("lattice.rms_norm", [x, s], [b.tensor((-1, 4), "f32")], eps=eps)
        b.ret(y, "y")
        payload: Payload = b.payload()
        return payload

    plan = RuntimePlan.from_native(norm(1))
    assert plan.ops[-1].attrs["eps"] == 1.0 and isinstance(plan.ops[-1].attrs["eps"], float)
    eps = RuntimePlan.from_native(norm(0.1)).ops[-1].attrs["eps"]
    assert eps == struct.unpack("<f", struct.pack("<f", 0.1))[0] != 0.1  # exactly the f32 value
    for bad, message in [
        (1e39, r"outside the f32 range"),
        (1e-50, r"must be > 0"),  # rounds to f32 zero
        (0.0, r"'eps' must be > 0"),
        (-1e-5, r"must be > 0"),
        ("1e-5", r"must be a number"),
        (True, r"must be a number"),
        (float("nan"), r"must be finite"),
    ]:
        with pytest.raises(PlanError, match=message):
            RuntimePlan.from_native(norm(bad))


def test_i64_attributes(plan_payload: Any) -> None:
    def pool(batch_size: Any) -> Payload:
        b = plan_payload()
        x = b.sparse_input("x", "f32", 4)
        (y,) = b.op(
            "lattice.global_pool",
            [x],
            [b.tensor((2, 4), "f32")],
            mode="max",
            batch_size=batch_size,
            accumulation="canonical_f32",
        )
        b.ret(y, "pooled")
        payload: Payload = b.payload()
        return payload

    assert RuntimePlan.from_native(pool(2)).ops[-1].attrs["batch_size"] == 2
    for bad, message in [(-2, r"must be >= -1"), (2.0, r"must be an integer"), (True, "integer")]:
        with pytest.raises(PlanError, match=message):
            RuntimePlan.from_native(pool(bad))


def test_absent_optional_attributes_take_their_schema_default(plan_payload: Any) -> None:
    """Lowerings always see a value: the plan fills in what absence means (both paths)."""
    b = plan_payload()
    x = b.sparse_input("x", "f32", 4)
    (y,) = b.op("lattice.sparse.binary", [x, x], [b.sparse("f32")], op="maximum", join="right")
    (z,) = b.op("lattice.sparse.reindex", [y, x], [b.sparse("f32")])
    (p,) = b.op(
        "lattice.pool3d",
        [z],
        [b.sparse("f32")],
        mode="max",
        kernel_size=[2, 2, 2],
        stride=[1, 1, 1],
        padding=[0, 0, 0],
        dilation=[1, 1, 1],
    )
    b.ret(p, "y")
    plan = RuntimePlan.from_native(b.payload())
    binary, reindex, pool = plan.ops[-3:]
    assert dict(binary.attrs) == {
        "op": "maximum",
        "join": "right",
        "lhs_fill": 0.0,
        "rhs_fill": 0.0,
    }
    assert reindex.attrs["fill"] == 0.0
    assert pool.attrs["accumulation"] == "canonical_f32"
    with pytest.raises(PlanError, match=r"'axis' must be one of -1, 1"):
        b2 = plan_payload()
        f = b2.arg("f", b2.tensor((-1, 4), "f32"), "tensor")
        (s,) = b2.op("lattice.softmax", [f], [b2.tensor((-1, 4), "f32")], axis=0)
        b2.ret(s, "s")
        RuntimePlan.from_native(b2.payload())

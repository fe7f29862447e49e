"""The one plan freezer over a corpus of corrupted payloads, and typecheck's signature cache.

``RuntimePlan.from_native`` checks each rule once, cheaply on the common
shape and closely (with its message) only when that fails.  These tests
corrupt a payload in many small ways and require each verdict to be a plan
typed as the schema says, or a :class:`PlanError` naming the corrupted op;
equivalent spellings must freeze to the same plan.  ``typecheck_plan``
checks each distinct op signature once per plan; a repeated signature must
still run every attribute-dependent rule.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import struct
from collections.abc import Callable, Iterator
from types import MappingProxyType
from typing import Any

import pytest
from lattice_contract.dialect import AttrKind
from lattice_contract.plan import (
    PlanError,
    PlanOperation,
    PlanTypeError,
    RuntimePlan,
    typecheck_plan,
)

Payload = dict[str, Any]
PACKING = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}


class Text(str):
    """A str subclass: valid for the diagnosing path, not 'plain' for the fast one."""


def _base(builder_cls: Any) -> Payload:
    """A payload touching every attribute kind, optional operands and a variadic call."""
    b = builder_cls()
    x = b.sparse_input("x", "f16", 8)
    w = b.weight("stem.weight", "conv3d", "f16")
    bias = b.weight("stem.bias", "bias", "f16")
    (y,) = b.op("lattice.conv3d", [x, w, bias], [b.sparse("f16")], **b.conv_attrs(3, 2, 1))
    feats_t = b.tensor((-1, 8), "f16")
    _, f, _ = b.op(
        "lattice.sparse.decompose",
        [y],
        [b.tensor((-1, 4), "i32"), feats_t, b.tensor((1,), "i32")],
    )
    (g,) = b.op(
        "lattice.activation",
        [f],
        [feats_t],
        kind="leaky_relu",
        approximate="none",
        alpha=0.009999999776482582,
        beta=1.0,
        threshold=20.0,
    )
    scale, shift, mean, var = (
        b.weight(f"bn.{k}", "bias" if k == "b" else "channel", "f16") for k in "wbmv"
    )
    (n,) = b.op(
        "lattice.batch_norm", [g, scale, shift, mean, var], [feats_t], eps=9.999999747378752e-06
    )
    (z,) = b.op("lattice.sparse.with_features", [y, n], [b.sparse("f16")])
    wq = b.weight("q.weight", "conv3d", "i4", dict(PACKING))
    (u,) = b.op(
        "lattice.subm_conv3d",
        [z, wq],
        [b.sparse("f16")],
        kernel_size=[3, 3, 3],
        dilation=[1, 1, 1],
        accumulation="canonical_f32",
    )
    (p,) = b.op(
        "lattice.global_pool",
        [u],
        [b.tensor((2, 8), "f16")],
        mode="max",
        batch_size=2,
        accumulation="canonical_f32",
    )
    (h,) = b.op("lattice.cast", [p], [b.tensor((2, 8), "f32")], rounding="nearest_even")
    (k,) = b.op("lattice.call", [h], [b.tensor((-1,), "i32")], callee="argmax")
    b.ret(u, "u")
    b.ret(k, "k")
    payload: Payload = b.payload()
    return payload


ATTR_VALUES: tuple[Any, ...] = (
    True,
    0,
    1,
    -1,
    2**70,
    1.5,
    0.0,
    -0.0,
    float("nan"),
    float("inf"),
    1e39,
    "",
    "relu",
    "max",
    "none",
    "nearest_even",
    "canonical_f32",
    "conv3d_o_zyx_i",
    Text("relu"),
    None,
    [1, 1, 1],
    [0, 0, 0],
    [1, 1],
    [True, 1, 1],
    [1.0, 1, 1],
    (1, 1, 1),
    dict(PACKING),
    {**PACKING, "group_size": 6},
    {**PACKING, "bits": "int2"},
    MappingProxyType(dict(PACKING)),
)


def _mutations(payload: Payload) -> Iterator[tuple[str, Callable[[Payload], None]]]:
    """(description, in-place corruption) pairs over every op of ``payload``."""
    yield "unchanged", lambda p: None
    swept: set[tuple[str, bool]] = set()  # every attribute value once per kind of op
    for i, op in enumerate(payload["ops"]):
        kind = (op["name"], "packing" in op["attrs"])
        for attr in op["attrs"] if kind not in swept else ():
            for j, value in enumerate(ATTR_VALUES):

                def set_attr(p: Payload, i: int = i, a: str = attr, v: Any = value) -> None:
                    p["ops"][i]["attrs"][a] = v

                yield f"op {i} attr {attr} = value #{j}", set_attr

            def drop(p: Payload, i: int = i, a: str = attr) -> None:
                del p["ops"][i]["attrs"][a]

            yield f"op {i} without {attr}", drop
        swept.add(kind)
        mutators: dict[str, Callable[[dict[str, Any]], object]] = {
            "unknown attribute": lambda o: o["attrs"].__setitem__("zzz", 1),
            "attrs as a proxy": lambda o: o.__setitem__("attrs", MappingProxyType(o["attrs"])),
            "attrs as a list": lambda o: o.__setitem__("attrs", []),
            "extra field": lambda o: o.__setitem__("extra", 1),
            "location": lambda o: o.__setitem__("location", "enc.conv.0"),
            "location as None": lambda o: o.__setitem__("location", None),
            "location subclass": lambda o: o.__setitem__("location", Text("enc")),
            "location not str": lambda o: o.__setitem__("location", 3),
            "location empty": lambda o: o.__setitem__("location", ""),
            "location too long": lambda o: o.__setitem__("location", "m" * 4097),
            "location and an extra field": lambda o: o.update(location="enc", extra=1),
            "location, a field missing": lambda o: (
                o.update(location="enc"),
                o.pop("result_types"),
            ),
            "missing field": lambda o: o.pop("result_types"),
            "name subclass": lambda o: o.__setitem__("name", Text(o["name"])),
            "quantized name": lambda o: o.__setitem__(
                "name", o["name"].replace("lattice.", "lattice.quantized_")
            ),
            "foreign name": lambda o: o.__setitem__("name", "arith.addf"),
            "name not str": lambda o: o.__setitem__("name", 3),
            "operands as tuple": lambda o: o.__setitem__("operands", tuple(o["operands"])),
            "results as tuple": lambda o: o.__setitem__("results", tuple(o["results"])),
            "label subclass": lambda o: o.__setitem__("results", [Text(r) for r in o["results"]]),
            "empty result label": lambda o: o["results"].__setitem__(0, ""),
            "int result label": lambda o: o["results"].__setitem__(0, 7),
            "result redefines arg0": lambda o: o["results"].__setitem__(0, "arg0"),
            "results repeat": lambda o: o["results"].__setitem__(-1, o["results"][0]),
            "one result too many": lambda o: (
                o["results"].append("extra"),
                o["result_types"].append(o["result_types"][0]),
            ),
            "result type dropped": lambda o: o["result_types"].pop(),
            "result type not str": lambda o: o["result_types"].__setitem__(0, None),
            "operand dropped": lambda o: (
                (o["operands"].pop(), o["operand_types"].pop()) if o["operands"] else None
            ),
            "operand undefined": lambda o: (
                o["operands"].__setitem__(0, "nowhere") if o["operands"] else None
            ),
            "operand of another type": lambda o: (
                o["operand_types"].__setitem__(0, "tensor<1xi32>") if o["operands"] else None
            ),
            "operand type missing": lambda o: o["operand_types"].pop() if o["operands"] else None,
            "operand duplicated": lambda o: (
                (
                    o["operands"].append(o["operands"][0]),
                    o["operand_types"].append(o["operand_types"][0]),
                )
                if o["operands"]
                else None
            ),
        }
        for what, mutate in mutators.items():

            def apply(
                p: Payload, i: int = i, m: Callable[[dict[str, Any]], object] = mutate
            ) -> None:
                m(p["ops"][i])

            yield f"op {i}: {what}", apply

        def as_proxy(p: Payload, i: int = i) -> None:
            p["ops"][i] = MappingProxyType(p["ops"][i])

        def as_list(p: Payload, i: int = i) -> None:
            p["ops"][i] = []

        yield f"op {i} as a proxy", as_proxy
        yield f"op {i} as a list", as_list


def _shape(value: Any) -> Any:
    """``value`` with the type of every leaf, so 1 == 1.0 == True cannot hide a difference."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple(_shape(getattr(value, f.name)) for f in dataclasses.fields(value)),
        )
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_shape(v) for v in value))
    if isinstance(value, (MappingProxyType, dict)):
        return (type(value).__name__, tuple((k, _shape(v)) for k, v in value.items()))
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


def _verdict(payload: Payload) -> Any:
    try:
        return RuntimePlan.from_native(payload)
    except PlanError as exc:
        return exc


def _f32_exact(value: float) -> bool:
    return bool(struct.unpack("<f", struct.pack("<f", value))[0] == value)


def _assert_schema_typed(plan: RuntimePlan) -> None:
    """Every frozen attribute has the Python type (and range) its schema kind promises."""
    for op in plan.ops:
        assert type(op.attrs) is MappingProxyType
        for labels in (op.operands, op.results, op.operand_types, op.result_types):
            assert type(labels) is tuple and all(isinstance(v, str) and v for v in labels)
        for attr in op.definition.attributes:
            if attr.name not in op.attrs:
                assert not attr.spec.required and attr.spec.default is None, (op.name, attr)
                continue
            value = op.attrs[attr.name]
            kind = attr.spec.kind
            where = (op.name, attr.name, value)
            if kind is AttrKind.triple:
                assert type(value) is tuple and len(value) == 3, where
                assert all(type(v) is int and -(2**31) <= v < 2**31 for v in value), where
            elif kind is AttrKind.f64_triple:
                assert type(value) is tuple and all(type(v) is float for v in value), where
            elif kind is AttrKind.i64:
                assert type(value) is int, where
            elif kind is AttrKind.f32:
                assert type(value) is float and math.isfinite(value), where
                assert _f32_exact(value), where
            elif kind is AttrKind.packing:
                assert type(value) is MappingProxyType, where
            else:
                assert type(value) is str and value, where
            if attr.spec.minimum is not None and kind is not AttrKind.packing:
                entries = value if isinstance(value, tuple) else (value,)
                assert all(v >= attr.spec.minimum for v in entries), where


# Spellings a payload may use that mean exactly what the plain payload means.
EQUIVALENT = (
    "operands as tuple",
    "results as tuple",
    "attrs as a proxy",
    "name subclass",
    "location as None",
    "label subclass",
    "as a proxy",
)


def test_every_corrupted_payload_is_frozen_or_refused_with_a_plan_error(
    plan_payload: Any,
) -> None:
    """The freezer's verdict on hundreds of small corruptions of a payload.

    Each is either a plan whose every attribute has its schema type, or a
    PlanError that names the corrupted op; a spelling that means the same as
    the original (a tuple for a list, a mapping proxy for a dict, a str
    subclass for a str) freezes to the original plan.
    """
    base = _base(plan_payload)
    plain = RuntimePlan.from_native(copy.deepcopy(base))
    _assert_schema_typed(plain)
    accepted = rejected = 0
    for what, mutate in _mutations(base):
        payload = copy.deepcopy(base)
        mutate(payload)
        verdict = _verdict(payload)
        if isinstance(verdict, PlanError):
            rejected += 1
            if what.startswith("op "):
                index = what.split()[1].rstrip(":")
                assert f"op #{index}" in str(verdict), (what, str(verdict))
            assert not any(what.endswith(e) for e in EQUIVALENT), (what, str(verdict))
            continue
        accepted += 1
        _assert_schema_typed(verdict)
        if any(what.endswith(e) for e in EQUIVALENT) or what == "unchanged":
            assert verdict == plain, what
            assert [type(op.name) for op in verdict.ops] == [str] * len(verdict.ops), what
    assert accepted + rejected > 800
    assert accepted > 0 and rejected > 0  # the corpus holds both valid and rejected payloads


@pytest.mark.parametrize("value", [True, None, float("nan"), [], {}])
def test_values_no_attribute_takes_are_refused_for_every_attribute(
    plan_payload: Any, value: Any
) -> None:
    base = _base(plan_payload)
    for i, op in enumerate(base["ops"]):
        for attr in op["attrs"]:
            payload = copy.deepcopy(base)
            payload["ops"][i]["attrs"][attr] = value
            with pytest.raises(PlanError, match=re.escape(f"attribute {attr!r}")) as info:
                RuntimePlan.from_native(payload)
            assert f"op #{i} " in str(info.value)


def test_the_first_broken_rule_of_an_op_is_the_one_reported(plan_payload: Any) -> None:
    """An unknown attribute is reported before a bad value, a bad value before an SSA error."""
    base = _base(plan_payload)
    conv = next(i for i, o in enumerate(base["ops"]) if o["name"] == "lattice.conv3d")
    payload = copy.deepcopy(base)
    payload["ops"][conv]["attrs"]["zzz"] = 1
    payload["ops"][conv]["attrs"]["stride"] = [0, 0, 0]
    payload["ops"][conv]["operands"][0] = "nowhere"
    with pytest.raises(PlanError, match="unknown attribute"):
        RuntimePlan.from_native(payload)
    del payload["ops"][conv]["attrs"]["zzz"]
    with pytest.raises(PlanError, match="'stride' must have every entry >= 1"):
        RuntimePlan.from_native(payload)
    payload["ops"][conv]["attrs"]["stride"] = [1, 1, 1]
    with pytest.raises(PlanError, match="uses value 'nowhere' before it is defined"):
        RuntimePlan.from_native(payload)


def test_frozen_records_equal_constructed_ones(plan_payload: Any) -> None:
    plan = RuntimePlan.from_native(_base(plan_payload))
    assert plan.ops[1].attrs["layout"] == "conv3d_o_xyz_i"
    with pytest.raises(AttributeError):
        plan.ops[0].name = "lattice.other"  # type: ignore[misc]
    rebuilt = PlanOperation(
        **{f.name: getattr(plan.ops[3], f.name) for f in dataclasses.fields(PlanOperation)}
    )
    assert rebuilt == plan.ops[3]
    assert _shape(rebuilt) == _shape(plan.ops[3])


# ---------------------------------------------------------------------------
# typecheck_plan checks each signature in full once, but attribute rules always.


def _repeat_op(plan: RuntimePlan, index: int, **attrs: Any) -> RuntimePlan:
    """``plan`` with a copy of op ``index`` (fresh result labels, changed attrs) appended."""
    op = plan.ops[index]
    copy_op = dataclasses.replace(
        op,
        results=tuple(f"{r}_again" for r in op.results),
        attrs=MappingProxyType({**op.attrs, **attrs}),
    )
    return dataclasses.replace(plan, ops=(*plan.ops, copy_op))


def _index_of(plan: RuntimePlan, name: str) -> int:
    return next(i for i, op in enumerate(plan.ops) if op.name == name)


@pytest.mark.parametrize(
    ("op_name", "attrs", "message"),
    [
        ("lattice.weight", {"layout": "linear_o_i"}, "use layout conv3d_o_xyz_i, not linear_o_i"),
        ("lattice.global_pool", {"batch_size": 3}, "result has 2 rows but batch_size is 3"),
        ("lattice.call", {"callee": "gather_rows"}, r"takes 2 input\(s\), got 1"),
        ("lattice.call", {"callee": "nothing"}, "is not a registered primitive"),
    ],
)
def test_a_repeated_signature_still_runs_the_attribute_rules(
    plan_payload: Any, op_name: str, attrs: dict[str, Any], message: str
) -> None:
    plan = RuntimePlan.from_native(_base(plan_payload))
    typecheck_plan(plan, {"argmax", "gather_rows"})
    index = _index_of(plan, op_name)
    repeated = _repeat_op(plan, index, **attrs)
    with pytest.raises(PlanTypeError, match=message) as info:
        typecheck_plan(repeated, {"argmax", "gather_rows"})
    assert f"op #{len(plan.ops)} " in str(info.value)  # the copy, not the original


def test_a_repeated_cast_without_rounding_is_rejected(plan_payload: Any) -> None:
    plan = RuntimePlan.from_native(_base(plan_payload))
    index = _index_of(plan, "lattice.cast")
    op = plan.ops[index]
    bare = dataclasses.replace(op, results=("again",), attrs=MappingProxyType({}))
    repeated = dataclasses.replace(plan, ops=(*plan.ops, bare))
    with pytest.raises(PlanTypeError, match="must state its rounding direction"):
        typecheck_plan(repeated, {"argmax"})


def test_repeated_signatures_type_every_value(plan_payload: Any) -> None:
    plan = RuntimePlan.from_native(_base(plan_payload))
    repeated = _repeat_op(_repeat_op(plan, _index_of(plan, "lattice.conv3d")), 1)
    typed = typecheck_plan(repeated, {"argmax"})
    labels = [a.name for a in repeated.args] + [r for op in repeated.ops for r in op.results]
    assert list(typed.values) == labels
    for op in repeated.ops:
        for label, text in zip(op.results, op.result_types, strict=True):
            info = repeated.type_info(text)
            assert (typed[label].kind, typed[label].dtype, typed[label].shape) == (
                info.kind,
                info.dtype,
                info.shape,
            )


def test_a_signature_differing_only_in_an_operand_type_is_checked_again(
    plan_payload: Any,
) -> None:
    b = plan_payload()
    x = b.sparse_input("x", "f16", 8)
    _, f16, _ = b.op(
        "lattice.sparse.decompose",
        [x],
        [b.tensor((-1, 4), "i32"), b.tensor((-1, 8), "f16"), b.tensor((1,), "i32")],
    )
    (f32,) = b.op("lattice.cast", [f16], [b.tensor((-1, 8), "f32")], rounding="nearest_even")
    relu = {"kind": "relu", "approximate": "none", "alpha": 0.0, "beta": 1.0, "threshold": 20.0}
    (ok,) = b.op("lattice.activation", [f16], [b.tensor((-1, 8), "f16")], **relu)
    (mixed,) = b.op("lattice.activation", [f32], [b.tensor((-1, 8), "f16")], **relu)
    b.ret(ok, "ok")
    b.ret(mixed, "mixed")
    plan = RuntimePlan.from_native(b.payload())
    with pytest.raises(PlanTypeError, match="element type f16 differs from f32") as info:
        typecheck_plan(plan)
    assert f"op #{len(plan.ops) - 1} " in str(info.value)


def test_a_location_is_optional_and_checked_like_any_payload_string(plan_payload: Any) -> None:
    """The importer's ``location`` reaches ``op.location``; a payload without it stays valid."""
    base = _base(plan_payload)
    assert all("location" not in op for op in base["ops"])
    assert all(op.location is None for op in RuntimePlan.from_native(copy.deepcopy(base)).ops)
    located = copy.deepcopy(base)
    located["ops"][0]["location"] = "stem.conv"
    plan = RuntimePlan.from_native(located)
    assert plan.ops[0].location == "stem.conv" and plan.ops[1].location is None
    assert plan.ops[0].describe().endswith(" at stem.conv")
    # the diagnosing path (a mapping proxy) freezes the same record
    located["ops"][0] = MappingProxyType(located["ops"][0])
    assert RuntimePlan.from_native(located) == plan
    for bad, message in [
        (3, r"op #0 .*\.location must be a string, got int"),
        ("", r"op #0 .*\.location must not be empty"),
        ("m" * 4097, r"op #0 .*\.location is 4097 characters long; .* at most 4096"),
    ]:
        payload = copy.deepcopy(base)
        payload["ops"][0]["location"] = bad
        with pytest.raises(PlanError, match=message):
            RuntimePlan.from_native(payload)
    payload = copy.deepcopy(base)
    payload["ops"][0]["loc"] = "stem.conv"
    with pytest.raises(PlanError, match=r"op #0 has unknown field\(s\) 'loc'.*location"):
        RuntimePlan.from_native(payload)

"""The schema-bound lowering registry and weight resolution.

Weight resolution is exercised through a small numpy ``RuntimeBackend``: the
contract code only asks a backend for shapes, dtype names and how to wrap a
packed triplet, so numpy arrays are real inputs here.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
import pytest
from lattice_contract import SCHEMA
from lattice_contract.dialect import Conv3d
from lattice_contract.runtime import (
    ExecutionContext,
    LoweringError,
    LoweringRegistry,
    ResolvedWeight,
    WeightContractError,
    bias_weight,
    channel_weight,
    conv_weight,
    linear_weight,
    resolve_weight,
)

CONV_ATTRS = "kernel_size, stride, padding, dilation, accumulation"


class NpSparse(NamedTuple):
    """The numpy backend's SparseTensor: the three ABI arrays and the stride it carries."""

    coords: Any
    feats: Any
    active_rows: Any
    stride: tuple[int, int, int] = (1, 1, 1)


class NumpyBackend:
    name = "numpy"
    sparse_type_name = "NpSparse"
    array_type_name = "numpy.ndarray"
    _names: ClassVar[dict[Any, str]] = {
        np.dtype(np.float16): "f16",
        np.dtype(np.float32): "f32",
        np.dtype(np.uint32): "u32",
        np.dtype(np.int32): "i32",
        np.dtype(np.float64): "f64",
    }

    def shape(self, array: Any) -> tuple[int, ...]:
        return tuple(int(d) for d in array.shape)

    def dtype_name(self, array: Any) -> str:
        return self._names[array.dtype]

    def make_packed(self, weight: Any, scales: Any, biases: Any, bits: int, group: int) -> Any:
        return ("packed", weight, scales, biases, bits, group)

    def is_sparse(self, value: Any) -> bool:
        return isinstance(value, NpSparse)

    def is_array(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def decompose(self, value: Any) -> tuple[Any, Any, Any]:
        return value.coords, value.feats, value.active_rows

    def channels(self, value: Any) -> int:
        feats = value.feats if isinstance(value, NpSparse) else value
        return int(feats.shape[-1])

    def stride(self, value: Any) -> tuple[int, int, int]:
        return value.stride

    def non_finite_counts(self, arrays: Any) -> list[int]:
        return [int(np.count_nonzero(~np.isfinite(a))) for a in arrays]


NP = NumpyBackend()
PACK4 = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}
PACK8 = {"bits": "int8", "group_size": 64, "scale_dtype": "f32", "mode": "affine"}


# ---------------------------------------------------------------------------
# Registration is checked against the schema.


def conv_lowering(
    input: Any,
    weight: Any,
    bias: Any = None,
    *,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    accumulation: str,
) -> Any:
    """A lowering with the signature shared by conv3d, full_conv3d and conv_transpose3d."""
    return input


def test_lowering_binds_by_schema_names() -> None:
    reg = LoweringRegistry("test")

    conv = reg.artifact_lowering(op="conv3d", weights={"weight": conv_weight(input="input")})(
        conv_lowering
    )
    lowering = reg.lowering("lattice.conv3d")
    assert lowering.function is conv is conv_lowering and not lowering.takes_context
    assert lowering.definition is SCHEMA.ops["conv3d"]
    assert dict(lowering.weights) == {"weight": conv_weight("input")}
    assert "conv3d" in reg and "lattice.conv3d" in reg and "subm_conv3d" not in reg


def test_op_can_be_named_by_opdef_class_or_python_name() -> None:
    reg = LoweringRegistry("test")

    @reg.artifact_lowering(op=SCHEMA.ops["softmax"])
    def softmax(input: Any, *, axis: int) -> Any:
        return input

    @reg.artifact_lowering(op="sparse_decompose")
    def decompose(input: Any) -> Any:
        return input

    @reg.artifact_lowering(op=Conv3d)
    def conv(
        context: Any,
        input: Any,
        weight: Any,
        bias: Any,
        *,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        accumulation: Any,
    ) -> Any:
        return input

    assert reg.lowering("conv3d").takes_context
    assert "sparse.decompose" in reg and "softmax" in reg


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            f"def f(input, weight, *, {CONV_ATTRS}): pass",
            r"parameters must be exactly the operands \(input, weight, bias\).*missing bias",
        ),
        (
            f"def f(input, weight, bias, groups, *, {CONV_ATTRS}): pass",
            r"unexpected groups",
        ),
        (
            "def f(input, weight, bias, *, kernel_size, stride, padding, accumulation): pass",
            r"missing dilation",
        ),
        (
            "def f(input, weight, bias, kernel_size, *, stride, padding, dilation, accumulation):"
            " pass",
            r"attribute 'kernel_size' must be a keyword-only parameter",
        ),
        (
            f"def f(input, weight, *, bias, {CONV_ATTRS}): pass",
            r"operand 'bias' must be a positional-or-keyword parameter",
        ),
        ("def f(*operands, **attrs): pass", r"\*args/\*\*kwargs are not allowed"),
        (
            f"def f(input, weight, bias, *, {CONV_ATTRS}, **extra): pass",
            r"\*args/\*\*kwargs are not allowed",
        ),
    ],
)
def test_signature_must_match_the_schema(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    reg = LoweringRegistry("test")
    with pytest.raises(LoweringError, match=message):
        reg.artifact_lowering(op="conv3d")(namespace["f"])
    assert "conv3d" not in reg


def test_weights_must_name_weight_operands() -> None:
    reg = LoweringRegistry("test")

    f = conv_lowering
    with pytest.raises(LoweringError, match=r"weights names 'input', which is not a weight"):
        reg.artifact_lowering(op="conv3d", weights={"input": conv_weight()})(f)
    with pytest.raises(LoweringError, match=r"refers to 'features', which is not an operand"):
        reg.artifact_lowering(op="conv3d", weights={"weight": conv_weight(input="features")})(f)
    reg.artifact_lowering(op="conv3d", weights={"bias": bias_weight(of="weight")})(f)
    with pytest.raises(LoweringError, match=r"already has a lowering"):
        reg.artifact_lowering(op="conv3d")(f)


def test_one_lowering_serves_ops_with_identical_signatures() -> None:
    reg = LoweringRegistry("test")
    seen: list[str] = []

    @reg.artifact_lowering(
        op=(Conv3d, "conv_transpose3d", "lattice.full_conv3d"),
        weights={"weight": conv_weight(input="input")},
    )
    def conv(
        context: ExecutionContext,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        accumulation: str,
    ) -> Any:
        seen.append(context.op.name)
        return input

    for name in ("conv3d", "conv_transpose3d", "full_conv3d"):
        lowering = reg.lowering(name)
        assert lowering.function is conv and lowering.takes_context
        assert lowering.definition is SCHEMA.ops[name]
        assert dict(lowering.weights) == {"weight": conv_weight("input")}
    assert "target_conv3d" not in reg

    # The executor tells the shared function which op it is running.
    context = ExecutionContext(backend=NP, weights={}, primitives={})
    with pytest.raises(LoweringError, match=r"not lowering any op"):
        _ = context.op
    for name in ("full_conv3d", "conv3d"):
        context.current_op = SCHEMA.ops[name]
        reg.lowering(name).function(
            context,
            "x",
            "w",
            kernel_size=(1, 1, 1),
            stride=(1, 1, 1),
            padding=(0, 0, 0),
            dilation=(1, 1, 1),
            accumulation="canonical_f32",
        )
    assert seen == ["full_conv3d", "conv3d"]


def test_ops_sharing_a_lowering_must_have_identical_signatures() -> None:
    reg = LoweringRegistry("test")

    conv = conv_lowering
    with pytest.raises(
        LoweringError,
        match=r"operands and attributes are identical: lattice.conv3d\(operands input, weight, "
        r"bias\?; attributes kernel_size, stride, padding, dilation, accumulation\) differs from "
        r"lattice.subm_conv3d\(.*attributes kernel_size, dilation, accumulation\); register a "
        r"separate lowering for lattice.subm_conv3d",
    ):
        reg.artifact_lowering(op=("conv3d", "subm_conv3d"))(conv)
    with pytest.raises(
        LoweringError,
        match=r"differs from lattice.target_conv3d\(operands "
        r"input, target, weight",
    ):
        reg.artifact_lowering(op=["conv3d", "target_conv3d"])(conv)
    with pytest.raises(LoweringError, match=r"op= names conv3d more than once"):
        reg.artifact_lowering(op=("conv3d", "lattice.conv3d"))(conv)
    with pytest.raises(LoweringError, match=r"op= names no op"):
        reg.artifact_lowering(op=())(conv)
    assert "conv3d" not in reg and "subm_conv3d" not in reg

    # An op that already has a lowering leaves the whole group unregistered.
    reg.artifact_lowering(op="conv_transpose3d")(conv)
    with pytest.raises(LoweringError, match=r"lattice.conv_transpose3d already has a lowering"):
        reg.artifact_lowering(op=("conv3d", "conv_transpose3d"))(conv)
    assert "conv3d" not in reg


def test_unknown_op_and_primitive() -> None:
    reg = LoweringRegistry("test")
    with pytest.raises(LoweringError, match=r"unknown lattice operation 'conv4d'"):
        reg.artifact_lowering(op="conv4d")
    with pytest.raises(LoweringError, match=r"'topk' is not a registered primitive"):
        reg.primitive("topk")

    @reg.primitive("argmax")
    def argmax(x: Any) -> Any:
        return x

    assert reg.implemented_primitives == {"argmax"}
    with pytest.raises(LoweringError, match=r"already implemented"):
        reg.primitive("argmax")(argmax)


def test_check_complete_names_every_missing_op() -> None:
    reg = LoweringRegistry("test")

    @reg.artifact_lowering(op="softmax")
    def softmax(input: Any, *, axis: int) -> Any:
        return input

    with pytest.raises(LoweringError) as info:
        reg.check_complete()
    message = str(info.value)
    for definition in SCHEMA.ops.values():
        if definition.name != "softmax":
            assert definition.mlir_name in message
    assert "lattice.softmax," not in message and not message.startswith("lattice.softmax")
    assert len(reg.missing()) == len(SCHEMA.ops) - 1


# ---------------------------------------------------------------------------
# Weight resolution.


def _packed(
    c_out: int, kernel: tuple[int, ...], c_in: int, bits: int, group: int, scale: Any = np.float16
) -> dict[str, np.ndarray]:
    """A triplet in upstream's stored layout: (K, C_out, n) for K = 1, (K, n, C_out) for K > 1."""
    taps = int(np.prod(kernel)) if kernel else 1

    def shape(n: int) -> tuple[int, int, int]:
        return (taps, c_out, n) if taps == 1 else (taps, n, c_out)

    return {
        "w.weight": np.zeros(shape(c_in * bits // 32), np.uint32),
        "w.scales": np.ones(shape(c_in // group), scale),
        "w.biases": np.zeros(shape(c_in // group), scale),
    }


def _resolve(store: dict[str, Any], **kw: Any) -> ResolvedWeight:
    args: dict[str, Any] = {
        "storage_key": "w",
        "layout": "conv3d_o_xyz_i",
        "family": "conv3d",
        "dtype": "f16",
        "packing": None,
    }
    args.update(kw)
    return resolve_weight(store, NP, **args)


def test_dense_weight() -> None:
    array = np.zeros((8, 3, 3, 3, 4), np.float16)
    resolved = _resolve({"w": array})
    assert resolved.value is array
    assert resolved.logical_shape == (8, 3, 3, 3, 4)
    assert resolved.parameter_count == 8 * 27 * 4
    assert resolved.storage_keys == ("w",)


def test_dense_weight_errors() -> None:
    with pytest.raises(WeightContractError, match=r"no entry 'w' for the conv3d weight"):
        _resolve({})
    with pytest.raises(WeightContractError, match=r"has a packed triplet w.weight/.scales/.biases"):
        _resolve(_packed(8, (3, 3, 3), 32, 4, 32))
    with pytest.raises(
        WeightContractError,
        match=r"'w' has shape \(8, 4\); layout conv3d_o_xyz_i "
        r"needs rank 5",
    ):
        _resolve({"w": np.zeros((8, 4), np.float16)})
    with pytest.raises(
        WeightContractError,
        match=r"'w' is stored as f32 but the graph declares "
        r"!lattice.weight<conv3d, f16>",
    ):
        _resolve({"w": np.zeros((8, 3, 3, 3, 4), np.float32)})


@pytest.mark.parametrize(("bits", "packing"), [(4, PACK4), (8, PACK8)])
def test_packed_weight(bits: int, packing: dict[str, Any]) -> None:
    scale = np.float16 if packing["scale_dtype"] == "f16" else np.float32
    store = _packed(8, (3, 3, 3), 128, bits, packing["group_size"], scale)
    resolved = _resolve(store, dtype=f"i{bits}", packing=packing)
    assert resolved.logical_shape == (8, 27, 128)  # (C_out, K, padded C_in); the op refines it
    assert resolved.value[0] == "packed" and resolved.value[4:] == (bits, packing["group_size"])
    assert resolved.storage_keys == ("w.weight", "w.scales", "w.biases")
    linear = _packed(8, (), 64, bits, 32, np.float16)
    lin = _resolve(
        linear,
        layout="linear_o_i",
        family="linear",
        dtype=f"i{bits}",
        packing=dict(packing, group_size=32, scale_dtype="f16"),
    )
    assert lin.logical_shape == (8, 64)


def test_packed_weight_errors() -> None:
    good = _packed(8, (3, 3, 3), 64, 4, 32)
    pack = {"dtype": "i4", "packing": PACK4}

    def without(key: str) -> dict[str, Any]:
        return {k: v for k, v in good.items() if k != key}

    with pytest.raises(
        WeightContractError,
        match=r"packed weight 'w' is incomplete: missing "
        r"w.scales \(present: w.weight, w.biases\)",
    ):
        _resolve(without("w.scales"), **pack)
    with pytest.raises(WeightContractError, match=r"missing w.weight, w.scales, w.biases"):
        _resolve({"w": good["w.weight"]}, **pack)
    with pytest.raises(
        WeightContractError,
        match=r"w.biases is stored as f32 but the packing "
        r"declares scale_dtype = f16 \(scale dtype drift\)",
    ):
        _resolve(dict(good, **{"w.biases": good["w.biases"].astype(np.float32)}), **pack)
    with pytest.raises(WeightContractError, match=r"w.scales is stored as f32"):
        _resolve(dict(good, **{"w.scales": good["w.scales"].astype(np.float32)}), **pack)
    with pytest.raises(
        WeightContractError,
        match=r"w.weight is i32; packed int4 values are "
        r"stored in uint32 words",
    ):
        _resolve(dict(good, **{"w.weight": good["w.weight"].astype(np.int32)}), **pack)
    with pytest.raises(
        WeightContractError,
        match=r"scales have shape \(27, 1, 8\); "
        r"words \(27, 8, 8\) with group_size 32 need \(27, 2, 8\)",
    ):
        _resolve(dict(good, **{"w.scales": good["w.scales"][:, :1]}), **pack)
    with pytest.raises(WeightContractError, match=r"w.biases has shape .* must match the scales"):
        _resolve(dict(good, **{"w.biases": good["w.biases"][:4]}), **pack)
    with pytest.raises(WeightContractError, match=r"\(K, C_out, words\)"):
        _resolve({k: v.reshape(27, -1) for k, v in good.items()}, **pack)
    odd = _packed(8, (3, 3, 3), 48, 4, 16)
    with pytest.raises(
        WeightContractError,
        match=r"48 input channels, not a multiple of "
        r"group_size 32",
    ):
        _resolve(odd, **pack)
    with pytest.raises(WeightContractError, match=r"27 tap matrices but layout linear_o_i"):
        _resolve(good, layout="linear_o_i", family="linear", **pack)


def test_weight_specs() -> None:
    conv = _resolve({"w": np.zeros((8, 3, 3, 3, 4), np.float16)})
    bias = ResolvedWeight("b", "bias", "bias_c", "f16", None, (6,), None)
    conv_weight().check_static(conv, {"kernel_size": (3, 3, 3)}, {}, "op #1")
    with pytest.raises(
        WeightContractError,
        match=r"op #1: weight 'w' has shape \(8, 3, 3, 3, 4\) "
        r"but kernel_size is \(3, 3, 1\)",
    ):
        conv_weight().check_static(conv, {"kernel_size": (3, 3, 1)}, {}, "op #1")
    with pytest.raises(
        WeightContractError,
        match=r"bias 'b' has shape \(6,\) but weight 'w' has "
        r"8 output channels",
    ):
        bias_weight().check_static(bias, {}, {"weight": conv}, "op #1")
    feats = np.zeros((5, 4), np.float16)
    conv_weight().check_runtime(conv, {"input": feats}, NP, "op #1")
    with pytest.raises(
        WeightContractError,
        match=r"op #1: weight 'w' has shape .* \(4 input "
        r"channels\) but operand 'input' has 3 channels",
    ):
        conv_weight().check_runtime(conv, {"input": feats[:, :3]}, NP, "op #1")
    lin = ResolvedWeight("fc", "linear", "linear_o_i", "f16", None, (2, 4), None)
    linear_weight().check_runtime(lin, {"input": NpSparse(None, feats, None)}, NP, "op #2")
    scale = ResolvedWeight("s", "channel", "channel_c", "f16", None, (5,), None)
    with pytest.raises(WeightContractError, match=r"\(5 channels\) but operand 'input' has 4"):
        channel_weight().check_runtime(scale, {"input": feats}, NP, "op #3")


def test_packed_weight_specs() -> None:
    """A packed conv weight is checked by tap count and by the padded input width."""
    packed = _resolve(_packed(8, (3, 3, 3), 64, 4, 32), dtype="i4", packing=PACK4)
    conv_weight().check_static(packed, {"kernel_size": (3, 3, 3)}, {}, "op #1")
    with pytest.raises(WeightContractError, match="27 tap matrices but kernel_size"):
        conv_weight().check_static(packed, {"kernel_size": (3, 3, 1)}, {}, "op #1")
    conv_weight().check_runtime(packed, {"input": np.zeros((5, 40), np.float16)}, NP, "op #1")
    with pytest.raises(WeightContractError, match="64 input channels wide"):
        conv_weight().check_runtime(packed, {"input": np.zeros((5, 20), np.float16)}, NP, "op #1")

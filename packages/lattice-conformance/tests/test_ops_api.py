"""Both runtimes' functional ops are the one declared API: names, signatures, help, keyword errors.

``lattice_contract.frontend.ops`` declares the public op names and each op's
keywords, defaults and help text once; ``mlx_lattice.ops`` and
``torch_lattice.ops`` keep only their positional arrays and array code.
Here, on both runtimes: each ``ops`` package exports exactly the declared
names (plus its declared extras), every op's visible signature (what
``help()``, the torch exporter's tracer and the lowerings' checks read)
carries the declared keywords with their defaults, its docstring is the
declared text, and a misspelt or missing keyword raises the contract's
``TypeError`` with the same words on both.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import mlx_lattice
import mlx_lattice.ops as mo
import numpy as np
import pytest
import torch_lattice
import torch_lattice.ops as to
from lattice_contract import SCHEMA
from lattice_contract.frontend import OLD_SPELLINGS, REQUIRED, keyword_error
from lattice_contract.frontend import ops as api_ops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cross_runtime_support import to_mx, to_torch

RUNTIMES = {"mlx": mo, "torch": to}
OPS = sorted(api_ops.DECLARATIONS)
SCHEMA_OPS = {op.python_name for op in SCHEMA.ops.values()}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_each_runtime_exports_exactly_the_declared_names(runtime: str) -> None:
    ops = RUNTIMES[runtime]
    assert len(ops.__all__) == len(set(ops.__all__))
    assert sorted(ops.__all__) == sorted((*api_ops.OP_NAMES, *ops.EXTRA_NAMES))
    assert not set(ops.EXTRA_NAMES) & set(api_ops.OP_NAMES)
    for name in ops.__all__:
        assert getattr(ops, name) is not None, name
    namespace: dict[str, Any] = {}
    exec(f"from {ops.__name__} import *", namespace)  # what a star import gives
    assert set(namespace) - {"__builtins__"} == set(ops.__all__)


def test_both_runtimes_export_the_same_op_names() -> None:
    common = [set(ops.__all__) - set(ops.EXTRA_NAMES) for ops in RUNTIMES.values()]
    assert common[0] == common[1] == set(api_ops.OP_NAMES)


@pytest.mark.parametrize("name", OPS)
def test_signature_and_help_are_the_declared_ones_on_both(name: str) -> None:
    decl = api_ops.DECLARATIONS[name]
    positional = []
    for ops in RUNTIMES.values():
        fn = getattr(ops, name)
        params = inspect.signature(fn).parameters.values()
        keywords = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
        assert list(keywords) == list(decl.names), (ops.__name__, name)
        for key, _, default in decl.attrs:
            assert keywords[key] == (inspect.Parameter.empty if default is REQUIRED else default)
        assert all(keywords[key] is None for key in decl.runtime_keywords)
        assert not any(p.kind is p.VAR_KEYWORD for p in params)
        positional.append([p.name for p in params if p.kind is not p.KEYWORD_ONLY])
        assert fn.__doc__.startswith(api_ops.help_text(name).split("\n\nKeywords:")[0])
        assert fn.__lattice_api__ == name
    assert positional[0] == positional[1], name
    if name in SCHEMA_OPS:  # every IR op is still traced for the exporter
        assert getattr(to, name).__lattice_op__ == name


def _positional_dummies(name: str) -> list[None]:
    params = inspect.signature(getattr(mo, name)).parameters.values()
    return [None for p in params if p.kind is not p.KEYWORD_ONLY and p.default is p.empty]


def _array_names(name: str) -> list[str]:
    params = inspect.signature(getattr(mo, name)).parameters.values()
    return [p.name for p in params if p.kind is not p.KEYWORD_ONLY]


def _error(fn: Any) -> str:
    try:
        fn()
    except TypeError as exc:
        return str(exc)
    return "no TypeError"


@pytest.mark.parametrize("name", [n for n in OPS if api_ops.DECLARATIONS[n].attrs])
def test_a_misspelt_keyword_raises_the_contracts_error_on_both(name: str) -> None:
    decl = api_ops.DECLARATIONS[name]
    args = _positional_dummies(name)
    typo = f"{decl.attrs[0][0]}x"
    arrays = _array_names(name)
    want = str(keyword_error(name, typo, decl.names, arrays))
    assert f"(did you mean {decl.attrs[0][0]!r}?)" in want
    for ops in RUNTIMES.values():
        call = getattr(ops, name)
        assert _error(lambda call=call: call(*args, **{typo: 1})) == want, ops.__name__
    required = [key for key, _, default in decl.attrs if default is REQUIRED]
    if required:
        missing = [_error(lambda ops=ops: getattr(ops, name)(*args)) for ops in RUNTIMES.values()]
        assert missing[0] == missing[1], missing
        assert missing[0].startswith(f"{name}: missing required keyword {required[0]!r} ("), missing


def test_a_misspelt_array_name_is_an_unknown_keyword_with_a_suggestion_on_both() -> None:
    """``bais=`` / ``weigth=`` are typos of array names, not missing arrays or keywords."""
    x, w = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    bais = "linear: unexpected keyword 'bais' (did you mean 'bias'?); its arrays are: "
    bais += "input, weight, bias; its keywords are: none"
    for ops, arr in ((mo, to_mx), (to, to_torch)):
        with pytest.raises(TypeError) as info:
            ops.linear(arr(x), arr(w), bais=arr(w[:, 0]))
        assert str(info.value) == bais
        with pytest.raises(TypeError, match=r"^linear: unexpected keyword 'weigth' \(did you "):
            ops.linear(arr(x), weigth=arr(w))
        with pytest.raises(TypeError) as info:
            ops.softmax(arr(x), arr(x))
        assert str(info.value) == "softmax: takes 1 positional argument but 2 were given"


def _run_conv(rt: Any, ops: Any, arr: Any, **attrs: Any) -> np.ndarray:
    coords = np.array([[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 1, 0], [1, 3, 2, 1]], dtype=np.int32)
    rng = np.random.default_rng(0)
    x = rt.SparseTensor(arr(coords), arr(rng.standard_normal((4, 3)).astype(np.float32)), 1)
    w = arr(rng.standard_normal((2, 3, 3, 3, 3)).astype(np.float32))
    return np.asarray(ops.conv3d(x, w, kernel_size=3, **attrs).feats.tolist())


def test_omitted_keywords_mean_their_declared_defaults_on_both() -> None:
    """An omitted keyword means the dialect's default, written here independently.

    The textual builder's defaults (docs/dialect.md) are stride 1, padding 0,
    dilation 1, fills 0 and softmax axis -1: the declarations must resolve to
    exactly those, and a call omitting them must equal one spelling them out.
    """
    written = {"stride": (1, 1, 1), "padding": (0, 0, 0), "dilation": (1, 1, 1)}
    declared = api_ops.normalise("conv3d", {"kernel_size": 3})
    assert {key: declared[key] for key in written} == written
    assert api_ops.normalise("pool3d", {"kernel_size": 2, "mode": "max"})["stride"] == (1, 1, 1)
    binary = api_ops.normalise("sparse_binary", {"op": "add"})
    assert (binary["lhs_fill"], binary["rhs_fill"]) == (0.0, 0.0)
    assert api_ops.normalise("softmax", {})["axis"] == -1
    literal = {"stride": 1, "padding": 0, "dilation": 1}
    for rt, ops, arr in ((mlx_lattice, mo, to_mx), (torch_lattice, to, to_torch)):
        np.testing.assert_array_equal(_run_conv(rt, ops, arr), _run_conv(rt, ops, arr, **literal))


def _old_spelling_call(name: str, arr: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments after the features of each feature op that still takes ``x=``."""
    c = np.ones(3, np.float32)
    table: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
        "activation": ((), {"kind": "gelu"}),
        "batch_norm": ((arr(c), arr(c * 0.5), arr(c * 0.1), arr(c * 2.0)), {}),
        "cast": (("f16",), {}),
        "elementwise": ((), {"kind": "exp"}),
        "layer_norm": ((arr(c * 2.0), arr(c * 0.5)), {}),
        "linear": ((arr(np.arange(12, dtype=np.float32).reshape(4, 3)),), {}),
        "rms_norm": ((arr(c * 2.0),), {}),
        "softmax": ((), {}),
    }
    return table[name]


@pytest.mark.parametrize("name", sorted(OLD_SPELLINGS))
def test_feature_ops_take_the_dialects_operand_name_and_still_the_old_one(name: str) -> None:
    """``input`` (the dialect's and the builder's name) is declared; ``x=`` still works."""
    for ops in RUNTIMES.values():
        params = list(inspect.signature(getattr(ops, name)).parameters)
        assert params[0] == "input" and "x" not in params, (ops.__name__, name)
    feats = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3) + 0.1
    errors = []
    for ops, arr in ((mo, to_mx), (to, to_torch)):
        fn = getattr(ops, name)
        rest, attrs = _old_spelling_call(name, arr)
        x = arr(feats)
        by_position = np.asarray(fn(x, *rest, **attrs).tolist(), dtype=np.float32)
        if name != "cast":  # f16 rounding of these values is the only visible change
            assert not np.array_equal(by_position, feats), name
        if rest:  # the later arrays by name too, so ``x=`` may come first
            names = [p for p in inspect.signature(fn).parameters][1 : 1 + len(rest)]
            attrs = {**dict(zip(names, rest, strict=True)), **attrs}
        by_new = np.asarray(fn(input=x, **attrs).tolist(), dtype=np.float32)
        by_old = np.asarray(fn(x=x, **attrs).tolist(), dtype=np.float32)
        np.testing.assert_array_equal(by_new, by_position)
        np.testing.assert_array_equal(by_old, by_position)
        errors.append(_error(lambda fn=fn, attrs=attrs: fn(x=None, input=None, **attrs)))
    assert errors[0] == errors[1] == f"{name}: got both 'input' and its old spelling 'x'"


def test_point_ops_active_rows_rule_is_the_sparse_tensors_on_both() -> None:
    """voxelize/devoxelize count active rows by the SparseTensor constructors' one rule."""
    rng = np.random.default_rng(0)
    pts = rng.uniform(0, 4, (5, 3)).astype(np.float32)
    feats = np.ones((5, 2), np.float32)
    batch = np.zeros(5, np.int32)
    for rt, ops, arr in ((mlx_lattice, mo, to_mx), (torch_lattice, to, to_torch)):
        coords = arr(np.zeros((5, 4), np.int32))
        args = (arr(pts), arr(feats), arr(batch))
        cases = [arr(np.array([1], np.int64)), arr(np.array([1, 2], np.int32)), 7, -1, "3"]
        for bad in cases:
            with pytest.raises((TypeError, ValueError)) as by_tensor:
                rt.SparseTensor(coords, arr(feats), active_rows=bad)
            with pytest.raises(type(by_tensor.value)) as by_op:
                ops.voxelize(*args, bad, voxel_size=1.0)
            assert str(by_op.value) == f"voxelize: {by_tensor.value}", (rt.__name__, bad)
        x = ops.voxelize(*args, np.int64(3), voxel_size=1.0)  # a NumPy int in range is a count
        with pytest.raises(ValueError) as info:
            ops.devoxelize(args[0], x, args[2], 9, voxel_size=1.0)
        assert str(info.value).startswith("devoxelize: point_active_rows is 9 but only 5 ")


@pytest.mark.parametrize(
    ("bad", "error"),
    [("a", TypeError), (None, TypeError), (True, TypeError), (float("nan"), ValueError)],
)
def test_fill_values_are_checked_before_any_array_on_both(bad: object, error: type) -> None:
    """``lhs_fill``/``rhs_fill``/``fill`` are finite numbers, refused with the op's name."""
    want = f"must be a finite number, got {bad!r}"
    for ops in RUNTIMES.values():
        with pytest.raises(error) as binary:
            ops.sparse_binary(None, None, op="add", rhs_fill=bad)
        assert str(binary.value) == f"sparse_binary: rhs_fill {want}"
        with pytest.raises(error) as reindex:
            ops.sparse_reindex(None, None, fill=bad)
        assert str(reindex.value) == f"sparse_reindex: fill {want}"


def test_signatures_show_each_runtimes_own_types() -> None:
    """help() shows what a caller passes and gets: the runtime's classes, not bare names."""
    import mlx.core as mx
    import torch

    for ops, sparse, dense in (
        (mo, mlx_lattice.SparseTensor, mx.array),
        (to, torch_lattice.SparseTensor, torch.Tensor),
    ):
        assert inspect.signature(ops.conv3d).return_annotation is sparse
        assert inspect.signature(ops.pool3d).return_annotation is sparse
        activation = inspect.signature(ops.activation)
        assert activation.return_annotation is dense
        assert activation.parameters["input"].annotation is dense

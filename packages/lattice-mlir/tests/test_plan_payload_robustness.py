"""RuntimePlan.from_native on corrupted payloads: the contract's error, never another.

The payloads are real: ``lattice_mlir.import_plan`` of corpus modules.  Two
tests corrupt them.  The exhaustive one visits every field of every record
(each key of each dict, each entry of each list) and replaces it with each
hostile value (wrong types, integers beyond int64 and of thousands of
digits, non-finite floats, deep nesting, labels that create duplicates and
cycles), deletes it, or adds an unknown key beside it.  The property test
(hypothesis, bounded and derandomized) stacks several such edits.  Either
way the freezer and the type checker may accept the result or raise
``PlanError``; any other exception (TypeError, OverflowError,
RecursionError, KeyError, ValueError from ``repr`` of a huge integer) fails.
"""

from __future__ import annotations

import copy
import marshal
import math
from collections.abc import Iterator
from typing import Any

import lattice_mlir
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lattice_contract.plan import PlanError, RuntimePlan, typecheck_plan

MODULES = ("unet_block", "weight_packed", "call", "voxelize", "global_pool", "sparse_cat")


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    2**31,
    2**63,
    -(2**63) - 1,
    2**200,
    10**5000,  # str() refuses integers of more than 4,300 digits
    1.5,
    math.nan,
    math.inf,
    1e300,
    "",
    "v0",  # an existing label: duplicates and cycles
    "arg0",
    "\udcff",
    [],
    [1, 2, 3],
    ["v0", "v0"],
    {},
    {"kind": "tensor"},
    _deep(100_000),
    b"bytes",
]


def _copy(payload: Any) -> Any:
    """A deep copy of a plain payload (dicts, lists, str, int, float, bool, None), fast."""
    return marshal.loads(marshal.dumps(payload))


def _freeze(payload: Any) -> None:
    try:
        typecheck_plan(RuntimePlan.from_native(payload))
    except PlanError as error:
        assert str(error).strip(), "a PlanError without a message"


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*path, index))


def _container(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        root = root[key]
    return root


@pytest.fixture(scope="module")
def payloads(valid_modules: dict[str, str]) -> dict[str, dict[str, Any]]:
    found = {name: lattice_mlir.import_plan(valid_modules[name]) for name in MODULES}
    for payload in found.values():
        RuntimePlan.from_native(payload)  # every uncorrupted payload is valid
    return found


# The smaller payloads, exhaustively (unet_block alone would be ~8,600 imports;
# the property test below mutates it too).
@pytest.mark.parametrize("name", ["weight_packed", "call", "global_pool", "sparse_cat"])
def test_every_field_corrupted_every_way(payloads: dict[str, dict[str, Any]], name: str) -> None:
    payload = payloads[name]
    paths = [p for p in _paths(payload) if p]
    assert len(paths) > 30
    tried = 0
    for path in paths:
        edits: list[tuple[str, Any]] = [("delete", None), ("extra", 1)]
        edits += [("replace", value) for value in HOSTILE]
        for action, value in edits:
            root = _copy(payload)
            container, key = _container(root, path), path[-1]
            if action == "delete":
                del container[key]
            elif action == "extra":
                if not isinstance(container, dict):
                    continue
                container[f"unexpected_{key}"] = value
            else:
                container[key] = value
            _freeze(root)
            tried += 1
    assert tried > 500


# --- the property test -------------------------------------------------------------

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**300), max_value=2**300),
    st.sampled_from([2**63, -(2**63) - 1, 2**31]),
    st.integers(4400, 6000).map(lambda digits: 10**digits),  # beyond str()'s digit limit
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["v0", "v1", "arg0", "arg1", "lattice.conv3d", "tensor", "sparse"]),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=3),
    ),
    max_leaves=8,
)


@st.composite
def corrupted(draw: st.DrawFn, payloads: dict[str, dict[str, Any]]) -> Any:
    root = _copy(payloads[draw(st.sampled_from(sorted(payloads)))])
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(root) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        container, key = _container(root, path), path[-1]
        action = draw(st.sampled_from(["replace", "delete", "extra", "duplicate", "swap"]))
        if action == "replace":
            container[key] = draw(_VALUES)
        elif action == "delete":
            del container[key]
        elif action == "extra" and isinstance(container, dict):
            container[draw(st.text(max_size=6))] = draw(_VALUES)
        elif action == "duplicate" and isinstance(container, list):
            container.insert(key, copy.deepcopy(container[key]))
        elif action == "swap":
            other = draw(st.sampled_from(paths))
            if other[: len(path)] != path and path[: len(other)] != other:
                other_container = _container(root, other)
                container[key], other_container[other[-1]] = (
                    other_container[other[-1]],
                    container[key],
                )
    return root


@settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_real_payloads_raise_only_plan_error(
    payloads: dict[str, dict[str, Any]], data: st.DataObject
) -> None:
    _freeze(data.draw(corrupted(payloads)))


def test_cyclic_and_duplicate_labels(payloads: dict[str, dict[str, Any]]) -> None:
    payload = payloads["unet_block"]
    ops = payload["ops"]
    cyclic = copy.deepcopy(payload)
    late = next(i for i, op in enumerate(ops) if op["operands"])
    cyclic["ops"][late]["operands"][0] = cyclic["ops"][late]["results"][0]
    with pytest.raises(PlanError, match="before it is defined"):
        RuntimePlan.from_native(cyclic)
    duplicate = copy.deepcopy(payload)
    duplicate["ops"][1]["results"] = list(duplicate["ops"][0]["results"])
    with pytest.raises(PlanError, match="redefines value label"):
        RuntimePlan.from_native(duplicate)
    undefined = copy.deepcopy(payload)
    undefined["returns"] = ["v999"]
    with pytest.raises(PlanError, match="not defined"):
        RuntimePlan.from_native(undefined)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (2**31, r"outside \[-2147483648, 2147483647\]: coordinates are int32"),
        (2**63, r"outside \[-2147483648, 2147483647\]"),
        (10**5000, r"an integer of 16610 bits"),
    ],
    ids=["2**31", "2**63", "10**5000"],
)
def test_triples_are_bounded_to_int32(
    payloads: dict[str, dict[str, Any]], value: int, words: str
) -> None:
    payload = copy.deepcopy(payloads["unet_block"])
    op = next(op for op in payload["ops"] if "stride" in op["attrs"])
    op["attrs"]["stride"] = [value, 1, 1]
    with pytest.raises(PlanError, match=words):
        RuntimePlan.from_native(payload)


def test_i64_attributes_are_bounded_to_int64(payloads: dict[str, dict[str, Any]]) -> None:
    payload = copy.deepcopy(payloads["global_pool"])
    op = next(op for op in payload["ops"] if "batch_size" in op["attrs"])
    op["attrs"]["batch_size"] = 2**63
    with pytest.raises(PlanError, match=r"outside \[-9223372036854775808, 9223372036854775807\]"):
        RuntimePlan.from_native(payload)
    op["attrs"]["batch_size"] = 2**63 - 1
    RuntimePlan.from_native(payload)


@pytest.mark.parametrize(
    "entry", [10**5000, 2**1100, "1.0", math.inf], ids=["10**5000", "2**1100", "str", "inf"]
)
def test_f64_triples_with_hostile_entries_are_plan_errors(
    payloads: dict[str, dict[str, Any]], entry: Any
) -> None:
    # A huge integer beside a string once escaped as ValueError from repr(),
    # and one too large for an f64 as OverflowError from math.isfinite.
    payload = copy.deepcopy(payloads["voxelize"])
    op = next(op for op in payload["ops"] if "voxel_size" in op["attrs"])
    op["attrs"]["voxel_size"] = [entry, "x", 1.0] if entry == 10**5000 else [entry, 1.0, 1.0]
    with pytest.raises(PlanError, match=r"must be three finite numbers"):
        RuntimePlan.from_native(payload)

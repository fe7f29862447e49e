"""Each value set is stated once and tested once: a copy cannot come back unseen.

The dialect declares the packed group sizes once (``PACKING_GROUP_SIZES`` in
``lattice_contract/dialect/types.py``, which the schema, the digest and the
generated C++ tables read) and :mod:`lattice_contract.dialect.values` holds the
one membership test of each value set; the output-stride rule is stated once
in :mod:`lattice_contract.dialect.geometry`.  These tests read every shipped
source file of the monorepo as a syntax tree and fail on a second statement:
a literal tuple of the group sizes, a membership test against a value set
outside ``values.py``, or an output stride written out axis by axis
(``t[0] * s[0], ...``) outside ``geometry.py``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from lattice_contract.dialect import GROUP_SIZES, PACKING_GROUP_SIZES, QUANT_BITS

REPO = Path(__file__).resolve().parents[3]
DIALECT = Path("packages/lattice-contract/src/lattice_contract/dialect")
VALUE_SET_NAMES = {"GROUP_SIZES", "PACKING_GROUP_SIZES", "QUANT_BITS"}
ROUTED_STRIDE_COPIES: set[str] = set()
"""Output strides still written out elsewhere (each should call
``lattice_contract.dialect.transposed_stride``); none is left."""


@functools.cache
def _sources() -> tuple[tuple[Path, ast.Module], ...]:
    """Every shipped source file's syntax tree, parsed once for all the tests here."""
    out = []
    for path in sorted(REPO.glob("packages/*/src/**/*.py")):
        rel = path.relative_to(REPO)
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))))
    return tuple(out)


def _int_literal(node: ast.AST) -> tuple[int, ...] | None:
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)) or not node.elts:
        return None
    values = []
    for elt in node.elts:
        if not isinstance(elt, ast.Constant) or type(elt.value) is not int:
            return None
        values.append(elt.value)
    return tuple(values)


def _mentions_stride(node: ast.AST) -> bool:
    return "stride" in ast.unparse(node)


def _axis_by_axis(node: ast.AST) -> type[ast.operator] | None:
    """``(a[0] OP b[0], a[1] OP b[1], a[2] OP b[2])`` on strides, or the zip form; its OP."""
    if isinstance(node, ast.Tuple) and len(node.elts) == 3:
        ops = {
            type(e.op)
            for e in node.elts
            if isinstance(e, ast.BinOp)
            and isinstance(e.left, ast.Subscript)
            and isinstance(e.right, ast.Subscript)
            and _mentions_stride(e.left)  # a stride, not a coordinate divided by one
        }
        if len(ops) == 1 and sum(isinstance(e, ast.BinOp) for e in node.elts) == 3:
            return ops.pop()
    if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and isinstance(node.elt, ast.BinOp):
        gen = node.generators[0]
        if (
            isinstance(gen.iter, ast.Call)
            and ast.unparse(gen.iter.func) == "zip"
            and isinstance(node.elt.left, ast.Name)
            and isinstance(node.elt.right, ast.Name)
            and _mentions_stride(gen.iter)
            # a grid's shape in cells times its stride is a physical extent, no output stride
            and "shape" not in ast.unparse(gen.iter)
        ):
            return type(node.elt.op)
    return None


def test_the_value_sets_are_the_schemas() -> None:
    assert GROUP_SIZES == PACKING_GROUP_SIZES == (32, 64, 128)
    assert QUANT_BITS == (4, 8)


def test_the_group_size_tuple_is_written_once() -> None:
    found = [
        f"{rel}:{getattr(node, 'lineno', 0)}"
        for rel, tree in _sources()
        for node in ast.walk(tree)
        if _int_literal(node) == GROUP_SIZES
    ]
    assert found == [f"{DIALECT / 'types.py'}:{_line_of('PACKING_GROUP_SIZES: tuple')}"], found


def _line_of(text: str) -> int:
    lines = (REPO / DIALECT / "types.py").read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.startswith(text))


def test_value_sets_are_tested_for_membership_only_in_values_py() -> None:
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) and ast.unparse(right) in VALUE_SET_NAMES:
                    found.append(f"{rel}:{getattr(node, 'lineno', 0)}")
    assert found and all(f.startswith(str(DIALECT / "values.py")) for f in found), found


def test_the_output_stride_is_written_out_only_in_geometry_py() -> None:
    found: dict[str, list[str]] = {}
    for rel, tree in _sources():
        for node in ast.walk(tree):
            op = _axis_by_axis(node)
            if op in (ast.Mult, ast.FloorDiv):
                found.setdefault(op.__name__, []).append(f"{rel}:{getattr(node, 'lineno', 0)}")
    geometry = str(DIALECT / "geometry.py")
    # forward_stride (t * s) and transposed_stride (t // s), once each, plus the routed copies
    assert [w for w in found.get("Mult", []) if not w.startswith(geometry)] == [], found
    floor_div = {w.split(":")[0] for w in found.get("FloorDiv", [])}
    assert floor_div == {geometry, *ROUTED_STRIDE_COPIES}, found
    assert [w.split(":")[0] for w in found["Mult"] + found["FloorDiv"]].count(geometry) == 2


def test_the_scan_sees_a_planted_copy() -> None:
    """The detectors fire on the shapes they must catch (so the tests above can fail)."""
    planted = ast.parse(
        "GROUP = (32, 64, 128)\n"
        "ok = g in GROUP_SIZES\n"
        "out = (x.stride[0] * s[0], x.stride[1] * s[1], x.stride[2] * s[2])\n"
        "back = tuple(t // s for t, s in zip(in_stride, op_stride))\n"
        "box = tuple(n * t for n, t in zip(grid_shape, x.stride))\n"
    )
    nodes = list(ast.walk(planted))
    assert any(_int_literal(n) == GROUP_SIZES for n in nodes)
    assert any(
        isinstance(n, ast.Compare) and ast.unparse(n.comparators[0]) in VALUE_SET_NAMES
        for n in nodes
    )
    assert {_axis_by_axis(n) for n in nodes} >= {ast.Mult, ast.FloorDiv}
    box = next(n for n in nodes if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "box")
    assert _axis_by_axis(box.value.args[0]) is None  # type: ignore[attr-defined]

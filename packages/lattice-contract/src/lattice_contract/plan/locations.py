"""Source locations of a graph's ops: the module path each op came from.

An exporter writes each op's source module path as an MLIR name location,
``%3 = lattice.subm_conv3d ... loc("conv_input.0")``.  MLIR keeps locations
out of the semantics, so every verifier accepts them; the native plan payload
does not carry them, so they are read back here from the graph text, op line
by op line, and attached to the frozen :class:`PlanOperation` records that
diagnostics (``op #3 (lattice.subm_conv3d -> v3) at conv_input.0``),
``lattice inspect`` and ``lattice view`` print.  A graph whose op lines do
not pair one to one with the plan's ops (hand-written, multi-line ops) simply
has no locations: nothing is guessed.
"""

from __future__ import annotations

import dataclasses
import re

from lattice_contract.plan.records import RuntimePlan

__all__ = ["locate_plan", "op_locations"]

_OP_LINE = re.compile(r"^\s*(?:%[^=]+=\s*)?(\"?lattice\.[A-Za-z0-9_.]+)")
_LOC = re.compile(r'\sloc\("((?:[^"\\]|\\.)*)"\)\s*$')


def op_locations(graph: str) -> list[str | None]:
    """The name location of each ``lattice.*`` op line of ``graph``, in order (None: none)."""
    found: list[str | None] = []
    for line in graph.splitlines():
        if not _OP_LINE.match(line):
            continue
        loc = _LOC.search(line)
        found.append(None if loc is None else _unescape(loc.group(1)))
    return found


_ESCAPE = re.compile(r"\\([0-9a-fA-F]{2}|.)")
_SIMPLE = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unescape(text: str) -> str:
    """An MLIR string literal's body as text (``\\22`` is a hex byte, ``\\n`` a newline)."""
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(text):
        out += text[pos : m.start()].encode()
        code = m.group(1)
        out += bytes([int(code, 16)]) if len(code) == 2 else _SIMPLE.get(code, code).encode()
        pos = m.end()
    out += text[pos:].encode()
    return out.decode("utf-8", errors="replace")


def locate_plan(plan: RuntimePlan, graph: str) -> RuntimePlan:
    """``plan`` with each op's ``location`` from ``graph`` (unchanged when they do not pair)."""
    locations = op_locations(graph)
    if len(locations) != len(plan.ops) or not any(locations):
        return plan
    ops = tuple(
        op if loc is None else dataclasses.replace(op, location=loc)
        for op, loc in zip(plan.ops, locations, strict=True)
    )
    return dataclasses.replace(plan, ops=ops)

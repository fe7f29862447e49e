"""The int32-limit cases and their exact reference, shared by every runtime's tests.

Each case is a one-channel sparse input with all-ones weights, so each output
row's value is its number of (input, tap) pairs; :func:`reference` computes
the support and the counts with Python integers straight from the relations
(lattice_contract.dialect.kernel's offset rules) and names the input rows whose true
output leaves int32.  Plain Python (no array library), so the MLX and torch
tests here and torch's Triton tests (which run on machines without MLX) read
the same table.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from lattice_contract.dialect import INT32_MAX, INT32_MIN

TOP = 2**31 - 1
BOTTOM = -(2**31)


def _offsets(k: int, d: int, centred: bool) -> list[int]:
    if centred and k % 2:
        return [(i - k // 2) * d for i in range(k)]
    return [i * d for i in range(k)]


Geo = dict[str, Any]
Row = tuple[int, int, int, int]


def _triple(v: int | tuple[int, int, int]) -> tuple[int, int, int]:
    return v if isinstance(v, tuple) else (v, v, v)


def reference(
    op: str, rows: list[tuple[int, ...]], t: int, geo: Geo
) -> tuple[dict[Row, int], set[int]]:
    """(physical output row -> pair count, indices of input rows that leave int32).

    Python integers throughout, straight from the op's relation.
    """
    k, s, p, d = (_triple(geo[n]) for n in ("kernel_size", "stride", "padding", "dilation"))
    assert len(set(s)) == 1
    s0 = s[0]
    logical = [(b, x // t, y // t, z // t) for b, x, y, z in rows]
    active = set(logical)
    out: Counter[Row] = Counter()
    bad: set[int] = set()
    if op in ("conv3d", "pool3d"):
        out_t = t * s0
        support = {(b, x // s0, y // s0, z // s0) for b, x, y, z in logical}
        offs = [_offsets(k[a], d[a], centred=True) for a in range(3)]
        for o in support:
            for delta in itertools.product(*offs):
                c = (o[0], *(o[1 + a] * s0 + delta[a] - p[a] for a in range(3)))
                if c in active:
                    out[o] += 1
            out[o] += 0
    else:
        if op == "full_conv3d":
            out_t = t * s0

            def emit(c: int, kd: int, a: int) -> int | None:
                num = c + p[a] - kd
                return num // s0 if num % s0 == 0 else None
        else:  # conv_transpose3d / generative_conv_transpose3d
            out_t = t // s0

            def emit(c: int, kd: int, a: int) -> int | None:
                return c * s0 - p[a] + kd

        offs = [_offsets(k[a], d[a], centred=False) for a in range(3)]
        for i, (b, x, y, z) in enumerate(logical):
            for kx, ky, kz in itertools.product(*offs):
                ox, oy, oz = emit(x, kx, 0), emit(y, ky, 1), emit(z, kz, 2)
                if ox is None or oy is None or oz is None:
                    continue
                if any(not INT32_MIN <= v * out_t <= INT32_MAX for v in (ox, oy, oz)):
                    bad.add(i)
                out[(b, ox, oy, oz)] += 1
    physical = {(o[0], o[1] * out_t, o[2] * out_t, o[3] * out_t): n for o, n in out.items()}
    return physical, bad


def _rows(*xs: int, t: int = 1) -> list[tuple[int, ...]]:
    return [(0, x, 0, 0) for x in xs]


def geo(k: Any, s: int, p: int, d: Any) -> Geo:
    return {"kernel_size": k, "stride": s, "padding": p, "dilation": d}


CASES: list[tuple[str, str, list[tuple[int, ...]], int, Geo]] = [
    # label, op, input rows (physical), input stride, geo(kernel, stride, padding, dilation)
    ("conv3d K3 s2 p1 at 2^31-1", "conv3d", _rows(TOP, TOP - 1), 1, geo(3, 2, 1, 1)),
    (
        "conv3d K3 s2 p1, stride-2 input at 2^31-2",
        "conv3d",
        _rows(TOP - 1, TOP - 3),
        2,
        geo(3, 2, 1, 1),
    ),
    ("conv3d K3 s1 p1 at 2^31-1", "conv3d", _rows(TOP, TOP - 1, TOP - 2), 1, geo(3, 1, 1, 1)),
    (
        "conv3d K3 s1 p1 at -2^31 beside 2^31-2",
        "conv3d",
        _rows(BOTTOM, TOP - 1),
        1,
        geo(3, 1, 1, 1),
    ),
    ("pool3d K3 s2 p1 at 2^31-1", "pool3d", _rows(TOP, TOP - 2), 1, geo(3, 2, 1, 1)),
    ("full_conv3d K3 p0 at 2^31-1", "full_conv3d", _rows(TOP), 1, geo(3, 1, 0, 1)),
    ("full_conv3d K3 p2 at 2^31-1", "full_conv3d", _rows(TOP, 7), 1, geo(3, 1, 2, 1)),
    ("full_conv3d K3 p0 at -2^31", "full_conv3d", _rows(5, BOTTOM), 1, geo(3, 1, 0, 1)),
    ("conv_transpose3d K3 p1 at 2^31-2", "conv_transpose3d", _rows(TOP - 1), 1, geo(3, 1, 1, 1)),
    ("conv_transpose3d K3 p0 at 2^31-2", "conv_transpose3d", _rows(3, TOP - 1), 1, geo(3, 1, 0, 1)),
    (
        "conv_transpose3d K3 d=2^30 at 0 (k*d = 2^31)",
        "conv_transpose3d",
        _rows(0),
        1,
        geo((3, 1, 1), 1, 0, (2**30, 1, 1)),
    ),
    (
        "conv_transpose3d K2 d=2^31-1 at 0 (k*d fits)",
        "conv_transpose3d",
        _rows(0),
        1,
        geo((2, 1, 1), 1, 0, (TOP, 1, 1)),
    ),
    (
        "conv_transpose3d K3 s2, stride-2 input at 2^31-2",
        "conv_transpose3d",
        _rows(TOP - 1),
        2,
        geo(3, 2, 0, 1),
    ),
    ("conv_transpose3d K3 p2 at -2^31", "conv_transpose3d", _rows(BOTTOM), 1, geo(3, 1, 2, 1)),
    (
        "generative K2 s1 at 2^31-2",
        "generative_conv_transpose3d",
        _rows(TOP - 1),
        1,
        geo(2, 1, 0, 1),
    ),
    ("generative K2 s1 at 2^31-1", "generative_conv_transpose3d", _rows(TOP), 1, geo(2, 1, 0, 1)),
    (
        "generative K2 s2, stride-2 input at 2^31-1-1",
        "generative_conv_transpose3d",
        _rows(TOP - 1),
        2,
        geo(2, 2, 0, 1),
    ),
]


TRANSPOSED_FAMILY: list[tuple[str, list[tuple[int, ...]], int, Geo]] = [
    # op, input rows (physical), input stride, keyword arguments
    ("normalized_conv_transpose3d", _rows(TOP - 1), 1, geo(3, 1, 0, 1)),
    ("normalized_generative_conv_transpose3d", _rows(TOP), 1, {"kernel_size": 2, "stride": 1}),
    ("pool_transpose3d", _rows(3, TOP - 1), 1, geo(3, 1, 0, 1)),
    ("trilinear_upsample3d", _rows(8, BOTTOM), 4, {"stride": 4}),  # fine rows reach -2^31 - 3
]

"""Brute-force NumPy references of the reference system's eight extra ops, from their definitions.

Written straight from the contract's formulas (docs/semantics.md), row by row
and tap by tap over Python dicts of logical coordinates, so that nothing here
shares code or structure with either runtime: the runtimes build kernel maps
and run the upsampling ops as weighted transposed maps; this module walks the
definitions literally (trilinear, for instance, by the distance rule
``|o - c*s| < s`` rather than by any kernel window).  Inputs are small, so the
loops are cheap.  Coordinates here are *logical* ``(batch, x, y, z)`` tuples.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

Triple = tuple[int, int, int]
Row = tuple[int, int, int, int]


def taps(kernel: Triple) -> list[Triple]:
    """Every tap in weight-row order (z fastest)."""
    return list(itertools.product(range(kernel[0]), range(kernel[1]), range(kernel[2])))


def rows_of(coords: np.ndarray) -> list[Row]:
    """The ``(N, 4)`` coordinate rows as tuples (hashable, for dictionaries and sets)."""
    return [(int(b), int(x), int(y), int(z)) for b, x, y, z in coords.tolist()]


def _row_index(coords: np.ndarray) -> dict[Row, int]:
    return {row: i for i, row in enumerate(rows_of(coords))}


def _weight_taps(weight: np.ndarray) -> np.ndarray:
    """(C_out, Kx, Ky, Kz, C_in) -> (K, C_out, C_in)."""
    c_out, c_in = weight.shape[0], weight.shape[-1]
    return weight.reshape(c_out, -1, c_in).transpose(1, 0, 2).astype(np.float64)


def _normalise(
    pairs: dict[Row, list[tuple[int, int]]],
    rows: Sequence[Row],
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    eps: float,
) -> np.ndarray:
    w = _weight_taps(weight)
    out = np.zeros((len(rows), weight.shape[0]))
    for n, o in enumerate(rows):
        num = np.zeros(weight.shape[0])
        den = np.zeros(weight.shape[0])
        for r, k in pairs.get(o, []):
            num += w[k] @ x[r]
            den += (w[k] ** 2).sum(axis=1)
        out[n] = num / np.sqrt(den + eps)
        if bias is not None:
            out[n] += bias
    return out


def normalized_subm(
    coords: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    kernel: Triple,
    dilation: Triple,
    eps: float,
) -> np.ndarray:
    """Rows = input rows; tap k reads ``c + (k - (K-1)//2) * d``; pointwise = plain subm."""
    index = _row_index(coords)
    rows = list(index)
    if kernel == (1, 1, 1) and dilation == (1, 1, 1):
        out = x.astype(np.float64) @ weight[:, 0, 0, 0, :].astype(np.float64).T
        return out if bias is None else out + bias
    pairs: dict[Row, list[tuple[int, int]]] = {}
    for o in rows:
        for k, tap in enumerate(taps(kernel)):
            c = (
                o[0],
                *(o[a + 1] + (tap[a] - (kernel[a] - 1) // 2) * dilation[a] for a in range(3)),
            )
            if c in index:
                pairs.setdefault(o, []).append((index[c], k))
    return _normalise(pairs, rows, x, weight, bias, eps)


def transposed_pairs(
    coords: np.ndarray, kernel: Triple, stride: Triple, padding: Triple, dilation: Triple
) -> dict[Row, list[tuple[int, int]]]:
    """Every output ``o = c*s - p + k*d`` with the (input row, tap) pairs reaching it."""
    pairs: dict[Row, list[tuple[int, int]]] = {}
    for r, c in enumerate(coords):
        for k, tap in enumerate(taps(kernel)):
            o = (
                int(c[0]),
                *(int(c[a + 1]) * stride[a] - padding[a] + tap[a] * dilation[a] for a in range(3)),
            )
            pairs.setdefault(o, []).append((r, k))  # type: ignore[arg-type]
    return pairs


def normalized_transposed(
    coords: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    eps: float,
    target: Iterable[Row] | None = None,
) -> tuple[list[Row], np.ndarray]:
    """``(rows, features)``: the transposed relation's support (or the target's rows)."""
    pairs = transposed_pairs(coords, kernel, stride, padding, dilation)
    rows = sorted(pairs) if target is None else list(target)
    return rows, _normalise(pairs, rows, x, weight, bias, eps)


def pool_transpose(
    coords: np.ndarray,
    x: np.ndarray,
    kernel: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    target: Iterable[Row] | None = None,
) -> tuple[list[Row], np.ndarray]:
    """Mean of the coarse rows reaching each output by ``c = (o + p - k*d) / s``; 0 if none."""
    index = _row_index(coords)
    if target is None:
        rows = sorted(transposed_pairs(coords, kernel, stride, padding, dilation))
    else:
        rows = list(target)
    out = np.zeros((len(rows), x.shape[1]))
    for n, o in enumerate(rows):
        found = []
        for tap in taps(kernel):
            num = [o[a + 1] + padding[a] - tap[a] * dilation[a] for a in range(3)]
            if all(num[a] % stride[a] == 0 for a in range(3)):
                c = (o[0], *(num[a] // stride[a] for a in range(3)))
                if c in index:
                    found.append(index[c])
        if found:
            out[n] = x[found].astype(np.float64).mean(axis=0)
    return rows, out


def trilinear(
    coords: np.ndarray, x: np.ndarray, stride: Triple, target: Iterable[Row] | None = None
) -> tuple[list[Row], np.ndarray]:
    """Hat weights ``prod(1 - |o - c*s| / s)`` over present c with ``|o - c*s| < s``."""
    if target is None:
        support: set[Row] = set()
        for c in coords:
            ranges = [
                range(
                    int(c[a + 1]) * stride[a] - stride[a] + 1, int(c[a + 1]) * stride[a] + stride[a]
                )
                for a in range(3)
            ]
            support.update((int(c[0]), *o) for o in itertools.product(*ranges))  # type: ignore[misc]
        rows = sorted(support)
    else:
        rows = list(target)
    out = np.zeros((len(rows), x.shape[1]))
    for n, o in enumerate(rows):
        num = np.zeros(x.shape[1])
        den = 0.0
        for r, c in enumerate(coords):
            if int(c[0]) != o[0]:
                continue
            dist = [abs(o[a + 1] - int(c[a + 1]) * stride[a]) for a in range(3)]
            if all(dist[a] < stride[a] for a in range(3)):
                w = float(np.prod([1 - dist[a] / stride[a] for a in range(3)]))
                num += w * x[r]
                den += w
        out[n] = num / max(den, 1e-12)
    return rows, out

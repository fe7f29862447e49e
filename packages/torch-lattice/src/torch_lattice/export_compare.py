"""Comparing an exported artifact's outputs with the eager model's.

The exporter writes nothing until the artifact reproduces the model on the
example inputs: sparse outputs must keep the stride and, after canonical
ordering, the coordinates exactly; features and dense outputs must agree
within ``rtol``/``atol`` (defaults per dtype in :data:`DEFAULT_TOLERANCES`),
with NaNs and infinities in the same places.  :func:`compare_outputs` is
public so that a caller can hold any two sets of outputs to the same bar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from torch_lattice.coords import canonical_order
from torch_lattice.sparse import SparseTensor

__all__ = ["DEFAULT_TOLERANCES", "OutputCheck", "compare_outputs"]

DEFAULT_TOLERANCES: Mapping[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}
"""``(rtol, atol)`` per output dtype used when the caller gives none."""


@dataclass(frozen=True)
class OutputCheck:
    """How one artifact output compared with the eager model's."""

    name: str
    kind: str  # "sparse" | "tensor"
    rows: int
    max_abs_error: float
    max_rel_error: float
    passed: bool
    problem: str = ""


def _feature_errors(
    expected: torch.Tensor, actual: torch.Tensor, rtol: float, atol: float
) -> tuple[float, float, bool]:
    """Max absolute error, max relative error (where ``|expected| > atol``), and pass/fail."""
    e = expected.detach().to(torch.float64)
    a = actual.detach().to(e.device, torch.float64)
    if e.numel() == 0:
        return 0.0, 0.0, True
    finite = torch.isfinite(e)
    # NaN and infinities must appear in the same places with the same values.
    same_special = torch.equal(torch.isnan(a), torch.isnan(e)) and torch.equal(
        torch.isinf(a), torch.isinf(e)
    )
    infinite = torch.isinf(e)
    same_special = same_special and torch.equal(a[infinite], e[infinite])
    diff = (a[finite] - e[finite]).abs()
    magnitude = e[finite].abs()
    if diff.numel() == 0:
        return 0.0, 0.0, same_special
    rel = torch.where(magnitude > atol, diff / magnitude, torch.zeros_like(diff))
    ok = same_special and bool(torch.all(diff <= atol + rtol * magnitude))
    return float(diff.max()), float(rel.max()), ok


def compare_outputs(
    expected: Sequence[Any],
    actual: Sequence[Any],
    names: Sequence[str],
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[OutputCheck, ...]:
    """Compare eager and artifact outputs value by value.

    Sparse values must have the same stride and, after canonical ordering,
    the same coordinates exactly; features (and dense tensors) must satisfy
    ``|actual - expected| <= atol + rtol * |expected|`` elementwise.  Default
    tolerances come from :data:`DEFAULT_TOLERANCES` by dtype.
    """
    checks: list[OutputCheck] = []
    for name, e, a in zip(names, expected, actual, strict=True):
        kind = "sparse" if isinstance(e, SparseTensor) else "tensor"
        ef = e.feats if isinstance(e, SparseTensor) else e
        r_default, a_default = DEFAULT_TOLERANCES.get(ef.dtype, (1e-4, 1e-5))
        rt = r_default if rtol is None else rtol
        at = a_default if atol is None else atol

        def fail(problem: str, *, kind: str = kind, name: str = name, rows: int = 0) -> None:
            checks.append(OutputCheck(name, kind, rows, float("inf"), float("inf"), False, problem))

        if isinstance(e, SparseTensor):
            if not isinstance(a, SparseTensor):
                fail(f"the artifact returned {type(a).__name__}, the model a SparseTensor")
                continue
            if a.stride != e.stride:
                fail(f"stride {a.stride} differs from the model's {e.stride}")
                continue
            if a.num_rows != e.num_rows:
                fail(f"{a.num_rows} rows, the model has {e.num_rows}", rows=e.num_rows)
                continue
            pe = canonical_order(e.coords)
            pa = canonical_order(a.coords)
            if not torch.equal(e.coords[pe].cpu(), a.coords[pa].cpu()):
                fail("coordinates differ after canonical ordering", rows=e.num_rows)
                continue
            ev, av = e.feats[pe], a.feats[pa]
        else:
            if not isinstance(a, torch.Tensor):
                fail(f"the artifact returned {type(a).__name__}, the model a tensor")
                continue
            if tuple(a.shape) != tuple(e.shape):
                fail(f"shape {tuple(a.shape)} differs from the model's {tuple(e.shape)}")
                continue
            ev, av = e, a
        if av.dtype != ev.dtype:
            fail(f"dtype {av.dtype} differs from the model's {ev.dtype}", rows=int(ev.shape[0]))
            continue
        abs_err, rel_err, ok = _feature_errors(ev, av, rt, at)
        problem = "" if ok else f"features differ beyond rtol={rt}, atol={at}"
        checks.append(OutputCheck(name, kind, int(ev.shape[0]), abs_err, rel_err, ok, problem))
    return tuple(checks)

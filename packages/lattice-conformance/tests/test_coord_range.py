"""Coordinates at the int32 limits: exact results or a Int32CoordinateError, on both runtimes.

Every case is a one-channel sparse input with all-ones weights, so each output
row's value is its number of (input, tap) pairs.  The reference computes the
support and the counts with Python integers straight from the relations
(lattice_contract.dialect.kernel's offset rules); when a true output coordinate leaves
int32, both runtimes must raise Int32CoordinateError naming the op, the axis
and an input row that produces it, and otherwise agree with the reference
exactly.  Before, torch wrapped such coordinates to -2^31 (duplicate rows) and
MLX emitted made-up rows or merged distinct outputs; MLX also wrapped *read*
positions, so a conv3d at x = -2^31 read a row at 2^31 - 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx_lattice.ops as mo
import numpy as np
import pytest
import torch
import torch_lattice.ops as to
from lattice_contract.dialect import INT32_MAX, INT32_MIN, Int32CoordinateError
from mlx_lattice import SparseTensor as MxSparse
from torch_lattice import SparseTensor as TorchSparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coord_range_cases import CASES, TRANSPOSED_FAMILY, Geo, _triple, reference


def _call(runtime: str, op: str, rows: list[tuple[int, ...]], t: int, geo: Geo) -> Any:
    kx, ky, kz = _triple(geo["kernel_size"])
    kwargs = dict(geo)
    if op == "generative_conv_transpose3d":
        kwargs.pop("padding")
        kwargs.pop("dilation")
    if runtime == "torch":
        x: TorchSparse | MxSparse = TorchSparse(
            torch.tensor(rows, dtype=torch.int32), torch.ones(len(rows), 1), stride=t
        )
        module: Any = to
        ones: Any = torch.ones(1, kx, ky, kz, 1)
    else:
        x = MxSparse(mx.array(rows, dtype=mx.int32), mx.ones((len(rows), 1)), stride=t)
        module, ones = mo, mx.ones((1, kx, ky, kz, 1))
    if op in ("pool3d",):
        y = getattr(module, op)(x, mode="sum", **kwargs)
    else:
        y = getattr(module, op)(x, ones, **kwargs)
    coords = np.asarray(y.coords).astype(np.int64)
    feats = np.asarray(y.feats if runtime == "mlx" else y.feats.detach()).reshape(-1)
    return {tuple(int(v) for v in row): float(f) for row, f in zip(coords, feats, strict=True)}


@pytest.mark.parametrize("runtime", ["torch", "mlx"])
@pytest.mark.parametrize(("label", "op", "rows", "t", "geo"), CASES, ids=[c[0] for c in CASES])
def test_int32_limits_match_the_exact_reference_or_raise(
    runtime: str, label: str, op: str, rows: list[tuple[int, ...]], t: int, geo: Geo
) -> None:
    expected, bad = reference(op, rows, t, geo)
    if bad:
        with pytest.raises(Int32CoordinateError) as info:
            _call(runtime, op, rows, t, geo)
        err = info.value
        assert err.op == op and err.axis == 1, str(err)
        assert err.row in bad and err.coords == rows[err.row]
        assert not INT32_MIN <= err.value <= INT32_MAX
        assert str(err).startswith(f"{op}: the output coordinate on axis x would be {err.value}")
        return
    got = _call(runtime, op, rows, t, geo)
    assert got == {row: float(n) for row, n in expected.items()}, label


def test_the_table_has_both_outcomes() -> None:
    outcomes = [bool(reference(op, rows, t, geo)[1]) for _, op, rows, t, geo in CASES]
    assert 5 <= sum(outcomes) <= len(outcomes) - 5


@pytest.mark.parametrize("runtime", ["torch", "mlx"])
@pytest.mark.parametrize(("op", "rows", "t", "kwargs"), TRANSPOSED_FAMILY)
def test_the_transposed_family_names_the_op_past_the_int32_limit(
    runtime: str, op: str, rows: list[tuple[int, ...]], t: int, kwargs: Geo
) -> None:
    """The normalised and resampling ops raise the int32 rule naming themselves, as conv3d does."""
    if runtime == "torch":
        x: Any = TorchSparse(torch.tensor(rows, dtype=torch.int32), torch.ones(len(rows), 1), t)
        module: Any = to
        weight: Any = torch.ones(1, 3, 3, 3, 1) if "conv" in op else None
    else:
        x = MxSparse(mx.array(rows, dtype=mx.int32), mx.ones((len(rows), 1)), stride=t)
        module, weight = mo, (mx.ones((1, 3, 3, 3, 1)) if "conv" in op else None)
    if "generative" in op:
        weight = weight[:, :2, :2, :2, :]
    fn = getattr(module, op)
    with pytest.raises(Int32CoordinateError) as info:
        fn(x, weight, **kwargs) if weight is not None else fn(x, **kwargs)
    err = info.value
    assert err.op == op and err.axis == 1, str(err)
    assert not INT32_MIN <= err.value <= INT32_MAX
    assert err.coords == rows[err.row]
    assert str(err).startswith(f"{op}: the output coordinate on axis x would be {err.value}")

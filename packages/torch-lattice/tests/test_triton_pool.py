"""Triton pools against the reference path: values, gradients, dtypes, geometries, ties.

``pool3d`` (the centred relation on the coarsened support) and
``full_pool3d`` (spconv's pools, the indexed relation) run with
``schedule("triton")`` (under ``TRITON_INTERPRET=1`` on CPU, at full size
on CUDA) and are compared with the plain-torch reference path, which is
tested against brute-force oracles in ``test_ops_pool*``: coordinates and
row order exactly, features and input gradients within the dtype's rounding
(sums are taken in f32 on both paths, in different orders).  The worked
example of docs/semantics.md is checked value for value.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
import torch
from lattice_conformance.metrics import Tolerance
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.conv import schedule

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROWS = 4000 if DEVICE == "cuda" else 200
EXTENT = 40 if DEVICE == "cuda" else 9


TOL: dict[torch.dtype, Tolerance] = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}
GRAD_TOL: dict[torch.dtype, Tolerance] = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 5e-2, "rtol": 5e-2},
}


def _input(
    seed: int, dtype: torch.dtype, channels: int = 5, ties: bool = False, rows: int = ROWS
) -> SparseTensor:
    g = torch.Generator().manual_seed(seed)
    coords = torch.randint(-EXTENT, EXTENT, (rows, 4), generator=g)
    coords[:, 0] = torch.randint(0, 2, (rows,), generator=g)
    coords = torch.unique(coords, dim=0).to(torch.int32)
    n = coords.shape[0]
    if ties:  # small integers, shifted down per channel: equal maxima above, at and below 0
        low = torch.randint(-2, 2, (n, channels), generator=g)
        feats = (low - torch.arange(channels)).float()
    else:
        feats = torch.randn(n, channels, generator=g)
    return SparseTensor(coords.to(DEVICE), feats.to(dtype).to(DEVICE))


MODES = ("max", "avg", "sum")


def _run(
    name: str, how: str, x: SparseTensor, grad: torch.Tensor, modes: tuple[str, ...], **kw: Any
) -> list[Any]:
    """Per mode (coords, feats, input gradient) of one pool on one schedule.

    The modes share one fresh support (as pools of one geometry share its map).
    """
    base = SparseTensor.trusted(x.coords, x.feats.detach(), x.stride)
    results = []
    for mode in modes:
        feats = x.feats.detach().clone().requires_grad_()
        with schedule(how):
            y = getattr(ops, name)(base.with_feats(feats), mode=mode, **kw)
        y.feats.backward(grad[: y.num_rows].to(y.dtype))
        results.append((y.coords, y.feats.detach(), feats.grad))
    return results


def _labelled(label: str) -> Callable[[str], str]:
    """An ``assert_close`` message: its own, after ``label``."""
    return lambda message: f"{label}: {message}"


def _compare(name: str, x: SparseTensor, modes: tuple[str, ...] = MODES, **kw: Any) -> None:
    g = torch.Generator().manual_seed(99)
    grad = torch.randn(8 * x.num_rows, x.num_channels, generator=g).to(DEVICE)
    refs = _run(name, "tap_major", x, grad, modes, **kw)
    gots = _run(name, "triton", x, grad, modes, **kw)
    for mode, ref, got in zip(modes, refs, gots, strict=True):
        assert torch.equal(got[0], ref[0]), f"{name} {mode} {kw}: rows or row order differ"
        assert got[1].dtype == x.dtype and got[2].dtype == x.dtype
        torch.testing.assert_close(got[1], ref[1], **TOL[x.dtype], msg=_labelled(mode))
        torch.testing.assert_close(
            got[2], ref[2], **GRAD_TOL[x.dtype], msg=_labelled(f"{mode} grad")
        )
    with torch.no_grad(), schedule("triton"):  # inference: the launch without an autograd node
        for mode, got in zip(modes, gots, strict=True):
            y = getattr(ops, name)(
                SparseTensor.trusted(x.coords, x.feats, x.stride), mode=mode, **kw
            )
            assert torch.equal(y.coords, got[0]) and torch.equal(y.feats, got[1]), mode


GEOMETRIES = [
    ("pool3d", {"kernel_size": 3, "stride": 2}),
    ("pool3d", {"kernel_size": 2, "stride": 2}),
    ("full_pool3d", {"kernel_size": 3, "stride": 2, "padding": 1}),
]


@pytest.mark.parametrize(("name", "kw"), GEOMETRIES, ids=[f"{n}-{kw}" for n, kw in GEOMETRIES])
def test_pools_match_the_reference(name: str, kw: dict[str, Any]) -> None:
    """Every mode, f32."""
    _compare(name, _input(1, torch.float32), **kw)


@pytest.mark.parametrize(
    ("dtype", "name", "kw"),
    [(torch.float16, *GEOMETRIES[0]), (torch.bfloat16, *GEOMETRIES[2])],
    ids=["f16-pool3d", "bf16-full_pool3d"],
)
def test_half_precision_pools(dtype: Any, name: str, kw: dict[str, Any]) -> None:
    """f16 / bf16 features: reduced in f32, rounded once; max exact."""
    _compare(name, _input(1, dtype), **kw)


@pytest.mark.parametrize(
    ("name", "kw"),
    [
        ("pool3d", {"kernel_size": 3}),  # stride 1: the input's rows, in order
        ("pool3d", {"kernel_size": 1, "stride": 2}),  # rows whose window holds no input: 0
        ("pool3d", {"kernel_size": (4, 3, 2), "stride": (2, 3, 1), "padding": (1, 0, 1)}),
        ("pool3d", {"kernel_size": 3, "stride": 2, "dilation": 2}),
        ("full_pool3d", {"kernel_size": 2, "stride": 2}),
        ("full_pool3d", {"kernel_size": (3, 2, 3), "stride": (1, 2, 2), "dilation": (2, 1, 1)}),
    ],
)
def test_odd_even_and_strided_geometries(name: str, kw: dict[str, Any]) -> None:
    """Every mode, f32."""
    _compare(name, _input(2, torch.float32, channels=3, rows=ROWS // 2), **kw)


@pytest.mark.parametrize(
    ("dtype", "name", "kw"),
    [(torch.float32, *g) for g in GEOMETRIES] + [(torch.float16, *GEOMETRIES[0])],
    ids=["f32-pool3d-k3", "f32-pool3d-k2", "f32-full_pool3d", "f16-pool3d-k3"],
)
def test_max_gradient_is_split_evenly_among_ties(dtype: Any, name: str, kw: dict[str, Any]) -> None:
    """Windows whose maximum several inputs reach: each gets the gradient over the tie count.

    The channels' maxima are mostly 1, 0, -1 and -2: a maximum of exactly 0
    (the value an unreached output row takes) is a tie among inputs like any other.
    """
    _compare(name, _input(3, dtype, channels=4, ties=True), modes=("max",), **kw)


def test_the_worked_example_of_the_semantics() -> None:
    """docs/semantics.md: x = 0, 1, 3 with features 1, 2, 4 and K = 3, s = 2 (rows at 2o)."""
    coords = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [0, 3, 0, 0]], dtype=torch.int32)
    x = SparseTensor(coords.to(DEVICE), torch.tensor([[1.0], [2.0], [4.0]], device=DEVICE))
    expected: dict[tuple[str, int], dict[str, list[float]]] = {
        ("pool3d", 0): {"max": [2, 4], "avg": [1.5, 3], "sum": [3, 6]},
        ("full_pool3d", 1): {"max": [2, 4, 4], "avg": [1.5, 3, 4], "sum": [3, 6, 4]},
    }
    for (name, p), by_mode in expected.items():
        for mode, values in by_mode.items():
            with schedule("triton"):
                y = getattr(ops, name)(
                    x, mode=mode, kernel_size=(3, 1, 1), stride=(2, 1, 1), padding=(p, 0, 0)
                )
            assert y.coords[:, 1].tolist() == list(range(0, 2 * len(values), 2)), (name, mode)
            assert y.feats.reshape(-1).tolist() == values, (name, mode)
    empty = SparseTensor(
        torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0], [0, 3, 0, 0]], dtype=torch.int32, device=DEVICE),
        torch.tensor([[5.0], [-6.0], [7.0]], device=DEVICE),
    )
    for mode in ("max", "avg", "sum"):
        with schedule("triton"):
            y = ops.pool3d(empty, mode=mode, kernel_size=1, stride=(2, 1, 1))
        assert y.feats.reshape(-1).tolist() == [5.0, 0.0], mode  # coarse row 1 reads x = 2 only


def test_a_pool_reuses_the_conv_map_of_its_geometry() -> None:
    """pool3d after conv3d's map of one geometry (full_pool3d after full_conv3d's) builds none."""
    from torch_lattice.triton import maps

    x = _input(4, torch.float32, channels=2)
    three, one = (3, 3, 3), (1, 1, 1)
    with schedule("triton"):
        for kind, pool, pad in (("centred", ops.pool3d, 0), ("indexed", ops.full_pool3d, 1)):
            out, _ = maps.build(kind, x.support, three, (2, 2, 2), (pad,) * 3, one)
            cached = dict(x.support.maps)
            z = pool(x, mode="max", kernel_size=3, stride=2, padding=pad)
            assert z.support is out and x.support.maps.keys() == cached.keys(), kind


@pytest.mark.parametrize(
    ("kw", "with_target"),
    [
        ({"kernel_size": 2, "stride": 2}, False),
        ({"kernel_size": 3, "stride": 2, "padding": 1}, True),
    ],
)
def test_pool_transpose_is_the_avg_pool_over_the_transposed_map(
    kw: dict[str, Any], with_target: bool
) -> None:
    """``pool_transpose3d`` (reference: ops/upsample.py) is ``sparse_pool("transpose", avg)``."""
    from lattice_contract.dialect import PoolMode
    from torch_lattice.triton.pool import sparse_pool

    fine = _input(6, torch.float32, channels=3)
    with schedule("tap_major"):
        coarse = ops.pool3d(fine, mode="avg", kernel_size=2, stride=2)
        target = fine if with_target else None
        ref = ops.pool_transpose3d(coarse, coordinates=target, **kw)
    grad = torch.randn(ref.num_rows, 3, generator=torch.Generator().manual_seed(7)).to(DEVICE)
    leaf = coarse.feats.detach().clone().requires_grad_()
    with schedule("tap_major"):
        ops.pool_transpose3d(coarse.with_feats(leaf), coordinates=target, **kw).feats.backward(grad)
    expected_grad = leaf.grad
    leaf.grad = None
    k = (kw["kernel_size"],) * 3
    geometry = (k, (2, 2, 2), (kw.get("padding", 0),) * 3, (1, 1, 1))
    got = sparse_pool(
        "transpose", coarse.with_feats(leaf), PoolMode.avg, *geometry,
        target=None if target is None else target.support,
    )  # fmt: skip
    got.feats.backward(grad)
    assert torch.equal(got.coords, ref.coords)
    torch.testing.assert_close(got.feats, ref.feats, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(leaf.grad, expected_grad, atol=1e-5, rtol=1e-5)


def test_f64_is_refused_on_the_forced_triton_path() -> None:
    x = _input(5, torch.float64, channels=2)
    with schedule("triton"), pytest.raises(TypeError, match="f16, bf16 and f32"):
        ops.pool3d(x, mode="max", kernel_size=2, stride=2)


@pytest.mark.parametrize("mode", ["max", "avg", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_global_pool_matches_the_reference(mode: str, dtype: Any) -> None:
    """Per batch item, with an empty item (batch 2 of 4) and ties (integer features)."""
    x = _input(8, dtype, channels=3, ties=mode == "max")
    coords = x.coords.clone()
    coords[:, 0] = torch.where(coords[:, 0] == 1, 3, 0)  # items 0 and 3; 1 and 2 empty
    x = SparseTensor(coords, x.feats)
    grad = torch.randn(4, 3, generator=torch.Generator().manual_seed(9)).to(DEVICE)
    results = []
    for how in ("tap_major", "triton"):
        feats = x.feats.detach().clone().requires_grad_()
        with schedule(how):
            out = ops.global_pool(SparseTensor.trusted(coords, feats), mode=mode, batch_size=4)
        out.backward(grad.to(out.dtype))
        results.append((out.detach(), feats.grad))
    (ref, ref_grad), (got, got_grad) = results
    assert got.shape == (4, 3) and got.dtype == dtype
    tol = TOL[dtype].copy()
    if mode == "sum" and dtype == torch.float32:  # thousands of rows summed in another order
        tol["atol"] = 1e-7 * float(x.feats.abs().sum())
    torch.testing.assert_close(got, ref, **tol)
    torch.testing.assert_close(got_grad, ref_grad, **GRAD_TOL[dtype])
    empty = SparseTensor(coords[:0], x.feats[:0])
    with schedule("triton"):
        torch.testing.assert_close(ops.global_pool(x, mode=mode), got)  # -1: largest index + 1
        assert ops.global_pool(empty, mode=mode).shape == (0, 3)


def test_global_max_of_minus_infinity_is_not_an_empty_item() -> None:
    """A batch item whose inputs are all -inf has maximum -inf; only an item without rows gives 0.

    Item 0 has a channel of -inf inputs, item 1 no rows, item 2 only -inf inputs.
    """
    inf = float("inf")
    coords = torch.tensor(
        [[0, 0, 0, 0], [0, 1, 0, 0], [2, 0, 0, 0], [2, 0, 1, 0]], dtype=torch.int32, device=DEVICE
    )
    feats = torch.tensor([[2.0, -inf], [1.0, -inf], [-inf, -inf], [-inf, -inf]], device=DEVICE)
    x = SparseTensor(coords, feats)
    expected = torch.tensor([[2.0, -inf], [0.0, 0.0], [-inf, -inf]], device=DEVICE)
    for how in ("tap_major", "triton"):
        with schedule(how):
            got = ops.global_pool(x, mode="max", batch_size=3)
        torch.testing.assert_close(got, expected, msg=_labelled(how))

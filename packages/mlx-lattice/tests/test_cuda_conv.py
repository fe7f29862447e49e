"""mlx_lattice's CUDA kernels (device maps, fused convs, pools, gradients) on MLX's CUDA backend.

Skipped where MLX has no CUDA backend (CI has no GPU); run on a GPU machine
with a CUDA build of MLX.  Oracles: a float64 NumPy evaluation of the
definition (neighbours found by a sorted-key search written here), and the
generic MLX path (``mlx_lattice.cuda.set_enabled(False)``), which is itself
tested against dense and spconv references on the CPU.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import mlx.core as mx
import numpy as np
import pytest
from lattice_conformance.scenes import batched, make_scene
from lattice_contract.dialect import Int32CoordinateError
from mlx_lattice import SparseTensor, cuda, ops
from mlx_lattice.ops.quant import QuantizedWeight, quantize_weight

pytestmark = pytest.mark.skipif(
    not cuda.available(), reason="MLX has no CUDA backend here (run on a CUDA GPU machine)"
)


@pytest.fixture(autouse=True)
def _on_gpu() -> Iterator[None]:
    previous = mx.default_device()
    mx.set_default_device(mx.gpu)
    yield
    mx.set_default_device(previous)
    cuda.set_enabled(True)


def _scene(n: int, seed: int) -> np.ndarray:
    """Two surface scenes (batch 0 and 1) of about n/2 voxels each, some coordinates negative."""
    a, _ = make_scene(n // 2, grid=256, seed=seed)
    b, _ = make_scene(n // 2, grid=256, seed=seed + 1)
    return np.concatenate([batched(a, 0), batched(b - 100, 1)]).astype(np.int32)


def _input(coords: np.ndarray, c: int, dtype: mx.Dtype, seed: int, stride: int = 1) -> SparseTensor:
    rng = np.random.default_rng(seed)
    scaled = coords.copy()
    scaled[:, 1:] *= stride
    feats = rng.standard_normal((len(coords), c)).astype(np.float32)
    return SparseTensor(mx.array(scaled), mx.array(feats).astype(dtype), stride=stride)


def _weight(c_out: int, k: int, c_in: int, dtype: mx.Dtype, seed: int) -> mx.array:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((c_out, k, k, k, c_in)).astype(np.float32) / np.sqrt(k**3 * c_in)
    return mx.array(w).astype(dtype)


def _keys(rows: np.ndarray) -> np.ndarray:
    r = rows.astype(np.int64) + 4096
    return ((r[:, 0] * 8192 + r[:, 1]) * 8192 + r[:, 2]) * 8192 + r[:, 3]


def test_f32_subm_matches_float64_reference() -> None:
    """An f32 subm 3x3x3 on the GPU is within 1e-6 of a float64 NumPy evaluation."""
    coords = _scene(20000, 3)
    x = _input(coords, 48, mx.float32, 1)
    w = _weight(40, 3, 48, mx.float32, 2)
    b = mx.array(np.random.default_rng(4).standard_normal(40).astype(np.float32))
    y = ops.subm_conv3d(x, w, b, kernel_size=3)
    got = np.asarray(y.feats).astype(np.float64)
    keys = _keys(coords)
    order = np.argsort(keys)
    sk = keys[order]
    xf = np.asarray(x.feats).astype(np.float64)
    wf = np.asarray(w).astype(np.float64).reshape(40, 27, 48)
    ref = np.tile(np.asarray(b).astype(np.float64), (len(coords), 1))
    taps = [(a, c, d) for a in (-1, 0, 1) for c in (-1, 0, 1) for d in (-1, 0, 1)]
    for k, off in enumerate(taps):
        q = _keys(coords + np.array((0, *off), dtype=np.int32))
        pos = np.minimum(np.searchsorted(sk, q), len(sk) - 1)
        hit = sk[pos] == q
        rows = order[pos]
        ref[hit] += xf[rows[hit]] @ wf[:, k, :].T
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err <= 1e-6, err
    assert np.max(np.abs(got - ref)) <= 1e-5 * np.max(np.abs(ref))


def _generic(fn: Callable[[], SparseTensor]) -> SparseTensor:
    previous = cuda.set_enabled(False)
    try:
        y = fn()
        mx.eval(y.feats, y.coords)
        return y
    finally:
        cuda.set_enabled(previous)


def _ours_and_generic(
    fn: Callable[[], SparseTensor], *supports: SparseTensor
) -> tuple[SparseTensor, SparseTensor]:
    """``fn`` on the CUDA route and on the generic path, each building its maps afresh."""
    for t in supports:
        t.cache.relations.clear()
    ref = _generic(fn)
    for t in supports:
        t.cache.relations.clear()
    ours = fn()
    mx.eval(ours.feats, ours.coords)
    return ours, ref


def _tolerance(dtype: mx.Dtype) -> float:
    return {mx.float32: 1e-5, mx.float16: 2e-3, mx.bfloat16: 1.6e-2}[dtype]


def _canonical(t: SparseTensor) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by (batch, x, y, z), with their features as float64."""
    coords = np.asarray(t.coords)
    order = np.lexsort(coords.T[::-1])
    feats = np.asarray(t.feats.astype(mx.float32)).astype(np.float64)
    return coords[order], feats[order]


def _check_same(ours: SparseTensor, ref: SparseTensor, dtype: mx.Dtype, ordered: bool) -> None:
    """Same stride, rows and features (within the dtype's tolerance).

    ``ordered``: the rows must also come in the same order (submanifold,
    stride-1 and target forms, whose row order the contract fixes); generated
    supports are compared in canonical order.
    """
    assert ours.stride == ref.stride
    if ordered:
        np.testing.assert_array_equal(np.asarray(ours.coords), np.asarray(ref.coords))
    (oc, a), (rc, r) = _canonical(ours), _canonical(ref)
    np.testing.assert_array_equal(oc, rc)
    assert a.shape == r.shape
    assert np.all(np.isfinite(a))
    err = np.linalg.norm(a - r) / max(float(np.linalg.norm(r)), 1e-30)
    assert err <= _tolerance(dtype), err


_GENERATED = (
    "conv k2 s2",
    "conv k3 s2 p1",
    "full k3 s2",
    "full k3 s1 p1",
    "transpose k2 s2",
    "transpose k3 s2 p1",
    "generative k3 s2",
)


def _cases(
    x: SparseTensor, coarse: SparseTensor, dtype: mx.Dtype
) -> dict[str, Callable[[], SparseTensor]]:
    c = x.num_channels
    w3 = _weight(24, 3, c, dtype, 5)
    w2 = _weight(24, 2, c, dtype, 6)
    w4 = _weight(24, 4, c, dtype, 9)
    wt = _weight(24, 2, coarse.num_channels, dtype, 7)
    wt3 = _weight(24, 3, coarse.num_channels, dtype, 8)
    wi = _weight(24, 2, 24, dtype, 10)
    b = mx.array(np.linspace(-1, 1, 24).astype(np.float32))
    return {
        "subm k3": lambda: ops.subm_conv3d(x, w3, b, kernel_size=3),
        "subm k4 d2": lambda: ops.subm_conv3d(x, w4, kernel_size=4, dilation=2),
        "conv k2 s2": lambda: ops.conv3d(x, w2, b, kernel_size=2, stride=2),
        "conv k3 s2 p1": lambda: ops.conv3d(x, w3, kernel_size=3, stride=2, padding=1),
        "conv k3 s1 p1": lambda: ops.conv3d(x, w3, kernel_size=3, padding=1),
        "target conv k3 s2": lambda: ops.conv3d(
            x, w3, b, kernel_size=3, stride=2, coordinates=coarse
        ),
        "full k3 s2": lambda: ops.full_conv3d(x, w3, b, kernel_size=3, stride=2),
        "full k3 s1 p1": lambda: ops.full_conv3d(x, w3, kernel_size=3, padding=1),
        "transpose k2 s2": lambda: ops.conv_transpose3d(coarse, wt, b, kernel_size=2, stride=2),
        "transpose k3 s2 p1": lambda: ops.conv_transpose3d(
            coarse, wt3, kernel_size=3, stride=2, padding=1
        ),
        "target transpose k2 s2": lambda: ops.conv_transpose3d(
            coarse, wt, b, kernel_size=2, stride=2, coordinates=x
        ),
        "inverse of conv k2 s2 (paired map)": lambda: ops.conv_transpose3d(
            ops.conv3d(x, w2, kernel_size=2, stride=2),
            wi,
            b,
            kernel_size=2,
            stride=2,
            coordinates=x,
        ),
        "generative k3 s2": lambda: ops.generative_conv_transpose3d(
            coarse, wt3, b, kernel_size=3, stride=2
        ),
    }


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16], ids=str)
def test_every_kind_matches_generic_path(dtype: mx.Dtype) -> None:
    coords = _scene(30000, 11)
    x = _input(coords, 32, dtype, 12)
    coarse_coords = np.unique(coords // np.array((1, 2, 2, 2), dtype=np.int32), axis=0)
    coarse = _input(coarse_coords, 16, dtype, 13, stride=2)
    for name, fn in _cases(x, coarse, dtype).items():
        ours, ref = _ours_and_generic(fn, x, coarse)
        try:
            _check_same(ours, ref, dtype, ordered=name not in _GENERATED)
        except AssertionError as err:
            raise AssertionError(f"{name} ({dtype}): {err}") from None


@pytest.mark.parametrize("rows", [0, 1, 2])
def test_every_kind_on_empty_and_tiny_inputs(rows: int) -> None:
    """No rows, one row, and two rows of different batch items at negative coordinates."""
    coords = np.array([[0, -3, 5, 7], [1, -1, -8, 0]], dtype=np.int32)[:rows]
    x = _input(coords, 8, mx.float32, 50)
    coarse_coords = np.unique(coords // np.array((1, 2, 2, 2), dtype=np.int32), axis=0)
    coarse = _input(coarse_coords.reshape(-1, 4), 8, mx.float32, 51, stride=2)
    for name, fn in _cases(x, coarse, mx.float32).items():
        if rows == 0:  # nothing in, nothing out (the generic path's empty outputs are not
            ours = fn()  # read back here: on MLX 0.32.4's CUDA backend that crashed the process)
            mx.eval(ours.feats, ours.coords)
            assert (ours.num_rows, ours.num_channels) == (0, 24), name
            continue
        ours, ref = _ours_and_generic(fn, x, coarse)
        assert ours.num_rows == ref.num_rows, name
        try:
            _check_same(ours, ref, mx.float32, ordered=name not in _GENERATED)
        except AssertionError as err:
            raise AssertionError(f"{name} ({rows} rows): {err}") from None


def test_encoder_levels_come_from_one_read_and_match_generic_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five k2s2 convs in a chain: the first generates four levels with one host read.

    The scene has two batch items with negative coordinates, a lone voxel far
    out on odd and negative coordinates (one row at every level) and a voxel
    whose coarsening floors towards minus infinity; every level's rows and
    features equal the generic path's, and every prefetched level's rows come
    in the order that coarsening the level above would give them.
    """
    from mlx_lattice.cuda import kernels, maps

    lone = np.array([[2, -(2**20) + 1, 3, 2**18 + 1], [1, -1, -1, -1]], dtype=np.int32)
    coords = np.concatenate([_scene(30000, 21), lone])
    x = _input(coords, 16, mx.float32, 22)
    weights = [_weight(16, 2, 16, mx.float32, 23 + level) for level in range(5)]

    def chain() -> list[SparseTensor]:
        levels, y = [], x
        for w in weights:
            y = ops.conv3d(y, w, kernel_size=2, stride=2)
            levels.append(y)
        return levels

    previous = cuda.set_enabled(False)
    try:
        refs = chain()
        mx.eval(*(y.feats for y in refs))
    finally:
        cuda.set_enabled(previous)
    x.cache.relations.clear()
    reads = []
    generate_all = kernels.generate_all

    def counted(requests: list[kernels.Generation]) -> list[kernels.Generated | None]:
        reads.append(len(requests))
        return generate_all(requests)

    monkeypatch.setattr(kernels, "generate_all", counted)
    ours = chain()
    mx.eval(*(y.feats for y in ours))
    assert reads == [maps.PYRAMID_LEVELS, maps.PYRAMID_LEVELS]  # levels 1-4, then 5-8
    for level, (got, ref) in enumerate(zip(ours, refs, strict=True), start=1):
        try:
            _check_same(got, ref, mx.float32, ordered=False)
        except AssertionError as err:
            raise AssertionError(f"level {level}: {err}") from None
    monkeypatch.undo()
    for above, below in itertools.pairwise(ours[:4]):  # levels 2-4 were prefetched
        logical = above.coords // mx.array((1, *above.stride), dtype=mx.int32)
        found = kernels.generate(
            logical, ((0, 0, 0),), "coarsen", (2, 2, 2), (0, 0, 0), below.stride, emit=False
        )
        assert found is not None
        np.testing.assert_array_equal(np.asarray(found[1]), np.asarray(below.coords))


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16], ids=str)
def test_sorted_tiles_change_no_value(dtype: mx.Dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows sorted by tap mask give every kind the same values as rows in order, bit for bit.

    A row's products are summed over the same taps in the same order either
    way; a tile that walks a tap none of its rows reaches adds exact zeros.
    The sort must really happen: at least one map of the cases is sorted.
    """
    from mlx_lattice.cuda import kernels

    coords = _scene(12000, 61)
    x = _input(coords, 32, dtype, 62)
    coarse_coords = np.unique(coords // np.array((1, 2, 2, 2), dtype=np.int32), axis=0)
    coarse = _input(coarse_coords, 16, dtype, 63, stride=2)
    sorted_maps = []
    tap_order = kernels.tap_order

    def counted(nbr: mx.array) -> mx.array | None:
        order = tap_order(nbr)
        sorted_maps.append(order is not None)
        return order

    monkeypatch.setattr(kernels, "tap_order", counted)
    for name, fn in _cases(x, coarse, dtype).items():
        results = []
        for on in (False, True):
            monkeypatch.setattr(kernels, "SORT", on)
            monkeypatch.setattr(kernels, "SORT_MIN_ROWS", 0)
            x.cache.relations.clear()
            coarse.cache.relations.clear()
            y = fn()
            mx.eval(y.feats, y.coords)
            results.append(_canonical(y))
        (c0, f0), (c1, f1) = results
        np.testing.assert_array_equal(c0, c1, err_msg=name)
        np.testing.assert_array_equal(f0, f1, err_msg=name)
    assert any(sorted_maps), "no map was sorted"


Op = Callable[[SparseTensor, mx.array, mx.array], SparseTensor]


def _probe(y: SparseTensor) -> mx.array:
    """A cotangent that depends on each row's coordinates, not on where the row sits."""
    phase = y.coords.astype(mx.float32) @ mx.array([0.3, 0.7, 1.1, 1.9])
    channel = mx.cos(mx.arange(y.num_channels, dtype=mx.float32))
    return mx.sin(phase)[:, None] * channel[None, :]


def test_gradients_match_generic_path() -> None:
    coords = _scene(8000, 21)
    x = _input(coords, 16, mx.float32, 22)
    coarse_coords = np.unique(coords // np.array((1, 2, 2, 2), dtype=np.int32), axis=0)
    coarse = _input(coarse_coords, 16, mx.float32, 23, stride=2)
    wd = _weight(16, 2, 16, mx.float32, 26)
    cases = {
        "subm": (x, 3, lambda t, w, b: ops.subm_conv3d(t, w, b, kernel_size=3)),
        # the weight enters twice: the numerator and the normaliser
        "normalized subm": (
            x,
            3,
            lambda t, w, b: ops.normalized_subm_conv3d(t, w, b, kernel_size=3),
        ),
        "conv k2s2": (x, 2, lambda t, w, b: ops.conv3d(t, w, b, kernel_size=2, stride=2)),
        "inverse of conv k2s2": (
            x,
            2,
            lambda t, w, b: ops.conv_transpose3d(
                ops.conv3d(t, wd, kernel_size=2, stride=2),
                w,
                b,
                kernel_size=2,
                stride=2,
                coordinates=t,
            ),
        ),
        "transpose k2s2": (
            coarse,
            2,
            lambda t, w, b: ops.conv_transpose3d(t, w, b, kernel_size=2, stride=2),
        ),
    }
    for name, (inp, k, op) in cases.items():
        w = _weight(12, k, 16, mx.float32, 25)
        b = mx.zeros((12,))

        def loss(
            f: mx.array, w: mx.array, b: mx.array, inp: SparseTensor = inp, op: Op = op
        ) -> mx.array:
            y = op(inp.with_feats(f), w, b)
            return mx.sum(y.feats * _probe(y))

        grad = mx.grad(loss, argnums=(0, 1, 2))
        ours = grad(inp.feats, w, b)
        mx.eval(ours)
        previous = cuda.set_enabled(False)
        try:
            inp.cache.relations.clear()
            ref = grad(inp.feats, w, b)
            mx.eval(ref)
        finally:
            cuda.set_enabled(previous)
        inp.cache.relations.clear()
        for part, a, r in zip(("d_input", "d_weight", "d_bias"), ours, ref, strict=True):
            a64, r64 = np.asarray(a).astype(np.float64), np.asarray(r).astype(np.float64)
            err = np.linalg.norm(a64 - r64) / max(float(np.linalg.norm(r64)), 1e-30)
            assert err <= 1e-5, f"{name} {part}: {err}"


def _normalized_cases(
    x: SparseTensor, coarse: SparseTensor, dtype: mx.Dtype
) -> dict[str, tuple[Callable[[], SparseTensor], bool]]:
    """Each normalised op on the CUDA route: name -> (call, whether its rows keep their order)."""
    w3 = _weight(20, 3, x.num_channels, dtype, 84)
    wt = _weight(12, 2, coarse.num_channels, dtype, 85)
    wt3 = _weight(12, 3, coarse.num_channels, dtype, 86)
    b = mx.array(np.linspace(-1, 1, 20).astype(np.float32))
    return {
        "normalized_subm_conv3d k3": (
            lambda: ops.normalized_subm_conv3d(x, w3, b, kernel_size=3),
            True,
        ),
        "normalized_generative_conv_transpose3d k2 s2": (
            lambda: ops.normalized_generative_conv_transpose3d(coarse, wt, kernel_size=2, stride=2),
            False,
        ),
        "normalized_conv_transpose3d k3 s2 p1 onto x": (
            lambda: ops.normalized_conv_transpose3d(
                coarse, wt3, kernel_size=3, stride=2, padding=1, eps=1e-3, coordinates=x
            ),
            True,
        ),
    }


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16])
@pytest.mark.parametrize("rows", [1, 2, 20000])
def test_normalized_convs_match_generic_path(dtype: mx.Dtype, rows: int) -> None:
    """The weight-normalised convs on the device map: the generic path's values and rows.

    Border rows (fewer taps, a smaller normaliser) are most of a sparse scene
    and every row of the one- and two-row inputs.
    """
    if rows <= 2:
        coords = np.array([[0, -3, 5, 7], [1, -1, -8, 0]], dtype=np.int32)[:rows]
    else:
        coords = _scene(rows, 81)
    x = _input(coords, 24, dtype, 82)
    coarse_coords = np.unique(coords // np.array((1, 2, 2, 2), dtype=np.int32), axis=0)
    coarse = _input(coarse_coords, 16, dtype, 83, stride=2)
    for name, (fn, ordered) in _normalized_cases(x, coarse, dtype).items():
        ours, ref = _ours_and_generic(fn, x, coarse)
        try:
            _check_same(ours, ref, dtype, ordered=ordered)
        except AssertionError as err:
            raise AssertionError(f"{name} ({dtype}, {rows} rows): {err}") from None


_POOLS: dict[str, tuple[Callable[..., SparseTensor], dict[str, int]]] = {
    "pool3d k2 s2": (ops.pool3d, {"kernel_size": 2, "stride": 2}),
    "pool3d k3 s2 p1": (ops.pool3d, {"kernel_size": 3, "stride": 2, "padding": 1}),
    "pool3d k3 s1 p1": (ops.pool3d, {"kernel_size": 3, "padding": 1}),
    "full_pool3d k3 s2": (ops.full_pool3d, {"kernel_size": 3, "stride": 2}),
}
"""Pools run on the CUDA kernels; only the stride-1 one keeps the input's rows in order."""


def _pool(name: str, x: SparseTensor, mode: str) -> SparseTensor:
    op, geometry = _POOLS[name]
    return op(x, mode=mode, **geometry)


@pytest.mark.parametrize("rows", [0, 1, 2, 30000])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16], ids=str)
def test_pools_match_generic_path(dtype: mx.Dtype, rows: int) -> None:
    """Every mode and pool kind, on a scene and on no, one and two rows (two batch items)."""
    if rows <= 2:
        coords = np.array([[0, -3, 5, 7], [1, -1, -8, 0]], dtype=np.int32)[:rows]
    else:
        coords = _scene(rows, 61)
    x = _input(coords.reshape(-1, 4), 24, dtype, 62)
    for mode in ("max", "avg", "sum"):
        for name in _POOLS:

            def fn(name: str = name, mode: str = mode) -> SparseTensor:
                return _pool(name, x, mode)

            x.cache.relations.clear()
            if rows == 0:  # the generic path's empty outputs are not read back (see above)
                ours = fn()
                mx.eval(ours.feats, ours.coords)
                assert (ours.num_rows, ours.num_channels) == (0, 24), name
                continue
            ref = _generic(fn)
            x.cache.relations.clear()
            ours = fn()
            mx.eval(ours.feats, ours.coords)
            try:
                _check_same(ours, ref, dtype, ordered=name == "pool3d k3 s1 p1")
            except AssertionError as err:
                raise AssertionError(f"{name} {mode} ({dtype}, {rows} rows): {err}") from None


def test_pool_gradients_match_generic_path_and_share_the_conv_map() -> None:
    coords = _scene(8000, 71)
    x = _input(coords, 16, mx.float32, 72)
    for mode in ("max", "avg", "sum"):
        for name in _POOLS:

            def loss(f: mx.array, name: str = name, mode: str = mode) -> mx.array:
                y = _pool(name, x.with_feats(f), mode)
                return mx.sum(y.feats * _probe(y))

            x.cache.relations.clear()
            ours = mx.grad(loss)(x.feats)
            mx.eval(ours)
            previous = cuda.set_enabled(False)
            try:
                x.cache.relations.clear()
                ref = mx.grad(loss)(x.feats)
                mx.eval(ref)
            finally:
                cuda.set_enabled(previous)
            a64, r64 = np.asarray(ours).astype(np.float64), np.asarray(ref).astype(np.float64)
            err = np.linalg.norm(a64 - r64) / max(float(np.linalg.norm(r64)), 1e-30)
            assert err <= 1e-5, f"{name} {mode}: {err}"
    # a pool beside the conv of the same geometry reads the conv's map: nothing new is built
    x.cache.relations.clear()
    conv = ops.conv3d(x, _weight(8, 2, 16, mx.float32, 73), kernel_size=2, stride=2)
    mx.eval(conv.feats)
    entries = len(x.cache.relations)
    pooled = ops.pool3d(x, kernel_size=2, stride=2, mode="max")
    mx.eval(pooled.feats)
    assert len(x.cache.relations) == entries
    np.testing.assert_array_equal(np.asarray(pooled.coords), np.asarray(conv.coords))


def test_packed_weights_match_generic_path_on_cpu() -> None:
    """int8 and int4 packed conv weights: dequantized on the GPU, as the CPU path multiplies."""
    coords = _scene(6000, 51)
    x = _input(coords, 32, mx.float16, 52)
    for bits in (8, 4):
        w3 = quantize_weight(_weight(32, 3, 32, mx.float32, 53), bits=bits, group_size=32)
        w2 = quantize_weight(_weight(32, 2, 32, mx.float32, 54), bits=bits, group_size=32)

        def subm(w: QuantizedWeight = w3) -> SparseTensor:
            return ops.subm_conv3d(x, w, kernel_size=3)

        def down(w: QuantizedWeight = w2) -> SparseTensor:
            return ops.conv3d(x, w, kernel_size=2, stride=2)

        for name, fn, ordered in (("subm", subm, True), ("conv k2 s2", down, False)):
            x.cache.relations.clear()
            ours = fn()
            mx.eval(ours.feats, ours.coords)
            mx.set_default_device(mx.cpu)
            try:
                x.cache.relations.clear()
                ref = fn()
                mx.eval(ref.feats, ref.coords)
            finally:
                mx.set_default_device(mx.gpu)
            try:
                _check_same(ours, ref, mx.float16, ordered)
            except AssertionError as err:
                raise AssertionError(f"int{bits} {name}: {err}") from None


@pytest.mark.parametrize("mirror", [False, True], ids=["searched", "mirrored"])
def test_device_map_matches_numpy_neighbours(mirror: bool) -> None:
    """The hash-built neighbour table equals a sorted-key search (every row, every tap).

    ``mirrored``: the subm map of a support on itself, which searches half the
    taps and writes the other half as mirror pairs.
    """
    from mlx_lattice.cuda import maps

    coords = _scene(15000, 31)
    x = _input(coords, 4, mx.float32, 32)
    rel = maps.relation("subm", (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))
    if mirror:
        dmap = maps.subm_map(("s",), x.cache, x.coords, x.stride, rel)
    else:
        dmap = maps.target_map(("t",), x.cache, x.coords, x.stride, x.coords, x.stride, rel)
    nbr = np.asarray(dmap.nbr)
    keys = _keys(coords)
    order = np.argsort(keys)
    sk = keys[order]
    for k, off in enumerate(rel.offsets):
        q = _keys(coords + np.array((0, *off), dtype=np.int32))
        pos = np.minimum(np.searchsorted(sk, q), len(sk) - 1)
        want = np.where(sk[pos] == q, order[pos], -1)
        np.testing.assert_array_equal(nbr[k], want)
    inv = np.asarray(dmap.inverse())
    for k in range(len(rel.offsets)):
        hit = nbr[k] >= 0
        np.testing.assert_array_equal(inv[k][nbr[k][hit]], np.flatnonzero(hit))


def test_compile_and_int32_limit() -> None:
    coords = _scene(4000, 41)
    x = _input(coords, 8, mx.float32, 42)
    w = _weight(8, 3, 8, mx.float32, 43)
    ops.subm_conv3d(x, w, kernel_size=3)  # builds and caches the map

    def layer(f: mx.array) -> mx.array:
        return ops.subm_conv3d(x.with_feats(f), w, kernel_size=3).feats

    eager = layer(x.feats)
    compiled = mx.compile(layer)(x.feats)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(compiled))
    edge = np.array([[0, 2**31 - 2, 0, 0]], dtype=np.int32)
    far = SparseTensor(mx.array(edge), mx.ones((1, 8)), stride=2)
    with pytest.raises(Int32CoordinateError, match="conv_transpose3d"):
        ops.conv_transpose3d(far, _weight(8, 3, 8, mx.float32, 44), kernel_size=3, stride=1)

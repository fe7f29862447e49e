"""Every sparse conv against PyTorch's dense conv on small random supports, and the identities
docs/semantics.md pins: all-ones pair counts, subm as a stride-1 conv, adjointness, map reuse.

``full_conv3d`` (spconv's conv) is the dense conv at every output it reaches;
``conv3d``/``target_conv3d`` are the dense conv with the centred padding at the
coarsened support (test_conv_centred.py holds their upstream examples)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lattice_conformance.metrics import Tolerance
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import (
    available_devices,
    centred_padding,
    coarsened_rows,
    dense_centred_conv3d,
    dense_conv3d,
    dense_conv_transpose3d,
    random_sparse,
    sorted_rows,
)

DEVICES = available_devices()
SCHEDULES = ["tap_major", "output_major"]
small = st.integers(min_value=1, max_value=4)
kernels = st.tuples(small, small, small)
strides = st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2))
dilations = st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2))
paddings = st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))
dtypes = st.sampled_from([torch.float32, torch.float16])
GEOMETRY = {
    "seed": st.integers(0, 2**31 - 1),
    "k": kernels,
    "s": strides,
    "p": paddings,
    "d": dilations,
}


def _tol(dtype: torch.dtype) -> Tolerance:
    return {"atol": 1e-4, "rtol": 1e-4} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 1e-2}


def _check(out: SparseTensor, ref_coords: torch.Tensor, ref_feats: torch.Tensor) -> None:
    coords, feats = sorted_rows(out.coords.cpu(), out.feats.cpu())
    assert torch.equal(coords, ref_coords.cpu())
    tol = _tol(out.dtype)
    torch.testing.assert_close(feats.double(), ref_feats.cpu(), **tol)


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(
    **GEOMETRY,
    batch=st.integers(1, 3),
    dtype=dtypes,
    in_stride=st.sampled_from([(1, 1, 1), (2, 1, 2)]),
)
def test_full_conv3d_matches_dense(
    sched, device, seed, k, s, p, d, batch, dtype, in_stride
) -> None:
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(
            g, 12, 3, batch=batch, extent=5, stride=in_stride, dtype=dtype, device=device
        )
        w = torch.randn(2, *k, 3, generator=g).to(dtype).to(device)
        out = ops.full_conv3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
        assert out.stride == tuple(a * b for a, b in zip(in_stride, s, strict=True))
        ref = dense_conv3d(x, w, k, s, p, d)
        _check(out, ref.coords, ref.feats)
        assert out.dtype == dtype


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(
    **GEOMETRY,
    batch=st.integers(1, 3),
    dtype=dtypes,
    in_stride=st.sampled_from([(1, 1, 1), (2, 1, 2)]),
)
def test_conv3d_is_dense_centred_conv_on_the_coarsened_support(
    sched, device, seed, k, s, p, d, batch, dtype, in_stride
) -> None:
    """conv3d == dense conv3d with padding K//2*d + p (odd K; p for even K) at every floor(c/s)."""
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(
            g, 12, 3, batch=batch, extent=5, stride=in_stride, dtype=dtype, device=device
        )
        w = torch.randn(2, *k, 3, generator=g).to(dtype).to(device)
        bias = torch.randn(2, generator=g).to(dtype).to(device)
        out = ops.conv3d(x, w, bias, kernel_size=k, stride=s, padding=p, dilation=d)
        assert out.stride == tuple(a * b for a, b in zip(in_stride, s, strict=True))
        ref = dense_centred_conv3d(x, w, k, s, p, d)
        _check(out, ref.coords, ref.feats + bias.double().cpu())
        if s == (1, 1, 1):  # stride 1 keeps exactly the input rows, in input order
            assert torch.equal(out.coords, x.coords)


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(**GEOMETRY, batch=st.integers(1, 3), dtype=dtypes)
def test_conv_transpose3d_matches_dense(sched, device, seed, k, s, p, d, batch, dtype) -> None:
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(
            g, 12, 3, batch=batch, extent=5, stride=(2, 2, 2), dtype=dtype, device=device
        )
        w = torch.randn(2, *k, 3, generator=g).to(dtype).to(device)
        out = ops.conv_transpose3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
        ref = dense_conv_transpose3d(x, w, k, s, p, d)
        _check(out, ref.coords, ref.feats)


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=kernels, s=strides, dtype=dtypes)
def test_generative_transpose_matches_dense(sched, device, seed, k, s, dtype) -> None:
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(g, 10, 2, batch=2, extent=4, stride=(2, 2, 2), dtype=dtype, device=device)
        w = torch.randn(3, *k, 2, generator=g).to(dtype).to(device)
        b = torch.randn(3, generator=g).to(dtype).to(device)
        out = ops.generative_conv_transpose3d(x, w, b, kernel_size=k, stride=s)
        ref = dense_conv_transpose3d(x, w, k, s, (0, 0, 0), (1, 1, 1))
        _check(out, ref.coords, ref.feats + b.double().cpu())


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1), k=kernels, d=dilations, batch=st.integers(1, 3), dtype=dtypes
)
def test_subm_equals_stride1_conv_on_input_rows(sched, device, seed, k, d, batch, dtype) -> None:
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(g, 15, 3, batch=batch, extent=5, dtype=dtype, device=device)
        w = torch.randn(4, *k, 3, generator=g).to(dtype).to(device)
        bias = torch.randn(4, generator=g).to(dtype).to(device)
        sub = ops.subm_conv3d(x, w, bias, kernel_size=k, dilation=d)
        assert torch.equal(sub.coords, x.coords)  # same rows, same order
        pad = ((k[0] - 1) // 2 * d[0], (k[1] - 1) // 2 * d[1], (k[2] - 1) // 2 * d[2])
        full = ops.full_conv3d(x, w, bias, kernel_size=k, stride=1, padding=pad, dilation=d)
        restricted = ops.sparse_reindex(full, x)
        torch.testing.assert_close(sub.feats.double(), restricted.feats.double(), **_tol(dtype))
        # and against the dense oracle, restricted to the input rows
        ref = dense_conv3d(x, w, k, (1, 1, 1), pad, d)
        ref_sparse = SparseTensor(ref.coords.to(device), ref.feats.to(device) + bias.double())
        dense_on_rows = ops.sparse_reindex(ref_sparse, x.with_feats(x.feats.double()))
        torch.testing.assert_close(sub.feats.double(), dense_on_rows.feats, **_tol(dtype))


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=30, deadline=None)
@given(**GEOMETRY)
def test_target_conv_matches_dense_at_target_rows(sched, device, seed, k, s, p, d) -> None:
    """target_conv3d: the conv3d relation (centred padding) evaluated at the target's rows."""
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(g, 14, 2, batch=2, extent=6, device=device)
        target = random_sparse(g, 10, 1, batch=2, extent=4, stride=s, device=device, low=-1)
        w = torch.randn(3, *k, 2, generator=g).to(device)
        bias = torch.randn(3, generator=g).to(device)
        out = ops.conv3d(
            x, w, bias, kernel_size=k, stride=s, padding=p, dilation=d, coordinates=target
        )
        assert out.coords is target.coords
        ref = dense_conv3d(x, w, k, s, centred_padding(k, p, d), d)
        on_target = ops.sparse_reindex(
            SparseTensor(ref.coords.to(device), ref.feats.to(device), s),
            target.with_feats(target.feats.double()),
        )
        torch.testing.assert_close(
            out.feats.double(), on_target.feats + bias.double(), atol=1e-4, rtol=1e-4
        )


@pytest.mark.parametrize("sched", SCHEDULES)
@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=30, deadline=None)
@given(**GEOMETRY)
def test_target_transpose_matches_dense_at_target_rows(sched, device, seed, k, s, p, d) -> None:
    with schedule(sched):
        g = torch.Generator().manual_seed(seed)
        x = random_sparse(g, 12, 2, batch=2, extent=4, stride=(2, 2, 2), device=device)
        out_stride = tuple(2 // v for v in s)
        target = random_sparse(
            g, 20, 1, batch=2, extent=9, stride=out_stride, device=device, low=-2
        )
        w = torch.randn(3, *k, 2, generator=g).to(device)
        out = ops.conv_transpose3d(
            x, w, kernel_size=k, stride=s, padding=p, dilation=d, coordinates=target
        )
        assert out.coords is target.coords
        ref = dense_conv_transpose3d(x, w, k, s, p, d)
        on_target = ops.sparse_reindex(
            SparseTensor(ref.coords.to(device), ref.feats.to(device), out_stride),
            target.with_feats(target.feats.double()),
        )
        torch.testing.assert_close(out.feats.double(), on_target.feats, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(**GEOMETRY)
def test_all_ones_counts_contributing_pairs(device, seed, k, s, p, d) -> None:
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, 25, 1, batch=2, extent=6, device=device)
    ones = x.with_feats(torch.ones_like(x.feats))
    w = torch.ones(1, *k, 1, device=device)
    out = ops.full_conv3d(ones, w, kernel_size=k, stride=s, padding=p, dilation=d)
    ref = dense_conv3d(ones, w, k, s, p, d)
    coords, feats = sorted_rows(out.coords.cpu(), out.feats.cpu())
    assert torch.equal(coords, ref.coords)
    assert torch.equal(feats[:, 0].double(), ref.counts)
    assert bool((feats >= 1).all())  # every generated row has a contributor
    # the transposed conv of the same geometry counts the same pairs from the other side
    back = ops.conv_transpose3d(
        out.with_feats(torch.ones_like(out.feats)),
        w,
        kernel_size=k,
        stride=s,
        padding=p,
        dilation=d,
        coordinates=ones,
    )
    sub = ops.subm_conv3d(ones, w, kernel_size=k, dilation=d)
    assert float(back.feats.sum()) == float(out.feats.sum())  # same pairs, seen from the inputs
    assert bool((sub.feats >= 1).all())  # the centre tap always reads the row itself
    # conv3d: each coarsened row holds its count of (input, tap) pairs under the centred rule
    centred = ops.conv3d(ones, w, kernel_size=k, stride=s, padding=p, dilation=d)
    cref = dense_centred_conv3d(ones, w, k, s, p, d)
    coords, feats = sorted_rows(centred.coords.cpu(), centred.feats.cpu())
    assert torch.equal(coords, cref.coords)
    expected_rows = coarsened_rows(ones, s) * torch.tensor((1, *s))
    assert torch.equal(coords, sorted_rows(expected_rows.to(torch.int32), expected_rows)[0])
    assert torch.equal(feats[:, 0].double(), cref.counts)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(**GEOMETRY)
def test_transpose_is_adjoint_of_full_conv(device, seed, k, s, p, d) -> None:
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, 20, 3, batch=2, extent=6, dtype=torch.float64, device=device)
    w = torch.randn(2, *k, 3, generator=g, dtype=torch.float64).to(device)
    y_support = ops.full_conv3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
    y = y_support.with_feats(
        torch.randn(y_support.feats.shape, generator=g, dtype=torch.float64).to(device)
    )
    wt = w.permute(4, 1, 2, 3, 0).contiguous()  # (C_in, K..., C_out): channels swapped
    lhs = (y_support.feats * y.feats).sum()
    # target transpose onto the conv's input rows
    xt = ops.conv_transpose3d(y, wt, kernel_size=k, stride=s, padding=p, dilation=d, coordinates=x)
    torch.testing.assert_close(lhs, (x.feats * xt.feats).sum())
    # derived-support transpose covers the input rows and is zero-padded elsewhere
    derived = ops.conv_transpose3d(y, wt, kernel_size=k, stride=s, padding=p, dilation=d)
    on_x = ops.sparse_reindex(derived, x)
    torch.testing.assert_close(on_x.feats, xt.feats)
    torch.testing.assert_close(lhs, (x.feats * on_x.feats).sum())


def test_maps_are_cached_per_support_and_shared_by_with_feats() -> None:
    g = torch.Generator().manual_seed(0)
    x = random_sparse(g, 40, 4, extent=6)
    w = torch.randn(4, 3, 3, 3, 4, generator=g)
    a = ops.subm_conv3d(x, w, kernel_size=3)
    assert a.support is x.support
    n_maps = len(x.support.maps)
    b = ops.subm_conv3d(a.with_feats(torch.relu(a.feats)), w, kernel_size=3)
    assert len(x.support.maps) == n_maps and b.support is x.support
    down = ops.conv3d(x, torch.randn(4, 2, 2, 2, 4, generator=g), kernel_size=2, stride=2)
    pool = ops.pool3d(x, mode="max", kernel_size=2, stride=2)
    assert pool.support is down.support  # pool and conv of one geometry share the map
    up = ops.conv_transpose3d(
        down, torch.randn(4, 2, 2, 2, 4, generator=g), kernel_size=2, stride=2, coordinates=x
    )
    assert up.support is x.support
    key = ("target_transpose", (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), weakref.ref(x.support))
    assert key in down.support.maps  # registered by the strided conv, no search needed


def test_target_stride_mismatch_is_rejected() -> None:
    g = torch.Generator().manual_seed(1)
    x = random_sparse(g, 10, 2)
    w = torch.randn(2, 3, 3, 3, 2)
    with pytest.raises(ValueError, match="stride"):
        ops.conv3d(x, w, kernel_size=3, stride=2, coordinates=x)
    y = ops.conv3d(x, w, kernel_size=3, stride=2)
    with pytest.raises(ValueError, match="stride"):
        ops.conv_transpose3d(y, w, kernel_size=3, stride=2, coordinates=y)
    with pytest.raises(ValueError, match="divide"):
        ops.conv_transpose3d(x, w, kernel_size=3, stride=2)
    with pytest.raises(TypeError, match="padding"):
        ops.generative_conv_transpose3d(y, w, kernel_size=3, stride=2, padding=1)  # type: ignore[call-arg]


def test_weight_and_bias_shapes_are_checked() -> None:
    x = random_sparse(torch.Generator().manual_seed(2), 10, 2)
    with pytest.raises(ValueError, match=r"expected \(C_out, 3, 3, 3, 2\)"):
        ops.subm_conv3d(x, torch.randn(2, 2, 3, 3, 3), kernel_size=3)
    with pytest.raises(ValueError, match="bias"):
        ops.subm_conv3d(x, torch.randn(4, 3, 3, 3, 2), torch.randn(3), kernel_size=3)
    with pytest.raises(TypeError, match="SparseTensor"):
        ops.subm_conv3d(x.feats, torch.randn(4, 3, 3, 3, 2), kernel_size=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kernel_size"):
        ops.subm_conv3d(x, torch.randn(4, 3, 3, 3, 2), kernel_size=0)


def test_empty_input_gives_empty_output() -> None:
    x = SparseTensor(torch.zeros(0, 4, dtype=torch.int32), torch.zeros(0, 3))
    w = torch.randn(2, 3, 3, 3, 3)
    assert ops.conv3d(x, w, kernel_size=3, stride=2).num_rows == 0
    assert ops.subm_conv3d(x, w, kernel_size=3).num_rows == 0
    assert ops.conv_transpose3d(x, w, kernel_size=3).num_rows == 0


def test_large_and_negative_coordinates() -> None:
    # far from the origin and spanning a wide box: the packed keys must not wrap
    coords = torch.tensor(
        [[0, -1_000_000, 5, 7], [0, -999_999, 5, 7], [1, 2_000_000, -3, 0], [1, 2_000_001, -3, 1]],
        dtype=torch.int32,
    )
    x = SparseTensor(coords, torch.ones(4, 1))
    out = ops.subm_conv3d(x, torch.ones(1, 3, 3, 3, 1), kernel_size=3)
    assert out.feats[:, 0].tolist() == [2.0, 2.0, 2.0, 2.0]


def test_cached_maps_do_not_keep_supports_alive() -> None:
    g = torch.Generator().manual_seed(5)
    x = random_sparse(g, 40, 2, extent=6)
    w = torch.randn(2, 2, 2, 2, 2, generator=g)
    down = ops.conv3d(x, w, kernel_size=2, stride=2)
    ops.conv_transpose3d(down, w, kernel_size=2, stride=2, coordinates=x)
    probe = weakref.ref(x.support)
    gc.disable()  # freed by reference counting alone: no cycle between the supports
    try:
        del x, down
        assert probe() is None
    finally:
        gc.enable()

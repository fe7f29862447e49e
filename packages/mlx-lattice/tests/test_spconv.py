"""spconv 2.x on CPU as a second, independent oracle for the MLX sparse convolutions.

spconv 2.x keeps conv weights as ``(C_out, k0, k1, k2, C_in)`` -- the same
layout and tap order as ``conv3d_o_xyz_i`` -- so weights transfer unchanged
(except 1x1x1 kernels, which spconv applies as ``x @ W.view(C_in, C_out)``; not
used here).  Its quirks on CPU (SPEC §10) shape these tests: it runs with one
thread (its multi-threaded scatter-add races), convs carry no bias (a biased
conv fails in eval mode), and every coordinate stays well inside
``spatial_shape`` because spconv silently drops or misreads rows at the edge.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lattice import SparseTensor, ops
from mlx_sparse_oracle import Triple, logical_rows, random_weight, sort_rows, to_np, triples

torch = pytest.importorskip("torch")
spconv = pytest.importorskip("spconv.pytorch")

MARGIN = 12  # logical cells between the support and spconv's grid boundary
GRID = 48  # spconv spatial_shape per axis (logical units of the input)
EXAMPLES = settings(max_examples=25, deadline=None)


pytestmark = pytest.mark.usefixtures("one_thread")  # the root conftest's: spconv races


def scene(seed: int, batch: int, stride: Triple, channels: int, extent: int = 8) -> SparseTensor:
    """Random support inside [MARGIN, MARGIN + extent)^3 (logical), physical at ``stride``."""
    rng = np.random.default_rng(seed)
    grid = rng.random((batch, extent, extent, extent)) < 0.15
    grid[0, 0, 0, 0] = True
    idx = np.argwhere(grid).astype(np.int32)
    idx = idx[rng.permutation(len(idx))]
    idx[:, 1:] = (idx[:, 1:] + MARGIN) * np.asarray(stride, dtype=np.int32)
    feats = rng.standard_normal((len(idx), channels)).astype(np.float32)
    return SparseTensor(mx.array(idx), mx.array(feats), stride=stride)


def to_spconv(x: SparseTensor, batch: int) -> object:
    logical = logical_rows(x).astype(np.int32)
    return spconv.SparseConvTensor(
        torch.from_numpy(to_np(x.feats).astype(np.float32)),
        torch.from_numpy(logical),
        [GRID, GRID, GRID],
        batch,
    )


def load_weight(module: object, w: mx.array) -> None:
    weight = module.weight  # type: ignore[attr-defined]
    assert tuple(weight.shape) == tuple(w.shape), "spconv 2.x layout is (C_out, k0, k1, k2, C_in)"
    with torch.no_grad():
        weight.copy_(torch.from_numpy(np.asarray(w)))


def compare(y: SparseTensor, out: object, *, same_order: bool = False) -> None:
    """Same support (logical rows) and features as a spconv result."""
    sp_rows = out.indices.numpy().astype(np.int64)  # type: ignore[attr-defined]
    sp_feats = out.features.detach().numpy()  # type: ignore[attr-defined]
    ours = logical_rows(y)
    if same_order:
        np.testing.assert_array_equal(ours, sp_rows)
        np.testing.assert_allclose(to_np(y.feats), sp_feats, rtol=1e-4, atol=1e-4)
        return
    a, b = np.lexsort(ours.T[::-1]), np.lexsort(sp_rows.T[::-1])
    np.testing.assert_array_equal(sort_rows(ours), sort_rows(sp_rows))
    np.testing.assert_allclose(to_np(y.feats)[a], sp_feats[b], rtol=1e-4, atol=1e-4)


@EXAMPLES
@given(
    k=triples(2, 4), s=triples(1, 2), p=triples(0, 2), d=triples(1, 2),
    batch=st.integers(1, 3), seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_sparse_conv3d_matches_spconv_as_full_conv3d(
    k: Triple, s: Triple, p: Triple, d: Triple, batch: int, seed: int
) -> None:
    x = scene(seed, batch, (1, 1, 1), 3)
    w = random_weight(np.random.default_rng(seed), 4, k, 3)
    conv = spconv.SparseConv3d(3, 4, k, stride=s, padding=p, dilation=d, bias=False)
    load_weight(conv, w)
    with torch.no_grad():
        out = conv(to_spconv(x, batch))
    y = ops.full_conv3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
    compare(y, out)


@EXAMPLES
@given(
    k=st.sampled_from([(3, 3, 3), (5, 5, 5), (3, 1, 3), (1, 3, 5)]), d=triples(1, 2),
    batch=st.integers(1, 3), seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_subm_conv3d_matches_spconv(k: Triple, d: Triple, batch: int, seed: int) -> None:
    x = scene(seed, batch, (1, 1, 1), 3)
    w = random_weight(np.random.default_rng(seed), 2, k, 3)
    conv = spconv.SubMConv3d(3, 2, k, dilation=d, bias=False)
    load_weight(conv, w)
    with torch.no_grad():
        out = conv(to_spconv(x, batch))
    y = ops.subm_conv3d(x, w, kernel_size=k, dilation=d)
    compare(y, out, same_order=True)  # submanifold keeps the input rows in order


@EXAMPLES
@given(
    k=triples(2, 4), s=triples(1, 2), p=triples(0, 1), batch=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_inverse_conv_matches_target_conv_transpose3d(
    k: Triple, s: Triple, p: Triple, batch: int, seed: int
) -> None:
    """SparseInverseConv3d == conv_transpose3d onto the paired conv's input (coordinates=)."""
    rng = np.random.default_rng(seed)
    x = scene(seed, batch, (1, 1, 1), 3)
    w_down = random_weight(rng, 4, k, 3)
    w_up = random_weight(rng, 2, k, 4)
    down = spconv.SparseConv3d(3, 4, k, stride=s, padding=p, bias=False, indice_key="pair")
    up = spconv.SparseInverseConv3d(4, 2, k, indice_key="pair", bias=False)
    load_weight(down, w_down)
    load_weight(up, w_up)
    with torch.no_grad():
        mid = down(to_spconv(x, batch))
        out = up(mid)
    y_mid = ops.full_conv3d(x, w_down, kernel_size=k, stride=s, padding=p)
    compare(y_mid, mid)
    y = ops.conv_transpose3d(y_mid, w_up, kernel_size=k, stride=s, padding=p, coordinates=x)
    compare(y, out, same_order=True)  # spconv returns the paired input's rows, by position
    # The same op on a fresh target (no forward map to reuse) gives the same values.
    fresh = SparseTensor(x.coords, x.feats)
    again = ops.conv_transpose3d(
        y_mid.with_feats(y_mid.feats), w_up, kernel_size=k, stride=s, padding=p, coordinates=fresh
    )
    np.testing.assert_allclose(to_np(again.feats), to_np(y.feats), rtol=1e-6, atol=1e-6)


@EXAMPLES
@given(
    k=triples(2, 4), s=triples(1, 2), p=triples(0, 1), d=triples(1, 2),
    batch=st.integers(1, 3), seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_conv_transpose3d_matches_spconv(
    k: Triple, s: Triple, p: Triple, d: Triple, batch: int, seed: int
) -> None:
    x = scene(seed, batch, s, 3, extent=6)  # input at stride s: output stride 1
    w = random_weight(np.random.default_rng(seed), 2, k, 3)
    conv = spconv.SparseConvTranspose3d(3, 2, k, stride=s, padding=p, dilation=d, bias=False)
    load_weight(conv, w)
    with torch.no_grad():
        out = conv(to_spconv(x, batch))
    y = ops.conv_transpose3d(x, w, kernel_size=k, stride=s, padding=p, dilation=d)
    assert y.stride == (1, 1, 1)
    # spconv's output grid is in units of the output stride; ours are logical too.
    compare(y, out)

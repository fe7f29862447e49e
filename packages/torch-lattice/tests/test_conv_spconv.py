"""spconv 2.x (CPU, single-threaded) as an outside oracle for conv, subm, inverse and transpose.

Quirks honoured (SPEC §10): one thread (its CPU scatter-add races), no bias in
eval mode (we use bias=False), no 1×1×1 kernels (they act as a plain matmul
with a different weight view), SubMConv3d only with odd kernels, coordinates
well inside ``spatial_shape``, transposed convs without dilation.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.reference import sorted_rows

spconv = pytest.importorskip("spconv.pytorch")

SHAPE = [40, 40, 40]
kernels = st.tuples(st.integers(2, 3), st.integers(2, 3), st.integers(2, 3))
strides = st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2))
paddings = st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1))
dilations = st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2))


pytestmark = pytest.mark.usefixtures("one_thread")  # the root conftest's: spconv races


def _inputs(seed: int, rows: int = 60, channels: int = 3) -> tuple[SparseTensor, object]:
    g = torch.Generator().manual_seed(seed)
    b = torch.randint(0, 2, (rows, 1), generator=g)
    xyz = torch.randint(12, 22, (rows, 3), generator=g)
    coords = torch.unique(torch.cat([b, xyz], 1), dim=0).to(torch.int32)
    feats = torch.randn(coords.shape[0], channels, generator=g)
    x = SparseTensor(coords, feats)
    sp = spconv.SparseConvTensor(feats, coords, SHAPE, 2)
    return x, sp


def _compare(ours: SparseTensor, theirs: object) -> None:
    # spconv indexes each level in its own grid units: our logical coordinates
    logical = ours.coords // torch.tensor([1, *ours.stride], dtype=torch.int32)
    c1, f1 = sorted_rows(logical, ours.feats)
    c2, f2 = sorted_rows(theirs.indices.to(torch.int32), theirs.features)  # type: ignore[attr-defined]
    assert torch.equal(c1, c2)
    torch.testing.assert_close(f1, f2, atol=1e-4, rtol=1e-4)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=kernels, s=strides, p=paddings, d=dilations)
def test_sparse_conv3d_matches_spconv_as_full_conv3d(seed, k, s, p, d) -> None:
    x, sp = _inputs(seed)
    conv = spconv.SparseConv3d(3, 4, k, stride=s, padding=p, dilation=d, bias=False)
    with torch.no_grad():
        theirs = conv(sp)
        ours = ops.full_conv3d(x, conv.weight, kernel_size=k, stride=s, padding=p, dilation=d)
    _compare(ours, theirs)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=st.sampled_from([3, 5, (3, 1, 3)]), d=st.integers(1, 2))
def test_subm_conv3d_matches_spconv(seed, k, d) -> None:
    x, sp = _inputs(seed)
    conv = spconv.SubMConv3d(3, 4, k, dilation=d, bias=False)
    with torch.no_grad():
        theirs = conv(sp)
        ours = ops.subm_conv3d(x, conv.weight, kernel_size=k, dilation=d)
    _compare(ours, theirs)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=kernels, s=strides, p=paddings)
def test_inverse_conv3d_matches_spconv(seed, k, s, p) -> None:
    x, sp = _inputs(seed)
    down = spconv.SparseConv3d(3, 4, k, stride=s, padding=p, bias=False, indice_key="pair")
    inv = spconv.SparseInverseConv3d(4, 2, k, indice_key="pair", bias=False)
    with torch.no_grad():
        y_sp = down(sp)
        theirs = inv(y_sp)
        y = ops.full_conv3d(x, down.weight, kernel_size=k, stride=s, padding=p)
        ours = ops.conv_transpose3d(
            y, inv.weight, kernel_size=k, stride=s, padding=p, coordinates=x
        )
    # SparseInverseConv3d pairs rows by position: its output rows are the conv input's rows
    assert torch.equal(theirs.indices.to(torch.int32), x.coords)
    _compare(ours, theirs)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), k=kernels, s=strides, p=paddings)
def test_sparse_conv_transpose3d_matches_spconv(seed, k, s, p) -> None:
    x, sp = _inputs(seed)
    coarse = SparseTensor(x.coords * torch.tensor([1, *s], dtype=torch.int32), x.feats, s)
    conv = spconv.SparseConvTranspose3d(3, 4, k, stride=s, padding=p, bias=False)
    with torch.no_grad():
        theirs = conv(sp)
        ours = ops.conv_transpose3d(coarse, conv.weight, kernel_size=k, stride=s, padding=p)
    _compare(ours, theirs)

"""The Triton conv path (torch_lattice.triton) against the reference path and dense oracles.

On a machine without a GPU the kernels run under ``TRITON_INTERPRET=1`` on
small inputs; with CUDA the same tests run on the GPU at full size.  Every
conv kind, f32/f16/bf16, odd and even kernels, dilation, strides, padding and
targets; forward values, output supports (same rows, same order as the
reference path) and the three gradients.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from lattice_conformance.metrics import Tolerance
from torch_lattice import SparseTensor, ops
from torch_lattice.coords import Packing
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import random_sparse

# Without CUDA the root conftest.py sets TRITON_INTERPRET=1 for the session,
# before anything imports Triton (it fixes each kernel's mode at import).
if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

CUDA = torch.cuda.is_available()

DEVICE = "cuda" if CUDA else "cpu"
ROWS, C_IN, C_OUT, EXTENT = (20000, 32, 48, 40) if CUDA else (40, 5, 6, 5)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _tol(dtype: torch.dtype) -> Tolerance:
    if dtype == torch.float32:
        return {"atol": 1e-4, "rtol": 1e-4}
    return {"atol": 3e-2, "rtol": 2e-2} if dtype == torch.float16 else {"atol": 1e-1, "rtol": 4e-2}


def _input(seed: int, dtype: torch.dtype, stride: tuple[int, int, int] = (2, 2, 2)) -> SparseTensor:
    g = torch.Generator().manual_seed(seed)
    x = random_sparse(g, ROWS, C_IN, batch=2, extent=EXTENT, stride=stride, dtype=dtype)
    return SparseTensor(x.coords.to(DEVICE), x.feats.to(DEVICE), stride)


def _run(sched: str, op, x: SparseTensor, w, b, up_seed: int):
    """Output and the three gradients of ``sum(out * U)`` under one schedule."""
    f = x.feats.detach().clone().requires_grad_(True)
    w = w.detach().clone().requires_grad_(True)
    b = b.detach().clone().requires_grad_(True)
    with schedule(sched):
        out = op(SparseTensor(x.coords, f, x.stride), w, b)
        g = torch.Generator().manual_seed(up_seed)
        up = torch.randn(out.feats.shape, generator=g, dtype=torch.float64).to(DEVICE)
        (out.feats.double() * up).sum().backward()
    assert f.grad is not None and w.grad is not None and b.grad is not None
    return out, f.grad, w.grad, b.grad


def _compare(op, x: SparseTensor, kernel, seed: int) -> SparseTensor:
    dtype = x.dtype
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(C_OUT, *kernel, C_IN, generator=g) / (C_IN * 3) ** 0.5).to(dtype).to(DEVICE)
    b = torch.randn(C_OUT, generator=g).to(dtype).to(DEVICE)
    ref = _run("tap_major", op, x, w, b, seed)
    got = _run("triton", op, x, w, b, seed)
    assert torch.equal(got[0].coords, ref[0].coords), "support or row order differs"
    assert got[0].stride == ref[0].stride
    assert got[0].dtype == dtype
    for a, r, name in zip(got[:4], ref[:4], ("out", "d feats", "d weight", "d bias"), strict=True):
        a = a.feats if isinstance(a, SparseTensor) else a
        r = r.feats if isinstance(r, SparseTensor) else r
        assert a.dtype == r.dtype, name
        assert bool(torch.isfinite(a).all()), name
        scale = r.double().abs().max().clamp(min=1.0)
        torch.testing.assert_close(a.double() / scale, r.double() / scale, **_tol(dtype), msg=name)
    with torch.no_grad(), schedule("triton"):  # inference: the kernel without an autograd node
        plain = op(SparseTensor(x.coords, x.feats, x.stride), w, b)
    assert torch.equal(plain.coords, got[0].coords) and torch.equal(plain.feats, got[0].feats)
    return got[0]


KERNELS = [(3, 3, 3), (2, 2, 2), (2, 3, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", KERNELS)
def test_subm_matches_reference(dtype, kernel) -> None:
    x = _input(1, dtype)

    def op(x, w, b):
        return ops.subm_conv3d(x, w, b, kernel_size=kernel, dilation=(1, 2, 1))

    out = _compare(op, x, kernel, 2)
    assert torch.equal(out.coords, x.coords)  # the same rows in the same order


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("kernel", "stride", "padding"),
    [((2, 2, 2), (2, 2, 2), (0, 0, 0)), ((3, 3, 3), (2, 1, 2), (1, 0, 2)), ((3, 2, 1), 1, 1)],
)
def test_full_conv_matches_reference(dtype, kernel, stride, padding) -> None:
    """``full_conv3d``: the indexed relation c = o*s - p + k*d, spconv's regular conv."""
    x = _input(3, dtype)

    def op(x, w, b):
        return ops.full_conv3d(x, w, b, kernel_size=kernel, stride=stride, padding=padding)

    _compare(op, x, kernel, 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation"),
    [
        ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)),
        ((3, 3, 3), (2, 1, 2), (1, 0, 2), (1, 1, 1)),
        ((3, 2, 1), 1, 1, (2, 1, 1)),
        ((3, 3, 3), 1, 0, 1),
    ],
)
def test_centred_conv_matches_reference(dtype, kernel, stride, padding, dilation) -> None:
    """``conv3d``: the centred relation on the coarsened support (input rows at stride 1)."""
    x = _input(20, dtype)

    def op(x, w, b):
        return ops.conv3d(
            x, w, b, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation
        )

    out = _compare(op, x, kernel, 21)
    if stride == 1:
        assert torch.equal(out.coords, x.coords)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation"),
    [((2, 2, 2), 2, 0, 1), ((3, 3, 3), 2, 1, 1), ((3, 1, 2), (1, 2, 2), (2, 0, 0), (2, 1, 1))],
)
def test_transpose_matches_reference(dtype, kernel, stride, padding, dilation) -> None:
    x = _input(5, dtype, stride=(4, 4, 4))

    def op(x, w, b):
        return ops.conv_transpose3d(
            x, w, b, kernel_size=kernel, stride=stride, padding=padding, dilation=dilation
        )

    _compare(op, x, kernel, 6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("kernel", "stride"), [((2, 2, 2), 2), ((3, 3, 3), 2), ((3, 2, 3), 1)])
def test_generative_matches_reference(dtype, kernel, stride) -> None:
    x = _input(7, dtype)

    def op(x, w, b):
        return ops.generative_conv_transpose3d(x, w, b, kernel_size=kernel, stride=stride)

    _compare(op, x, kernel, 8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("kernel", "stride", "padding"), [((2, 2, 2), 2, 0), ((3, 3, 3), 2, 1)])
def test_target_forms_match_reference(dtype, kernel, stride, padding) -> None:
    """target conv3d onto a coarse support and target transposed conv back onto the input."""
    x = _input(9, dtype)
    coarse = _input(10, dtype, stride=(4, 4, 4))

    def down(x, w, b):
        return ops.conv3d(
            x, w, b, kernel_size=kernel, stride=stride, padding=padding, coordinates=coarse
        )

    _compare(down, x, kernel, 11)
    # The transposed conv back onto x's rows, from a conv's own output (registered map)
    # and from an unrelated coarse support (searched map).
    with schedule("triton"):
        w0 = torch.zeros(C_IN, *kernel, C_IN, dtype=dtype, device=DEVICE)
        y = ops.full_conv3d(x, w0, kernel_size=kernel, stride=stride, padding=padding)
    for source in (y.with_feats(torch.randn_like(y.feats)), coarse):

        def up(s, w, b, source=source):
            return ops.conv_transpose3d(
                source.with_feats(s.feats[: source.num_rows]) if s is not source else s,
                w,
                b,
                kernel_size=kernel,
                stride=stride,
                padding=padding,
                coordinates=x,
            )

        _compare(up, source, kernel, 12)


def _centred_oracle(x: SparseTensor, w: torch.Tensor, kernel, stride, padding, dilation):
    """``conv3d``'s centred relation written from its definition, on a dense grid.

    Output rows: the distinct ``floor(c / s)``; value: sum over taps of
    ``W_k @ x[o*s + off(k) - p]`` with ``off = (k - K//2) * d`` on odd axes and
    ``k * d`` on even ones, over the taps whose input is active.
    """
    s = torch.tensor((1, *x.stride))
    logical = x.coords.cpu().to(torch.int64) // s
    st = torch.tensor((1, *stride))
    out = torch.unique(torch.div(logical, st, rounding_mode="floor"), dim=0)
    lo = logical.min(0).values
    span = logical.max(0).values - lo + 1
    m = 2 * max(max(kernel) * max(dilation) + max(padding), 1)
    grid = torch.zeros(int(span[0]), *(int(v) + 2 * m for v in span[1:]), x.num_channels)
    have = torch.zeros(grid.shape[:4], dtype=torch.bool)
    idx = (logical - lo) + torch.tensor((0, m, m, m))
    grid[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]] = x.feats.cpu().double().float()
    have[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]] = True
    result = torch.zeros(out.shape[0], w.shape[0], dtype=torch.float64)
    wd = w.cpu().double()
    for kx in range(kernel[0]):
        for ky in range(kernel[1]):
            for kz in range(kernel[2]):
                tap = (kx, ky, kz)
                off = [
                    (tap[a] - kernel[a] // 2) * dilation[a]
                    if kernel[a] % 2
                    else tap[a] * dilation[a]
                    for a in range(3)
                ]
                c = out[:, 1:] * st[1:] + torch.tensor(off) - torch.tensor(padding)
                q = torch.cat([out[:, :1], c], 1) - lo + torch.tensor((0, m, m, m))
                ok = have[q[:, 0], q[:, 1], q[:, 2], q[:, 3]]
                vals = grid[q[:, 0], q[:, 1], q[:, 2], q[:, 3]].double() * ok[:, None]
                result += vals @ wd[:, kx, ky, kz, :].t()
    coords = out * torch.tensor((1, *(x.stride[a] * stride[a] for a in range(3))))
    return coords.to(torch.int32), result


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation"),
    [((3, 3, 3), (2, 2, 2), (0, 0, 0), (1, 1, 1)), ((2, 3, 4), (2, 1, 3), (1, 0, 1), (1, 2, 1))],
)
def test_centred_relation_matches_its_definition(dtype, kernel, stride, padding, dilation) -> None:
    """The final ``conv3d`` relation (centred, coarsened support), against a dense oracle."""
    x = _input(13, dtype)
    g = torch.Generator().manual_seed(14)
    w = torch.randn(C_OUT, *kernel, C_IN, generator=g).to(dtype).to(DEVICE)
    from torch_lattice.triton import sparse_conv

    out = sparse_conv("centred", x, w, None, kernel, stride, padding, dilation)
    coords, feats = _centred_oracle(x, w, kernel, stride, padding, dilation)
    order = torch.argsort(
        Packing.covering([0, -999, -999, -999], [9, 999, 999, 999]).pack(
            out.coords.cpu().to(torch.int64)
        )
    )
    assert torch.equal(out.coords.cpu()[order], coords)  # sorted by (batch, x, y, z)
    assert torch.equal(order, torch.arange(order.numel()))  # and emitted in that order
    scale = feats.abs().max().clamp(min=1.0)
    torch.testing.assert_close(out.feats.cpu().double() / scale, feats / scale, **_tol(dtype))


def test_centred_stride1_odd_kernel_is_subm() -> None:
    x = _input(15, torch.float32)
    g = torch.Generator().manual_seed(16)
    w = torch.randn(C_OUT, 3, 3, 3, C_IN, generator=g).to(DEVICE)
    from torch_lattice.triton import sparse_conv

    one, zero = (1, 1, 1), (0, 0, 0)
    centred = sparse_conv("centred", x, w, None, (3, 3, 3), one, zero, one)
    subm = sparse_conv("subm", x, w, None, (3, 3, 3), one, zero, one)
    assert centred.support is x.support
    torch.testing.assert_close(centred.feats, subm.feats, atol=0, rtol=0)


def test_slot_map_adjoint_and_pairs_agree() -> None:
    """The transposed table and the compacted pairs list hold exactly the table's pairs."""
    from torch_lattice.triton import maps

    x = _input(17, torch.float32)
    _, smap = maps.build("indexed", x.support, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1))
    slots = smap.slots.cpu().to(torch.int64)
    o, k = (slots >= 0).nonzero(as_tuple=True)
    forward = set(zip(slots[o, k].tolist(), o.tolist(), k.tolist(), strict=True))
    back = smap.transposed().slots.cpu().to(torch.int64)
    c, kb = (back >= 0).nonzero(as_tuple=True)
    assert set(zip(c.tolist(), back[c, kb].tolist(), kb.tolist(), strict=True)) == forward
    pin, pout, starts = (t.cpu().to(torch.int64) for t in smap.pairs())
    listed = set()
    for tap in range(smap.volume):
        a, b = int(starts[tap]), int(starts[tap + 1])
        listed |= {(i, j, tap) for i, j in zip(pin[a:b].tolist(), pout[a:b].tolist(), strict=True)}
    assert int(starts[-1]) == len(forward) and listed == forward
    assert smap.transposed().transposed() is smap


def test_empty_input_and_f64_are_handled() -> None:
    empty = SparseTensor(
        torch.zeros(0, 4, dtype=torch.int32, device=DEVICE), torch.zeros(0, 3, device=DEVICE)
    )
    w = torch.randn(2, 3, 3, 3, 3, device=DEVICE)
    b = torch.randn(2, device=DEVICE)
    with schedule("triton"):
        assert ops.subm_conv3d(empty, w, b, kernel_size=3).feats.shape == (0, 2)
        assert ops.conv3d(empty, w, b, kernel_size=3, stride=2).num_rows == 0
        x64 = _input(18, torch.float64)
        with pytest.raises(TypeError, match="f16, bf16 and f32"):
            w64 = torch.randn(2, 3, 3, 3, C_IN, dtype=torch.float64, device=DEVICE)
            ops.subm_conv3d(x64, w64, kernel_size=3)


def test_tf32_is_off_by_default_and_switchable() -> None:
    from torch_lattice.triton.kernels import set_tf32, tf32_enabled

    assert not tf32_enabled()
    set_tf32(True)
    try:
        assert tf32_enabled()
    finally:
        set_tf32(False)
    assert not tf32_enabled()


def test_f32_product_modes() -> None:
    """tf32x3 keeps f32 accuracy (within the f32 tolerance of the reference); bad modes refused."""
    from torch_lattice.triton.kernels import f32_products, set_f32_products

    assert f32_products() == "ieee"
    with pytest.raises(ValueError, match="one of"):
        set_f32_products("fp16")
    x = _input(20, torch.float32)
    g = torch.Generator().manual_seed(21)
    w = (torch.randn(C_OUT, 3, 3, 3, C_IN, generator=g) / (C_IN * 3) ** 0.5).to(DEVICE)
    with schedule("tap_major"):
        ref = ops.subm_conv3d(x, w, kernel_size=3).feats
    set_f32_products("tf32x3")
    try:
        with schedule("triton"):
            got = ops.subm_conv3d(x, w, kernel_size=3).feats
    finally:
        set_f32_products("ieee")
    scale = ref.abs().max().clamp(min=1.0)
    torch.testing.assert_close(got / scale, ref / scale, **_tol(torch.float32))


def test_kernels_run_interpreted_without_cuda() -> None:
    """Without a GPU the kernels were defined for the interpreter (the fixture's setting)."""
    from torch_lattice.triton import interpreting

    assert interpreting() == (not CUDA)


def test_schedule_dispatch() -> None:
    """``auto`` runs CUDA tensors on the Triton path and CPU ones on the reference path."""
    x = _input(19, torch.float32)
    w = torch.randn(C_OUT, 3, 3, 3, C_IN, device=DEVICE)

    def triton_maps(support) -> int:
        return sum(1 for key in support.maps if key[0] == "triton")

    with schedule("triton"):
        ops.subm_conv3d(x, w, kernel_size=3)
    assert triton_maps(x.support) > 0
    y = SparseTensor(x.coords, x.feats, x.stride)
    with schedule("auto"):
        ops.subm_conv3d(y, w, kernel_size=3)
    assert (triton_maps(y.support) > 0) == CUDA
    assert ops.schedule is schedule

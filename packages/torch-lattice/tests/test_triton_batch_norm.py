"""masked_batch_norm (torch_lattice.triton.batch_norm) against torch's batch norm on the live rows.

The oracle is ``torch.nn.functional.batch_norm`` in float64 on ``x[:n]``, the
live rows alone, with autograd through it for the gradients and cloned running
statistics; with fewer than two live rows, where torch refuses, the expected
values are written out (no row: nothing moves; one row: the row becomes the
bias, the running mean moves, the running variance does not).  Padding rows
hold zeros (the captured step's invariant) or large garbage, and so does the
incoming gradient there, to show both are ignored; padding rows of the result
and of the input gradient must be exactly 0.  Channel counts cover one tile
(1, 3, 32), several (96, 130) and a partial last one; a taller frame makes the
reduction programs stride over several row blocks each.

On CPU the kernels run under ``TRITON_INTERPRET=1`` (set by the root
conftest), which handles f16 and bf16 loads and stores (its f32 to bf16 conversion
truncates rather than rounds, within the bf16 tolerance); with CUDA the same
tests run compiled, at a larger size where it matters, and one more records
forward and backward in a CUDA graph and replays it for several row counts.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
import torch.nn.functional as F

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

from capture_helpers import HostReads
from torch_lattice.triton import batch_norm
from torch_lattice.triton.batch_norm import masked_batch_norm

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
ROWS = 37
TALL = 300_000 if CUDA else 300  # several row blocks per reduction program
EPS = 1e-5
MOMENTUM = 0.1
GARBAGE = 1e4

# (atol, rtol) of the result and input gradient against the float64 oracle on the
# same rounded inputs, atol in units of _bounds' scales: f32 sums make the
# statistics exact to f32, so the only error past f32's is the final rounding
# to the features' dtype.
TOL = {torch.float32: (2e-5, 2e-5), torch.float16: (4e-3, 2e-3), torch.bfloat16: (1.6e-2, 8e-3)}


def _frame(
    n: int, c: int, dtype: torch.dtype, fill: float, rows: int = ROWS, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Features with ``n`` live rows (mean far from 0) and ``fill`` in the padding, and the rest."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, c, generator=g) * (torch.rand(c, generator=g) * 2 + 0.5)
    x += torch.randn(c, generator=g) * 4
    x[n:] = fill
    dy = torch.randn(rows, c, generator=g)
    dy[n:] = -GARBAGE if fill else GARBAGE  # the incoming gradient's padding: never zero
    return {
        "x": x.to(dtype).to(DEVICE),
        "dy": dy.to(dtype).to(DEVICE),
        "weight": (torch.rand(c, generator=g) + 0.5).to(DEVICE),
        "bias": torch.randn(c, generator=g).to(DEVICE),
        "running_mean": torch.randn(c, generator=g).to(DEVICE),
        "running_var": (torch.rand(c, generator=g) + 0.5).to(DEVICE),
        "live": torch.tensor([n], dtype=torch.int32, device=DEVICE),
    }


def _ours(f: dict[str, torch.Tensor], momentum: float | torch.Tensor) -> dict[str, torch.Tensor]:
    x = f["x"].clone().requires_grad_()
    w = f["weight"].clone().requires_grad_()
    b = f["bias"].clone().requires_grad_()
    rm, rv = f["running_mean"].clone(), f["running_var"].clone()
    y = masked_batch_norm(x, f["live"], w, b, rm, rv, momentum, EPS)
    y.backward(f["dy"])
    assert x.grad is not None and w.grad is not None and b.grad is not None
    return {"y": y.detach(), "dx": x.grad, "dw": w.grad, "db": b.grad, "rm": rm, "rv": rv}


def _oracle(f: dict[str, torch.Tensor], n: int, m: float) -> dict[str, torch.Tensor]:
    """float64 batch norm of the live rows: torch's for n >= 2, written out below."""
    x = f["x"][:n].double().requires_grad_()
    w = f["weight"].double().requires_grad_()
    b = f["bias"].double().requires_grad_()
    rm, rv = f["running_mean"].double(), f["running_var"].double()
    if n >= 2:
        y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=m, eps=EPS)
        y.backward(f["dy"][:n].double())
        assert x.grad is not None and w.grad is not None and b.grad is not None
        return {"y": y.detach(), "dx": x.grad, "dw": w.grad, "db": b.grad, "rm": rm, "rv": rv}
    c = x.shape[1]
    if n == 1:  # no spread: the row becomes the bias; no gradient reaches it or the weight
        rm = (1 - m) * rm + m * x.detach()[0]
    return {
        "y": b.detach().expand(n, c),
        "dx": torch.zeros(n, c, dtype=torch.float64, device=DEVICE),
        "dw": torch.zeros(c, dtype=torch.float64, device=DEVICE),
        "db": f["dy"][:n].double().sum(0),
        "rm": rm,
        "rv": rv,
    }


def _bounds(f: dict[str, torch.Tensor], n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel error scales of the result and of the input gradient, in float64.

    Rounding ``x`` (f32 at best) before ``x - mean`` moves ``xhat`` by about
    ``ulp(x) * invstd``: ``k = 1 + max|x| * invstd`` is that amplification,
    large when the live rows barely differ (two close rows).  The result errs
    by about ``|weight| * k`` units, the input gradient (``weight * invstd``
    times terms of size ``|dy|``) by ``|weight| * invstd * max|dy| * k``.
    """
    w = f["weight"].double().abs()
    if n == 0:
        return w, w
    x = f["x"][:n].double()
    invstd = torch.rsqrt(x.var(0, unbiased=False) + EPS)
    k = 1 + x.abs().amax(0) * invstd
    return w * k, w * invstd * f["dy"][:n].double().abs().amax(0) * k


def _assert_within(
    got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor, atol: float, rtol: float, what: str
) -> None:
    """|got - want| <= atol * scale (per channel) + rtol * |want|, elementwise."""
    err = (got.double() - want).abs()
    bound = atol * scale + rtol * want.abs()
    worst = (err / bound).max() if err.numel() else torch.tensor(0.0)
    assert worst <= 1, f"{what}: error {err.max():.3g} is {worst:.3g} times the bound"


def _check(f: dict[str, torch.Tensor], n: int, momentum: float | torch.Tensor, m: float) -> None:
    dtype = f["x"].dtype
    got, want = _ours(f, momentum), _oracle(f, n, m)
    atol, rtol = TOL[dtype]
    assert got["y"].dtype == dtype and got["dx"].dtype == dtype
    assert got["dw"].dtype == f["weight"].dtype and got["db"].dtype == f["bias"].dtype
    zero = torch.zeros_like(got["y"][n:])
    assert torch.equal(got["y"][n:], zero), "padding rows of the result must be 0"
    assert torch.equal(got["dx"][n:], zero), "padding rows of the input gradient must be 0"
    y_scale, dx_scale = _bounds(f, n)
    _assert_within(got["y"][:n], want["y"], y_scale, atol, rtol, "result")
    _assert_within(got["dx"][:n], want["dx"], dx_scale, atol, rtol, "input gradient")
    # f32 sums of rounded inputs: the parameter gradients are f32-accurate in every dtype
    torch.testing.assert_close(got["dw"].double(), want["dw"], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(got["db"].double(), want["db"], atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(got["rm"].double(), want["rm"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got["rv"].double(), want["rv"], atol=1e-5, rtol=1e-5)
    if n < 2:  # torch would raise; the graph cannot: the running variance stays
        assert torch.equal(got["rv"], f["running_var"])
    if n == 0:
        assert torch.equal(got["rm"], f["running_mean"])
        assert not got["y"].any() and not got["dw"].any() and not got["db"].any()
    if n == 1:  # exactly: x - mean is 0 in f32 (the interpreter truncates f32 to bf16)
        if dtype != torch.bfloat16 or CUDA:
            assert torch.equal(got["y"][0], f["bias"].to(dtype))
        assert not got["dx"].any()


@pytest.mark.parametrize("fill", [0.0, GARBAGE], ids=["zero-padding", "garbage-padding"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("c", [1, 3, 32, 96, 130])
@pytest.mark.parametrize("n", [0, 1, 2, 23, ROWS])
def test_matches_torch_on_the_live_rows(n: int, c: int, dtype: torch.dtype, fill: float) -> None:
    _check(_frame(n, c, dtype, fill, seed=n * 1000 + c), n, MOMENTUM, MOMENTUM)


@pytest.mark.parametrize("c", [3, 130])
@pytest.mark.parametrize("n", [1, 23, ROWS])
def test_bf16(n: int, c: int) -> None:
    _check(_frame(n, c, torch.bfloat16, GARBAGE, seed=7), n, MOMENTUM, MOMENTUM)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("c", [3, 130])
@pytest.mark.parametrize("n", [TALL // 3 * 2 + 5, TALL])
def test_reductions_stride_over_many_row_blocks(n: int, c: int, dtype: torch.dtype) -> None:
    """Each reduction program sums several row blocks; the sums are the same every call."""
    f = _frame(n, c, dtype, GARBAGE, rows=TALL, seed=3)
    _check(f, n, MOMENTUM, MOMENTUM)
    first, again = _ours(f, MOMENTUM), _ours(f, MOMENTUM)
    for key, value in first.items():
        assert torch.equal(value, again[key]), f"{key} differs between two calls"


@pytest.mark.parametrize("shape", [(1,), ()], ids=["vector", "scalar"])
@pytest.mark.parametrize("n", [0, 1, 2, 23, ROWS])
def test_momentum_as_a_device_tensor(n: int, shape: tuple[int, ...]) -> None:
    """A cumulative average's 1 / num_batches_tracked, never read on the host."""
    m = 1 / 3
    momentum = torch.full(shape, m, dtype=torch.float32, device=DEVICE)
    _check(_frame(n, 32, torch.float32, GARBAGE, seed=11), n, momentum, m)


def test_parameters_and_statistics_in_the_features_dtype() -> None:
    """A module kept in f16 (no f32 master): parameter gradients come back in f16."""
    n = 23
    f = _frame(n, 32, torch.float16, GARBAGE, seed=5)
    for key in ("weight", "bias", "running_mean", "running_var"):
        f[key] = f[key].half()
    got, want = _ours(f, MOMENTUM), _oracle(f, n, MOMENTUM)
    assert got["dw"].dtype == got["db"].dtype == got["rm"].dtype == torch.float16
    torch.testing.assert_close(got["y"][:n].double(), want["y"], atol=4e-3, rtol=2e-3)
    torch.testing.assert_close(got["dw"].double(), want["dw"], atol=2e-3, rtol=1e-3)
    torch.testing.assert_close(got["db"].double(), want["db"], atol=2e-3, rtol=1e-3)
    torch.testing.assert_close(got["rm"].double(), want["rm"], atol=2e-3, rtol=1e-3)
    torch.testing.assert_close(got["rv"].double(), want["rv"], atol=2e-3, rtol=1e-3)


def test_without_affine_or_running_statistics() -> None:
    n = 23
    f = _frame(n, 3, torch.float32, GARBAGE, seed=9)
    x = f["x"].clone().requires_grad_()
    y = masked_batch_norm(x, f["live"], None, None, None, None, MOMENTUM, EPS)
    y.backward(f["dy"])
    x64 = f["x"][:n].double().requires_grad_()
    y64 = F.batch_norm(x64, None, None, training=True, eps=EPS)
    y64.backward(f["dy"][:n].double())
    assert x.grad is not None and x64.grad is not None
    torch.testing.assert_close(y[:n].double(), y64, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(x.grad[:n].double(), x64.grad, atol=2e-5, rtol=2e-5)
    assert not y[n:].any() and not x.grad[n:].any()


def test_no_host_reads_forward_or_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing reads a device value back: the row count, the momentum, the statistics.

    The autograd engine runs the backward outside the caller's function mode,
    so the backward gets a mode of its own.
    """
    backward = batch_norm._MaskedBatchNorm.backward
    inner = HostReads()

    def watched(ctx: Any, *grads: Any) -> Any:
        with inner:
            return backward(ctx, *grads)

    monkeypatch.setattr(batch_norm._MaskedBatchNorm, "backward", staticmethod(watched))
    f = _frame(23, 32, torch.float16, GARBAGE, seed=13)
    x = f["x"].clone().requires_grad_()
    w = f["weight"].clone().requires_grad_()
    b = f["bias"].clone().requires_grad_()
    momentum = torch.full((1,), 0.25, device=DEVICE)
    rm, rv = f["running_mean"], f["running_var"]
    with HostReads() as outer:
        y = masked_batch_norm(x, f["live"], w, b, rm, rv, momentum, EPS)
        y.backward(f["dy"])
    assert "clamp" in outer.calls and "unbind" in inner.calls, "a mode saw nothing"
    assert outer.reads == [] and inner.reads == []
    assert x.grad is not None and x.grad[:23].any()


def test_bad_inputs_are_refused_by_name() -> None:
    f = _frame(3, 4, torch.float32, 0.0)
    args = (f["weight"], f["bias"], f["running_mean"], f["running_var"], MOMENTUM, EPS)
    with pytest.raises(TypeError, match="f16, bf16 and f32"):
        masked_batch_norm(f["x"].double(), f["live"], *args)
    with pytest.raises(ValueError, match="int32 row count"):
        masked_batch_norm(f["x"], f["live"].float(), *args)
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        masked_batch_norm(f["x"], f["live"], f["weight"][:3], *args[1:])
    with pytest.raises(ValueError, match=r"\(rows, channels\)"):
        masked_batch_norm(f["x"][None], f["live"], *args)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need CUDA")
def test_a_cuda_graph_replays_for_any_live_count() -> None:
    """Forward and backward recorded once, replayed for full, partial, one-row and empty frames."""
    rows, c = 4096, 96
    x = torch.zeros(rows, c, device=DEVICE, requires_grad=True)
    dy = torch.zeros(rows, c, device=DEVICE)
    live = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    momentum = torch.full((1,), MOMENTUM, device=DEVICE)
    w = torch.ones(c, device=DEVICE, requires_grad=True)
    b = torch.zeros(c, device=DEVICE, requires_grad=True)
    rm, rv = torch.zeros(c, device=DEVICE), torch.ones(c, device=DEVICE)

    def step() -> tuple[torch.Tensor, ...]:
        y = masked_batch_norm(x, live, w, b, rm, rv, momentum, EPS)
        return (y, *torch.autograd.grad(y, (x, w, b), dy))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile the kernels outside the recording
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = step()
    for n in (rows, 1000, 1, 0, 2):
        f = _frame(n, c, torch.float32, GARBAGE, rows=rows, seed=n)
        with torch.no_grad():
            x.copy_(f["x"])
            dy.copy_(f["dy"])
            live.copy_(f["live"])
            w.copy_(f["weight"])
            b.copy_(f["bias"])
            rm.copy_(f["running_mean"])
            rv.copy_(f["running_var"])
        graph.replay()
        got = dict(zip(("y", "dx", "dw", "db"), (t.clone() for t in outs), strict=True))
        want = _oracle(f, n, MOMENTUM)
        assert not got["y"][n:].any() and not got["dx"][n:].any()
        y_scale, dx_scale = _bounds(f, n)  # two close rows amplify x's rounding (n = 2)
        atol, rtol = TOL[torch.float32]
        _assert_within(got["y"][:n], want["y"], y_scale, atol, rtol, f"result, {n} rows")
        _assert_within(got["dx"][:n], want["dx"], dx_scale, atol, rtol, f"gradient, {n} rows")
        for key in ("dw", "db"):
            torch.testing.assert_close(got[key].double(), want[key], atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(rm.double(), want["rm"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(rv.double(), want["rv"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_the_module_on_a_padded_support_counts_its_live_rows(momentum: float | None) -> None:
    """``nn.BatchNorm`` in training on a captured call's support equals it on the live rows.

    Three batches of different live counts: with ``momentum=None`` the running
    statistics are the cumulative average, whose factor (1, 1/2, 1/3) stays on
    the device.
    """
    from torch_lattice import SparseTensor, nn
    from torch_lattice.ops.conv import schedule
    from torch_lattice.sparse import Support

    torch.manual_seed(0)
    padded, eager = (
        nn.BatchNorm(5, momentum=momentum).to(DEVICE),
        nn.BatchNorm(5, momentum=momentum),
    )
    eager = eager.to(DEVICE)
    coords = torch.stack([torch.zeros(ROWS), torch.arange(ROWS), *torch.zeros(2, ROWS)], 1)
    coords = coords.to(torch.int32).to(DEVICE)
    for n in (ROWS, 2, ROWS // 2):
        f = _frame(n, 5, torch.float32, GARBAGE, seed=n)
        live = torch.tensor([n], dtype=torch.int32, device=DEVICE)
        with schedule("triton"):
            got = padded(SparseTensor._make(Support(coords, (1, 1, 1), live), f["x"])).feats
        want = eager(SparseTensor(coords[:n], f["x"][:n])).feats
        torch.testing.assert_close(got[:n], want, atol=1e-5, rtol=1e-5)
        assert bool((got[n:] == 0).all())
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(padded, name), getattr(eager, name), msg=name)

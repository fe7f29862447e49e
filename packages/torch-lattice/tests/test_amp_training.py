"""Mixed-precision training keeps half activations; the eval batch norm is one pass.

Under ``torch.autocast`` a conv -> BatchNorm -> ReLU network must keep what
``torch.nn.BatchNorm1d`` / ``torch.relu`` networks (spconv's) keep for the
backward pass: one half copy per activation, f32 statistics, and the f32
master weights (which the model holds anyway) rather than half copies of
them.  The oracles are torch's own batch norm and relu under autocast, the
f32 network, and the batch norm formula; the saved bytes are counted with
``torch.autograd.graph.saved_tensors_hooks``.  The Triton path runs the same
checks (under ``TRITON_INTERPRET=1`` on small inputs without a GPU).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch_lattice import SparseTensor, nn, ops
from torch_lattice.ops.conv import schedule
from torch_lattice.ops.reference import available_devices, random_sparse

DEVICES = available_devices()
HALF = {"cpu": [torch.bfloat16, torch.float16], "cuda": [torch.float16, torch.bfloat16]}
TRITON = importlib.util.find_spec("triton") is not None
# The Triton path runs on CPU tensors only under the interpreter, which the root
# conftest turns on where there is no CUDA; with a GPU its CPU cases are the auto path's.
INTERPRETED = TRITON and not torch.cuda.is_available()


def _input(device: str, rows: int = 120, channels: int = 4, batch: int = 2) -> SparseTensor:
    g = torch.Generator().manual_seed(rows)
    x = random_sparse(g, rows, channels, batch=batch, extent=7)
    return SparseTensor(x.coords.to(device), x.feats.to(device))


class _Net(torch.nn.Module):
    """conv -> BN -> ReLU twice (a strided conv between) and a cat, ours or torch's norms."""

    def __init__(self, torch_norms: bool) -> None:
        super().__init__()
        self.a = nn.SubmConv3d(4, 16, 3, bias=False)
        self.b = nn.Conv3d(16, 16, 2, 2, bias=False)
        self.c = nn.SubmConv3d(32, 8, 3)
        norm: Callable[[int], torch.nn.Module] = (
            torch.nn.BatchNorm1d if torch_norms else nn.BatchNorm
        )
        self.norms = torch.nn.ModuleList([norm(16), norm(16), norm(8)])
        self.torch_norms = torch_norms

    def _block(self, i: int, y: SparseTensor) -> SparseTensor:
        if self.torch_norms:
            return y.with_feats(torch.relu(self.norms[i](y.feats)))
        return nn.ReLU()(self.norms[i](y))

    def forward(self, x: SparseTensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self._block(0, self.a(x))
        d = self._block(1, self.b(h))
        cat = h.with_feats(torch.cat([h.feats, h.feats * 0.5], dim=1))
        return self._block(2, self.c(cat)).feats, d.feats


def _loss(outs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """A fixed random projection of the outputs (a plain sum through a batch norm is ~0)."""
    g = torch.Generator().manual_seed(9)
    return sum(
        ((o.float() * torch.randn(o.shape, generator=g).to(o.device)).sum() for o in outs),
        torch.zeros(()),
    )


def _saved(net: torch.nn.Module, x: SparseTensor, dtype: torch.dtype) -> dict[str, int]:
    """Bytes autograd keeps for one autocast step: activations by dtype, and weight copies."""
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    found: dict[int, tuple[int, torch.dtype, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        found[storage.data_ptr()] = (storage.nbytes(), t.dtype, t.ndim)
        return t

    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with hooks, torch.autocast(x.device.type, dtype=dtype):
        outs = net(x)
    _loss(outs).backward()
    out: dict[str, int] = {}
    for ptr, (nbytes, dt, ndim) in found.items():
        key = "param" if ptr in params else "weight copy" if ndim == 5 else str(dt)
        if key == str(torch.float32) and ndim >= 2:
            key = "f32 rows"
        out[key] = out.get(key, 0) + nbytes
    return out


def _schedules(device: str) -> list[str]:
    if device == "cpu":
        return ["auto", "triton"] if INTERPRETED else ["auto"]
    return ["auto"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["auto", "triton"])
def test_autocast_step_saves_what_torch_norms_save(device: str, path: str) -> None:
    if path not in _schedules(device):
        pytest.skip("the Triton path runs on CUDA under auto, interpreted on CPU")
    dtype = HALF[device][0]
    torch.manual_seed(0)
    ours = _Net(torch_norms=False).to(device)
    peer = _Net(torch_norms=True).to(device)
    peer.load_state_dict(ours.state_dict(), strict=False)
    x = _input(device)
    with schedule(path):
        mine, theirs = _saved(ours, x, dtype), _saved(peer, x, dtype)
    # No f32 copy of any activation (the old path widened BN and ReLU inputs to f32),
    # no half copy of a weight, and the same half bytes as torch's own norm and relu.
    assert "f32 rows" not in mine, mine  # f32 statistics (C,) only, no (N, C) rows
    assert "weight copy" not in mine, mine
    assert mine[str(dtype)] == theirs[str(dtype)], (mine, theirs)


def _grads(
    net: torch.nn.Module, x: SparseTensor, path: str, dtype: torch.dtype | None
) -> dict[str, torch.Tensor]:
    net.zero_grad()
    device = x.device.type
    with schedule(path), torch.autocast(device, dtype=dtype or torch.float16, enabled=bool(dtype)):
        outs = net(x)
    _loss(outs).backward()
    return {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", ["auto", "triton"])
def test_autocast_step_matches_torch_norms_and_the_f32_step(device: str, path: str) -> None:
    if path not in _schedules(device):
        pytest.skip("the Triton path runs on CUDA under auto, interpreted on CPU")
    for dtype in HALF[device]:
        torch.manual_seed(1)
        ours = _Net(torch_norms=False).to(device)
        peer = _Net(torch_norms=True).to(device)
        peer.load_state_dict(ours.state_dict(), strict=False)
        x = _input(device)
        got, theirs, f32 = (
            _grads(ours, x, path, dtype),
            _grads(peer, x, path, dtype),
            _grads(ours, x, path, None),
        )
        for name, g in got.items():
            assert g.dtype == torch.float32, name  # f32 gradients reach the f32 masters
            if name == "c.bias":
                continue  # a bias before a batch norm has no gradient (rounding noise)
            scale = float(f32[name].abs().max())
            # the same arithmetic as torch's own norms under autocast
            assert float((g - theirs[name]).abs().max()) <= 1e-3 * scale, (name, dtype)
            # and the f32 step's gradient up to half-precision activations
            bound = 0.05 if dtype == torch.float16 else 0.5
            assert float((g - f32[name]).abs().max()) <= bound * scale, (name, dtype)


class _Casts(TorchDispatchMode):
    """Shapes of the dtype casts (``aten._to_copy``) run while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket is torch.ops.aten._to_copy:
            self.shapes.append(tuple(out.shape))
        return out


@pytest.mark.parametrize("device", DEVICES)
def test_an_autocast_conv_weight_gets_its_gradient_in_f32_without_a_cast(device: str) -> None:
    """The Triton path sums an autocast conv's weight gradient in f32 into its master.

    The backward pass casts no weight-shaped tensor (the half gradient and its
    cast back to f32 are gone), and the gradient is the reference path's, which
    computes it in f32 and rounds it through the half dtype, up to that rounding.
    """
    if device == "cpu" and not INTERPRETED:
        pytest.skip("the Triton path runs on CUDA under auto, interpreted on CPU")
    for dtype in HALF[device]:
        torch.manual_seed(4)
        conv = nn.SubmConv3d(4, 16, 3, bias=False).to(device)
        x = _input(device)
        grads, casts = {}, {}
        for path in ("triton", "tap_major"):
            conv.zero_grad()
            with schedule(path), torch.autocast(device, dtype=dtype):
                out = conv(x).feats
            proj = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
            loss = (out.float() * proj.to(device)).sum()
            with _Casts() as seen:
                loss.backward()
            assert conv.weight.grad is not None and conv.weight.grad.dtype == torch.float32
            grads[path] = conv.weight.grad.clone()
            casts[path] = [s for s in seen.shapes if s == tuple(conv.weight.shape)]
        assert casts["triton"] == [], casts["triton"]
        assert casts["tap_major"] != []  # the reference path still casts: the check can fail
        scale = float(grads["tap_major"].abs().max())
        eps = 1e-3 if dtype == torch.float16 else 8e-3  # one rounding to the half dtype
        assert float((grads["triton"] - grads["tap_major"]).abs().max()) <= 2 * eps * scale


@pytest.mark.parametrize("device", DEVICES)
def test_training_batch_norm_on_half_features_is_torch_batch_norm_1d(device: str) -> None:
    for dtype in HALF[device]:
        for rows in (2, 3, 517):
            torch.manual_seed(rows)
            ours, ref = nn.BatchNorm(6).to(device), torch.nn.BatchNorm1d(6).to(device)
            f = (torch.randn(rows, 6, device=device) * 3 + 2).to(dtype).requires_grad_()
            g = f.detach().clone().requires_grad_()
            with torch.autocast(device, dtype=dtype):
                y, r = ours(f), ref(g)
            assert y.dtype == dtype == r.dtype
            assert torch.equal(y, r)
            w = torch.randn(rows, 6, device=device)
            (y.float() * w).sum().backward()
            (r.float() * w).sum().backward()
            assert f.grad is not None and g.grad is not None
            assert torch.equal(f.grad, g.grad)
            for a, b in ((ours.weight.grad, ref.weight.grad), (ours.bias.grad, ref.bias.grad)):
                assert a is not None and b is not None and a.dtype == torch.float32
                torch.testing.assert_close(a, b)
            torch.testing.assert_close(ours.running_mean, ref.running_mean)
            torch.testing.assert_close(ours.running_var, ref.running_var)
        with pytest.raises(ValueError, match="at least 2 rows"):
            ours(torch.ones(1, 6, device=device, dtype=dtype))
        with pytest.raises(ValueError, match="at least 2 rows"):
            ours(torch.ones(0, 6, device=device, dtype=dtype))


def test_half_model_batch_norm_keeps_half_buffers_and_f32_arithmetic() -> None:
    torch.manual_seed(3)
    bn = nn.BatchNorm(5).half()
    ref = torch.nn.BatchNorm1d(5)
    f = torch.randn(40, 5).half()
    y = bn(f)
    r = ref(f.float())
    assert y.dtype == torch.float16 and bn.running_mean.dtype == torch.float16
    torch.testing.assert_close(y.float(), r, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(bn.running_var.float(), ref.running_var, atol=1e-3, rtol=1e-3)


def _formula(
    x: torch.Tensor,
    s: torch.Tensor,
    b: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    eps: float = 1e-3,
) -> torch.Tensor:
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = (x.to(acc) - m.to(acc)) * torch.rsqrt(v.to(acc) + eps) * s.to(acc) + b.to(acc)
    return y.to(x.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_eval_batch_norm_is_the_formula_in_one_pass(device: str, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(4)
    for rows in (0, 1, 2, 1000):
        x = (torch.randn(rows, 7, generator=g) * 4 - 1).to(device, dtype)
        for params in (torch.float32, dtype):
            s, b, m = (torch.randn(7, generator=g).to(device, params) for _ in range(3))
            v = (torch.rand(7, generator=g) + 0.05).to(device, params)
            y = ops.batch_norm(x, s, b, m, v, eps=1e-3)
            ref = _formula(x, s, b, m, v)
            assert y.dtype == dtype and y.shape == (rows, 7)
            # torch evaluates the same f32 expression in another order: one unit in the
            # last place of the stored dtype at most (f32 rows: a few f32 units).
            ulp = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(dtype, 5e-6)
            torch.testing.assert_close(y, ref, atol=ulp * 4, rtol=ulp)
    with pytest.raises(ValueError):
        ops.batch_norm(x, s[:3], b, m, v, eps=1e-3)


def test_eval_batch_norm_gradients_in_f64() -> None:
    g = torch.Generator().manual_seed(5)
    x, s, b, m = (torch.randn(n, generator=g, dtype=torch.float64) for n in ((9, 3), 3, 3, 3))
    v = torch.rand(3, generator=g, dtype=torch.float64) + 0.1
    args = tuple(t.requires_grad_() for t in (x, s, b, m, v))
    assert torch.autograd.gradcheck(lambda *a: ops.batch_norm(*a, eps=1e-3), args)


@pytest.mark.parametrize("device", DEVICES)
def test_eval_batch_norm_module_on_half_features_reads_f32_statistics(device: str) -> None:
    bn = nn.BatchNorm(4).to(device).eval()
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([1000.3, -2.7, 0.1, 5.0]))
        bn.running_var.copy_(torch.tensor([3.3, 0.2, 1.0, 9.0]))
        bn.weight.copy_(torch.tensor([1.5, -0.5, 2.0, 1.0]))
    sparse = _input(device, 300)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(sparse.num_rows, 4, generator=g).to(device)
    x = (x * bn.running_var.sqrt() + bn.running_mean).half()  # rows about each channel's mean
    with torch.no_grad():
        y = bn(sparse.with_feats(x))
    ref = _formula(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps)
    # The f32 statistics are used as they are: the mean 1000.3 rounded to f16 first
    # (1000.5, the old path) would shift the first channel by 0.2 * 1.5 / sqrt(3.3).
    torch.testing.assert_close(y.feats, ref, atol=2e-3, rtol=1e-3)
    assert y.feats.dtype == torch.float16


@pytest.mark.parametrize("device", DEVICES)
def test_relu_in_half_is_the_f32_relu_rounded(device: str) -> None:
    for dtype in HALF[device]:
        x = torch.randn(64, 5, device=device).to(dtype)
        x[0, 0] = -0.0
        x = x.requires_grad_()
        y = ops.activation(x, kind="relu")
        assert y.dtype == dtype and torch.equal(y, F.relu(x.float()).to(dtype))
        y.float().sum().backward()
        assert x.grad is not None and torch.equal(x.grad, (x > 0).to(dtype))
    empty = ops.activation(torch.zeros(0, 3, device=device, dtype=torch.float16), kind="relu")
    assert empty.shape == (0, 3)


ACTIVATIONS = [
    {"kind": "leaky_relu", "alpha": 0.1},
    {"kind": "gelu"},
    {"kind": "gelu", "approximate": "tanh"},
    {"kind": "gelu", "approximate": "fast"},
    {"kind": "silu"},
    {"kind": "sigmoid"},
    {"kind": "tanh"},
    {"kind": "softplus", "beta": 2.0, "threshold": 5.0},
    {"kind": "elu", "alpha": 0.7},
    {"kind": "hardswish"},
    {"kind": "identity"},
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("attrs", ACTIVATIONS, ids=lambda a: "-".join(map(str, a.values())))
def test_half_activation_keeps_the_half_input_only(device: str, attrs: dict[str, Any]) -> None:
    for dtype in HALF[device]:
        for rows in (0, 1, 300):
            g = torch.Generator().manual_seed(rows)
            x = (torch.randn(rows, 5, generator=g) * 3).to(device, dtype).requires_grad_()
            ref_x = x.detach().clone().requires_grad_()
            saved: list[torch.Tensor] = []

            def pack(t: torch.Tensor, keep: list[torch.Tensor] = saved) -> torch.Tensor:
                keep.append(t)
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                y = ops.activation(x, **attrs)
            # the old arithmetic: widen, activate in f32 with autograd, round once
            v = ref_x.float()
            ref = ops.activation(v, **attrs).to(dtype)
            assert y.dtype == dtype and torch.equal(y, ref)
            assert all(t.dtype == dtype for t in saved), [t.dtype for t in saved]
            w = torch.randn(rows, 5, generator=g).to(device, dtype)
            (y * w).float().sum().backward()
            (ref * w).float().sum().backward()
            assert x.grad is not None and ref_x.grad is not None
            assert torch.equal(x.grad, ref_x.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_under_autocast_keeps_half_features_and_the_master(device: str) -> None:
    for dtype in HALF[device]:
        for rows in (0, 1, 257):
            torch.manual_seed(rows)
            lin = nn.Linear(6, 3).to(device)
            x = torch.randn(rows, 6, device=device).to(dtype).requires_grad_()
            params = {p.untyped_storage().data_ptr() for p in lin.parameters()}
            saved: list[torch.Tensor] = []

            def pack(t: torch.Tensor, keep: list[torch.Tensor] = saved) -> torch.Tensor:
                keep.append(t)
                return t

            hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
            with hooks, torch.autocast(device, dtype=dtype):
                y = lin(x)
            # the half features and the f32 parameter itself: no f32 copy of the rows,
            # no half copy of the weight
            assert [t.dtype for t in saved] == [dtype, torch.float32]
            assert saved[1].untyped_storage().data_ptr() in params
            # the old arithmetic: f32 products of the half operands, rounded once
            assert lin.bias is not None
            ref_x = x.detach().clone().requires_grad_()
            ref_w = lin.weight.detach().clone().requires_grad_()
            ref_b = lin.bias.detach().clone().requires_grad_()
            ref = (ref_x.float() @ ref_w.to(dtype).float().t() + ref_b.to(dtype).float()).to(dtype)
            assert y.dtype == dtype and torch.equal(y, ref)
            w = torch.randn(rows, 3, device=device)
            (y.float() * w).sum().backward()
            (ref.float() * w).sum().backward()
            assert x.grad is not None and ref_x.grad is not None
            torch.testing.assert_close(x.grad, ref_x.grad)
            for got, want in ((lin.weight.grad, ref_w.grad), (lin.bias.grad, ref_b.grad)):
                assert got is not None and want is not None and got.dtype == torch.float32
                torch.testing.assert_close(got, want)


@pytest.mark.skipif(not TRITON, reason="the Triton path needs triton")
def test_autocast_weight_copy_is_the_layout_the_kernels_read() -> None:
    from torch_lattice._master import half_copy, restore_weight, weight_to_save
    from torch_lattice.triton.conv import _taps

    w = torch.randn(8, 3, 3, 3, 5, requires_grad=True)
    copy = half_copy(w, torch.float16)
    assert copy.shape == w.shape and torch.equal(copy, w.detach().half())
    # the kernels' (K, C_in, C_out) operand is the copy itself, not one more copy
    taps = _taps(copy, torch.float16)
    assert taps.untyped_storage().data_ptr() == copy.untyped_storage().data_ptr()
    assert torch.equal(taps, w.detach().half().reshape(8, -1, 5).permute(1, 2, 0))
    # a conv saves the master and gets the copy's values back in backward
    saved, dtype = weight_to_save(copy)
    assert saved is w and dtype == torch.float16
    assert torch.equal(restore_weight(saved, dtype), copy)
    assert weight_to_save(w) == (w, None)
    copy.float().sum().backward()
    assert w.grad is not None and w.grad.dtype == torch.float32
    assert torch.equal(w.grad, torch.ones_like(w))

"""Feature-only ops: torch reference formulas, f32 accumulation for half storage, errors."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch_lattice import ops
from torch_lattice._trace import tracing
from torch_lattice.ops.reference import available_devices, random_sparse

DEVICES = available_devices()


@pytest.mark.parametrize("device", DEVICES)
def test_activations_follow_torch_conventions(device: str) -> None:
    x = torch.linspace(-6, 6, 97, device=device)[:, None].repeat(1, 2)
    cases: list[tuple[str, dict[str, Any], torch.Tensor]] = [
        ("relu", {}, F.relu(x)),
        ("leaky_relu", {"alpha": 0.2}, F.leaky_relu(x, 0.2)),
        ("gelu", {}, F.gelu(x)),
        ("gelu", {"approximate": "tanh"}, F.gelu(x, approximate="tanh")),
        ("gelu", {"approximate": "precise"}, F.gelu(x)),  # upstream's name for the erf form
        ("gelu", {"approximate": "fast"}, x * torch.sigmoid(1.702 * x)),
        ("silu", {}, F.silu(x)),
        ("sigmoid", {}, torch.sigmoid(x)),
        ("tanh", {}, torch.tanh(x)),
        ("softplus", {"beta": 2.0, "threshold": 3.0}, F.softplus(x, 2.0, 3.0)),
        ("elu", {"alpha": 0.7}, F.elu(x, 0.7)),
        ("hardswish", {}, x * F.relu6(x + 3) / 6),
        ("identity", {}, x),
    ]
    for kind, kw, expected in cases:
        torch.testing.assert_close(ops.activation(x, kind=kind, **kw), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_norms_and_softmax(device: str) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 6, generator=g).to(device)
    s, b = torch.rand(6, generator=g).to(device), torch.randn(6, generator=g).to(device)
    m, v = torch.randn(6, generator=g).to(device), torch.rand(6, generator=g).to(device) + 0.1
    torch.testing.assert_close(
        ops.batch_norm(x, s, b, m, v, eps=1e-3), (x - m) / torch.sqrt(v + 1e-3) * s + b
    )
    torch.testing.assert_close(ops.layer_norm(x, s, b, eps=1e-5), F.layer_norm(x, (6,), s, b, 1e-5))
    torch.testing.assert_close(
        ops.rms_norm(x, s, eps=1e-6), x / torch.sqrt((x * x).mean(1, keepdim=True) + 1e-6) * s
    )
    torch.testing.assert_close(ops.softmax(x), torch.softmax(x, 1))
    torch.testing.assert_close(ops.softmax(x, axis=1), torch.softmax(x, 1))
    with pytest.raises(ValueError, match="axis must be -1 or 1"):
        ops.softmax(x, axis=0)


def test_half_storage_accumulates_in_f32() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 256, generator=g).half()
    w = torch.randn(8, 256, generator=g).half()
    out = ops.linear(x, w)
    assert out.dtype == torch.float16
    exact = (x.double() @ w.double().t()).half()
    assert torch.equal(out, (x.float() @ w.float().t()).half())
    assert (
        float((out.double() - exact.double()).abs().max())
        <= float(exact.double().abs().max()) * 1e-3
    )


def test_feature_op_errors() -> None:
    x = torch.randn(4, 3)
    sparse = random_sparse(torch.Generator().manual_seed(2), 5, 3)
    with pytest.raises(TypeError, match="with_feats"):
        ops.activation(sparse, kind="relu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        ops.activation(x, kind="swish")
    with pytest.raises(ValueError, match=r"\(N, C\)"):
        ops.softmax(x[0])
    with pytest.raises(ValueError, match="linear_o_i"):
        ops.linear(x, torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"must be \(3,\)"):
        ops.layer_norm(x, torch.ones(4), torch.zeros(3), eps=1e-5)
    with pytest.raises(ValueError, match="eps"):
        ops.rms_norm(x, torch.ones(3), eps=0.0)


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, inspect.BoundArguments]] = []

    def record(self, op_name, fn, bound_arguments, result) -> None:
        self.calls.append((op_name, bound_arguments))


def test_tracer_sees_outermost_public_calls_only() -> None:
    from torch_lattice import nn

    x = random_sparse(torch.Generator().manual_seed(3), 20, 4)
    model = nn.Sequential(nn.SubmConv3d(4, 4, 3), nn.ReLU(), nn.Linear(4, 2))
    rec = _Recorder()
    with tracing(rec):
        model(x)
    names = [n for n, _ in rec.calls]
    assert names == [
        "subm_conv3d",
        "activation",
        "sparse.with_features",
        "linear",
        "sparse.with_features",
    ]
    conv_args = rec.calls[0][1].arguments
    assert conv_args["kernel_size"] == (3, 3, 3) and conv_args["input"] is x
    rec2 = _Recorder()
    ops.softmax(x.feats)  # no tracer: nothing recorded, nothing fails
    assert rec2.calls == []

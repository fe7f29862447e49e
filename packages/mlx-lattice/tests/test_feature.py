"""Feature-only ops against torch.nn.functional as the oracle."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from lattice_contract.dialect import ActivationKind, GeluApprox
from mlx_lattice.ops.feature import (
    activation,
    batch_norm,
    layer_norm,
    linear,
    rms_norm,
    softmax,
)
from numpy.typing import NDArray

DTYPES = {
    "f32": (mx.float32, torch.float32),
    "f16": (mx.float16, torch.float16),
    "bf16": (mx.bfloat16, torch.bfloat16),
}
TOL = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1.6e-2, 1.6e-2)}


def data(shape: tuple[int, ...], seed: int = 0, scale: float = 3.0) -> NDArray[np.float32]:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def to_mx(a: NDArray[np.float32], dtype: str) -> mx.array:
    return mx.array(a).astype(DTYPES[dtype][0])


def to_torch(a: NDArray[np.float32], dtype: str) -> torch.Tensor:
    """The same stored values in torch, computed in f32 as our ops do."""
    return torch.from_numpy(a).to(DTYPES[dtype][1]).float()


def check(got: mx.array, want: torch.Tensor, dtype: str) -> None:
    assert got.dtype == DTYPES[dtype][0]
    atol, rtol = TOL[dtype]
    # torch reference in f32, rounded to the storage dtype like the op's result.
    ref = want.to(DTYPES[dtype][1]).float().numpy()
    np.testing.assert_allclose(np.array(got.astype(mx.float32)), ref, atol=atol, rtol=rtol)


ACTIVATIONS: list[tuple[str, dict[str, object], Callable[[torch.Tensor], torch.Tensor]]] = [
    ("relu", {}, F.relu),
    ("leaky_relu", {"alpha": 0.2}, lambda t: F.leaky_relu(t, 0.2)),
    ("gelu", {}, F.gelu),
    ("gelu", {"approximate": "tanh"}, lambda t: F.gelu(t, approximate="tanh")),
    ("silu", {}, F.silu),
    ("sigmoid", {}, torch.sigmoid),
    ("tanh", {}, torch.tanh),
    ("softplus", {}, F.softplus),
    ("softplus", {"beta": 2.0, "threshold": 3.0}, lambda t: F.softplus(t, beta=2.0, threshold=3.0)),
    (
        "softplus",
        {"beta": -1.5, "threshold": 4.0},
        lambda t: F.softplus(t, beta=-1.5, threshold=4.0),
    ),
    ("elu", {"alpha": 1.0}, F.elu),
    ("elu", {"alpha": 0.3}, lambda t: F.elu(t, alpha=0.3)),
    ("hardswish", {}, F.hardswish),
    ("identity", {}, lambda t: t),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("kind", "params", "ref"), ACTIVATIONS)
def test_activation_matches_torch(
    kind: str, params: dict[str, object], ref: Callable[[torch.Tensor], torch.Tensor], dtype: str
) -> None:
    x = data((64, 12), seed=1, scale=4.0)
    x[0, :6] = [-3.0, 0.0, 3.0, 10.0, -10.0, 25.0]  # kinks and thresholds
    got = activation(to_mx(x, dtype), kind=kind, **params)  # type: ignore[arg-type]
    check(got, ref(to_torch(x, dtype)), dtype)


def test_activation_accepts_enum_members() -> None:
    x = mx.array(data((4, 3)))
    a = activation(x, kind=ActivationKind.gelu, approximate=GeluApprox.tanh)
    b = activation(x, kind="gelu", approximate="tanh")
    assert mx.array_equal(a, b)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_linear_matches_torch(dtype: str) -> None:
    x, w, b = data((37, 24), 1), data((16, 24), 2, 0.3), data((16,), 3)
    got = linear(to_mx(x, dtype), to_mx(w, dtype), to_mx(b, dtype))
    check(got, F.linear(to_torch(x, dtype), to_torch(w, dtype), to_torch(b, dtype)), dtype)
    no_bias = linear(to_mx(x, dtype), to_mx(w, dtype))
    check(no_bias, F.linear(to_torch(x, dtype), to_torch(w, dtype)), dtype)


def test_linear_accumulates_in_f32() -> None:
    # 2048 + 1 + 1 + ...: an f16 running sum stays at 2048 (spacing 2 there).
    x = mx.array(np.array([[2048.0] + [1.0] * 62 + [0.0]], dtype=np.float16))
    w = mx.ones((1, 64), dtype=mx.float16)
    assert linear(x, w).astype(mx.float32).item() == 2048.0 + 62.0


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_batch_norm_matches_torch(dtype: str) -> None:
    c = 10
    x, scale, bias, mean = data((50, c), 1), data((c,), 2), data((c,), 3), data((c,), 4)
    var = np.abs(data((c,), 5)) + 0.1
    args: list[np.ndarray] = [scale, bias, mean, var]
    got = batch_norm(to_mx(x, dtype), *(mx.array(a) for a in args), eps=1e-3)
    want = F.batch_norm(
        to_torch(x, dtype),
        torch.from_numpy(mean),
        torch.from_numpy(var),
        torch.from_numpy(scale),
        torch.from_numpy(bias),
        training=False,
        eps=1e-3,
    )
    check(got, want, dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_layer_norm_and_rms_norm_match_torch(dtype: str) -> None:
    c = 17
    x, scale, bias = data((40, c), 1) + 5.0, data((c,), 2), data((c,), 3)
    got = layer_norm(to_mx(x, dtype), mx.array(scale), mx.array(bias), eps=1e-5)
    want = F.layer_norm(
        to_torch(x, dtype), (c,), torch.from_numpy(scale), torch.from_numpy(bias), 1e-5
    )
    check(got, want, dtype)
    got = layer_norm(to_mx(x, dtype), None, None, eps=1e-5)
    check(got, F.layer_norm(to_torch(x, dtype), (c,), eps=1e-5), dtype)
    got = rms_norm(to_mx(x, dtype), mx.array(scale), eps=1e-6)
    check(got, F.rms_norm(to_torch(x, dtype), (c,), torch.from_numpy(scale), 1e-6), dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_softmax_matches_torch(dtype: str) -> None:
    x = data((30, 9), 1, 10.0)
    check(softmax(to_mx(x, dtype)), torch.softmax(to_torch(x, dtype), dim=-1), dtype)


def test_feature_ops_keep_leading_axes() -> None:
    x = mx.array(data((2, 5, 4)))
    w = mx.array(data((3, 4)))
    assert linear(x, w).shape == (2, 5, 3)
    assert softmax(x).shape == (2, 5, 4)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: linear(mx.ones((3, 4)), mx.ones((5, 3))), ValueError, r"\(C_out, 4\)"),
        (lambda: linear(mx.ones((3, 4)), mx.ones((5, 4)), mx.ones((4,))), ValueError, r"\(5,\)"),
        (lambda: linear(mx.ones((3, 4), dtype=mx.int32), mx.ones((5, 4))), TypeError, "float32"),
        (lambda: linear(np.ones((3, 4)), mx.ones((5, 4))), TypeError, "mx.array"),  # type: ignore[arg-type]
        (lambda: activation(mx.ones((2, 2)), kind="swish"), ValueError, "relu"),
        (lambda: activation(mx.ones((2, 2)), kind="gelu", approximate="erf"), ValueError, "tanh"),
        (lambda: activation(mx.ones((2, 2)), kind="softplus", beta=0.0), ValueError, "beta"),
        (
            lambda: batch_norm(mx.ones((2, 3)), *(mx.ones((3,)),) * 3, mx.ones((4,))),
            ValueError,
            "var",
        ),
        (lambda: layer_norm(mx.ones((2, 3)), mx.ones((3,)), None, eps=0.0), ValueError, "eps"),
        (lambda: rms_norm(mx.ones((2, 3)), mx.ones((2, 3))), ValueError, "scale"),
        (lambda: softmax(mx.array(1.0)), ValueError, "rank"),
    ],
)
def test_bad_inputs(call: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()

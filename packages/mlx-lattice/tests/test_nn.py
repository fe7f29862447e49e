"""mlx_lattice.nn: parameter names/shapes, torch-shaped state dicts, wiring to the ops."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
import torch
from lattice_contract.dialect import ActivationKind
from mlx_lattice import SparseTensor, nn, ops
from mlx_lattice.ops.quant import QuantizedWeight


def sparse(
    seed: int = 0, channels: int = 4, stride: int = 1, dtype: mx.Dtype = mx.float32
) -> SparseTensor:
    rng = np.random.default_rng(seed)
    cells = np.array(list(itertools.product(range(2), range(5), range(5), range(5))), np.int32)
    cells = cells[rng.random(len(cells)) < 0.4]
    coords = cells * np.array([1, stride, stride, stride], np.int32)
    feats = rng.standard_normal((len(cells), channels)).astype(np.float32)
    return SparseTensor(mx.array(coords), mx.array(feats).astype(dtype), stride=stride)


def shapes(module: nn.LatticeModule) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_running_statistics_are_frozen_and_sequential_indexes_like_torch() -> None:
    # Parameter names and shapes on both runtimes: test_nn_declared.py.
    model = nn.Sequential(nn.SubmConv3d(4, 8, 3), nn.BatchNorm(8), nn.ReLU())
    trainable = _trainable(model)
    assert "1.running_mean" not in trainable and "1.weight" in trainable
    assert model[1] is model.layers[1] and model[-1] is model.layers[2]


def _trainable(module: nn.LatticeModule) -> set[str]:
    """The dotted names of a module's trainable parameters."""
    from mlx.utils import tree_flatten

    flat = tree_flatten(module.trainable_parameters())
    assert isinstance(flat, list)
    return {key for key, _ in flat}


def test_torch_state_dict_loads_one_to_one_and_matches_torch() -> None:
    """A torch Sequential's state dict (with num_batches_tracked) drives the same MLX model."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(
        torch.nn.Linear(6, 12),
        torch.nn.BatchNorm1d(12),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Linear(12, 7, bias=False),
        torch.nn.LayerNorm(7),
        torch.nn.SiLU(),
        torch.nn.RMSNorm(7, eps=1e-6),
        torch.nn.Softplus(beta=2.0, threshold=5.0),
    )
    bn, ln, rms = ref[1], ref[4], ref[6]
    assert isinstance(bn, torch.nn.BatchNorm1d) and bn.running_mean is not None
    assert isinstance(ln, torch.nn.LayerNorm) and isinstance(rms, torch.nn.RMSNorm)
    assert bn.running_var is not None and rms.weight is not None
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        ln.weight.uniform_(0.5, 1.5)
        rms.weight.uniform_(0.5, 1.5)
    ref.eval()
    model = nn.Sequential(
        nn.Linear(6, 12),
        nn.BatchNorm(12),
        nn.GELU(approximate="tanh"),
        nn.Linear(12, 7, bias=False),
        nn.LayerNorm(7),
        nn.SiLU(),
        nn.RMSNorm(7, eps=1e-6),
        nn.Softplus(beta=2.0, threshold=5.0),
    )
    state = {k: v.numpy() for k, v in ref.state_dict().items()}
    assert "1.num_batches_tracked" in state
    model.load_state_dict(state)
    x = np.random.default_rng(1).standard_normal((50, 6)).astype(np.float32)
    with torch.no_grad():
        want = ref(torch.from_numpy(x)).numpy()
    got = model(mx.array(x))
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    # On a sparse value the same model maps features and keeps the support.
    s = SparseTensor(
        mx.array(np.c_[np.zeros(50), np.arange(50), np.zeros((50, 2))].astype(np.int32)),
        mx.array(x),
    )
    out = model(s)
    assert isinstance(out, SparseTensor) and out.cache is s.cache
    np.testing.assert_allclose(np.array(out.feats), want, rtol=1e-5, atol=1e-5)


def test_conv_weight_from_torch_conv3d_layout() -> None:
    """A dense torch Conv3d weight (C_out, C_in, kx, ky, kz) loads after moving C_in last."""
    conv = torch.nn.Conv3d(4, 6, 3, bias=True)
    bias = conv.bias
    assert bias is not None
    module = nn.SubmConv3d(4, 6, 3)
    module.load_state_dict(
        {
            "weight": conv.weight.detach().permute(0, 2, 3, 4, 1).numpy(),
            "bias": bias.detach().numpy(),
        }
    )
    x = sparse(2, 4)
    # Dense reference on the grid restricted to the support (subm, K=3, centred).
    grid = np.zeros((2, 4, 7, 7, 7), np.float32)
    c = np.array(x.coords)
    grid[c[:, 0], :, c[:, 1] + 1, c[:, 2] + 1, c[:, 3] + 1] = np.array(x.feats)
    with torch.no_grad():
        dense = conv(torch.from_numpy(grid)).numpy()
    want = dense[c[:, 0], :, c[:, 1], c[:, 2], c[:, 3]]
    np.testing.assert_allclose(np.array(module(x).feats), want, rtol=1e-4, atol=1e-5)


def test_load_state_dict_rejects_mismatches_without_changing_anything() -> None:
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm(3))
    before = {k: np.array(v) for k, v in model.state_dict().items()}
    good = {k: np.zeros(v.shape, np.float32) for k, v in before.items()}
    with pytest.raises(ValueError, match=r"'0.weight' has shape \(4, 3\).*\(3, 4\)"):
        model.load_state_dict({**good, "0.weight": np.zeros((4, 3), np.float32)})
    with pytest.raises(ValueError, match=r"missing: 1\.running_var"):
        model.load_state_dict({k: v for k, v in good.items() if k != "1.running_var"})
    with pytest.raises(ValueError, match=r"unexpected: 2\.weight"):
        model.load_state_dict({**good, "2.weight": np.zeros(3, np.float32)})
    with pytest.raises(TypeError, match="cannot be converted"):
        model.load_state_dict({**good, "0.bias": object()})
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(np.array(v), before[k])
    model.load_state_dict({"0.bias": np.ones(3, np.float32)}, strict=False)
    np.testing.assert_array_equal(np.array(model[0].bias), np.ones(3))


def test_conv_modules_call_the_ops() -> None:
    x = sparse(3, 4)
    conv = nn.Conv3d(4, 5, 3, stride=2, padding=1)
    y = conv(x)
    ref = ops.conv3d(x, conv.weight, conv.bias, kernel_size=3, stride=2, padding=1)
    assert y.stride == (2, 2, 2)
    np.testing.assert_array_equal(np.array(y.coords), np.array(ref.coords))
    np.testing.assert_allclose(np.array(y.feats), np.array(ref.feats), rtol=1e-6)

    target = nn.TargetConv3d(4, 5, 3, stride=2, padding=1)
    target.load_state_dict(conv.state_dict())
    t = target(x, y)
    np.testing.assert_allclose(np.array(t.feats), np.array(y.feats), rtol=1e-6, atol=1e-6)

    up = nn.TargetConvTranspose3d(5, 4, 3, stride=2, padding=1, bias=False)
    back = up(y, x)
    assert back.stride == (1, 1, 1) and back.cache is x.cache
    free = nn.ConvTranspose3d(5, 4, 3, stride=2, padding=1, bias=False)
    free.load_state_dict(up.state_dict())
    assert free(y).num_rows >= x.num_rows

    gen = nn.GenerativeConvTranspose3d(5, 2, 2, stride=2)
    g = gen(y)
    assert g.stride == (1, 1, 1) and g.num_rows == 8 * y.num_rows

    subm = nn.SubmConv3d(4, 4, 1, bias=False)
    lin = nn.Linear(4, 4, bias=False)
    lin.load_state_dict({"weight": np.array(subm.weight).reshape(4, 4)})
    rows = lin(x)
    assert isinstance(rows, SparseTensor)
    np.testing.assert_allclose(np.array(subm(x).feats), np.array(rows.feats), rtol=1e-6, atol=1e-6)


def test_pool_modules() -> None:
    x = sparse(4, 3, stride=2)
    assert nn.MaxPool3d(2).stride == (2, 2, 2)  # torch.nn default: stride = kernel
    for module, mode in (
        (nn.MaxPool3d(2), "max"),
        (nn.AvgPool3d(2), "avg"),
        (nn.SumPool3d(2, stride=1), "sum"),
    ):
        got = module(x)
        ref = ops.pool3d(x, mode=mode, kernel_size=2, stride=module.stride)
        np.testing.assert_array_equal(np.array(got.feats), np.array(ref.feats))
    g = nn.GlobalPool("avg")(x)
    assert g.shape == (2, 3)
    np.testing.assert_allclose(np.array(g), np.array(ops.global_pool(x, mode="avg", batch_size=2)))
    assert nn.GlobalPool("sum", batch_size=4)(x).shape == (4, 3)


@pytest.mark.parametrize("bits", [4, 8])
def test_quantized_modules(bits: int) -> None:
    x = sparse(5, 32)
    conv = nn.SubmConv3d(32, 8, 3)
    dense_out = np.array(conv(x).feats)
    conv.quantize(bits=bits, group_size=32)
    assert conv.quantized and isinstance(conv.weight_operand(), QuantizedWeight)
    assert shapes(conv) == {  # upstream's stored layout: (K, words, C_out) for K > 1
        "weight": (27, 32 * bits // 32, 8),
        "scales": (27, 1, 8),
        "biases": (27, 1, 8),
        "bias": (8,),
    }
    assert _trainable(conv) == {"bias"}
    q_out = np.array(conv(x).feats)
    deq = ops.subm_conv3d(x, conv.weight_operand().dequantize(), conv.bias, kernel_size=3)  # type: ignore[union-attr]
    np.testing.assert_allclose(q_out, np.array(deq.feats), rtol=1e-4, atol=1e-4)
    tol = 0.5 if bits == 4 else 0.05
    assert np.max(np.abs(q_out - dense_out)) < tol * np.max(np.abs(dense_out))
    # A packed state dict loads into a module quantized the same way, and not into a dense one.
    fresh = nn.SubmConv3d(32, 8, 3)
    with pytest.raises(ValueError, match="quantize"):
        fresh.load_state_dict(conv.state_dict())
    fresh.quantize(bits=bits, group_size=32)
    fresh.load_state_dict(conv.state_dict())
    np.testing.assert_array_equal(np.array(fresh(x).feats), q_out)
    with pytest.raises(ValueError, match="already quantized"):
        fresh.quantize()

    lin = nn.Linear(64, 3)
    lin.quantize(bits=bits, group_size=64)
    f = mx.array(np.random.default_rng(0).standard_normal((10, 64)).astype(np.float32))
    ref = ops.linear(f, lin.weight_operand().dequantize(), lin.bias)  # type: ignore[union-attr]
    np.testing.assert_allclose(np.array(lin(f)), np.array(ref), rtol=1e-4, atol=1e-4)


def test_points_and_algebra_modules() -> None:
    rng = np.random.default_rng(6)
    pts = mx.array(rng.uniform(0, 2, (100, 3)).astype(np.float32))
    feats = mx.array(rng.standard_normal((100, 3)).astype(np.float32))
    batch = mx.zeros((100,), mx.int32)
    vox = nn.Voxelize(0.5, "max")(pts, feats, batch)
    np.testing.assert_array_equal(
        np.array(vox.feats),
        np.array(ops.voxelize(pts, feats, batch, voxel_size=0.5, reduction="max").feats),
    )
    back = nn.Devoxelize(0.5, "nearest")(vox, pts, batch)
    assert back.shape == (100, 3)
    doubled = nn.SparseAdd()(vox, vox)
    np.testing.assert_array_equal(np.array(doubled.feats), 2 * np.array(vox.feats))
    assert nn.SparseCat("outer")(vox, vox).num_channels == 6
    assert nn.SparseCat().join.value == "outer" and nn.SparseAdd().join.value == "outer"
    moved = nn.SparseReindex()(vox, doubled)
    np.testing.assert_array_equal(np.array(moved.feats), np.array(vox.feats))
    assert nn.SparseBinary("max", "left")(vox, vox).num_rows == vox.num_rows


@pytest.mark.parametrize(
    ("module", "kind", "params"),
    [
        (nn.ReLU(), "relu", {}),
        (nn.LeakyReLU(0.2), "leaky_relu", {"alpha": 0.2}),
        (nn.GELU(), "gelu", {}),
        (nn.GELU("tanh"), "gelu", {"approximate": "tanh"}),
        (nn.SiLU(), "silu", {}),
        (nn.Sigmoid(), "sigmoid", {}),
        (nn.Tanh(), "tanh", {}),
        (nn.Softplus(2.0, 3.0), "softplus", {"beta": 2.0, "threshold": 3.0}),
        (nn.ELU(0.5), "elu", {"alpha": 0.5}),
        (nn.Hardswish(), "hardswish", {}),
        (nn.Identity(), "identity", {}),
        (nn.Activation(ActivationKind.elu, alpha=2.0), "elu", {"alpha": 2.0}),
    ],
)
def test_activation_modules(module: nn.Activation, kind: str, params: dict[str, object]) -> None:
    x = sparse(7, 5, dtype=mx.float16)
    got = module(x)
    assert isinstance(got, SparseTensor) and got.dtype == mx.float16
    want = ops.activation(x.feats, kind=kind, **params)  # type: ignore[arg-type]
    np.testing.assert_array_equal(np.array(got.feats), np.array(want))
    assert module.state_dict() == {}


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: nn.Linear(0, 3), ValueError, "in_features"),
        (lambda: nn.Conv3d(4, -1, 3), ValueError, "out_channels"),
        (lambda: nn.Conv3d(4, 4, (3, 3)), ValueError, "kernel_size"),
        (lambda: nn.GlobalPool("median"), ValueError, "'max'"),
        (lambda: nn.RMSNorm(8, eps=0), ValueError, r"^RMSNorm: eps must be a positive finite"),
        (lambda: nn.LayerNorm(8, eps=-1), ValueError, r"^LayerNorm: eps must be a positive"),
        (lambda: nn.BatchNorm(8, eps=float("nan")), ValueError, r"^BatchNorm: eps must be"),
        (lambda: nn.BatchNorm(8, eps="1e-5"), TypeError, "BatchNorm: eps"),  # type: ignore[arg-type]
        (lambda: nn.Sequential(nn.ReLU(), "relu"), TypeError, "item 1"),  # type: ignore[arg-type]
        (lambda: nn.Sequential(nn.ReLU())[3], IndexError, "out of range"),
        (lambda: nn.Conv3d(4, 4, 3)(sparse(0, 5)), ValueError, "C_in"),
        (
            lambda: nn.Linear(4, 4, bias=True).quantize(bits=4, group_size=16),
            ValueError,
            "group_size",
        ),
    ],
)
def test_bad_inputs(call: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_torch_lattice_state_dict_loads_and_agrees() -> None:
    """The torch_lattice mirror's state dict loads unchanged and both runtimes agree."""
    tl = pytest.importorskip("torch_lattice")
    tnn = pytest.importorskip("torch_lattice.nn")
    torch.manual_seed(3)

    def build(lib: Any) -> Any:
        return lib.Sequential(
            lib.SubmConv3d(4, 8, 3),
            lib.BatchNorm(8),
            lib.ReLU(),
            lib.Conv3d(8, 16, 2, stride=2),
            lib.ConvTranspose3d(16, 8, 2, stride=2),
            lib.Linear(8, 5),
            lib.LayerNorm(5),
            lib.RMSNorm(5),
        )

    ref = build(tnn)
    ref.eval()
    with torch.no_grad():
        ref[1].running_var.uniform_(0.5, 2.0)
        ref[1].running_mean.uniform_(-1.0, 1.0)
    model = build(nn)
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    # torch's training counter (BatchNorm1d's num_batches_tracked) is ignored on load
    assert {k for k in state if not k.endswith(".num_batches_tracked")} == set(model.state_dict())
    assert "1.num_batches_tracked" in state
    model.load_state_dict(state)
    x = sparse(8, 4)
    tx = tl.SparseTensor(torch.from_numpy(np.array(x.coords)), torch.from_numpy(np.array(x.feats)))
    with torch.no_grad():
        want = ref(tx)
    got = model(x)
    got, want = got.canonical(), want.canonical()
    np.testing.assert_array_equal(np.array(got.coords), want.coords.numpy())
    np.testing.assert_allclose(np.array(got.feats), want.feats.numpy(), rtol=1e-4, atol=1e-4)


def test_full_modules_mirror_torch_names_and_follow_the_full_ops() -> None:
    x = sparse(5, 3)
    full, conv = nn.FullConv3d(3, 4, 3), nn.Conv3d(3, 4, 3)
    conv.weight, conv.bias = full.weight, full.bias
    ref = ops.full_conv3d(x, full.weight, full.bias, kernel_size=3)
    np.testing.assert_array_equal(np.array(full(x).feats), np.array(ref.feats))
    assert conv(x).num_rows == x.num_rows < full(x).num_rows  # conv3d keeps the input rows
    for module, mode in (
        (nn.FullMaxPool3d(3, stride=1), "max"),
        (nn.FullAvgPool3d(3, stride=1), "avg"),
        (nn.FullSumPool3d(3, stride=1), "sum"),
    ):
        got = module(x)
        want = ops.full_pool3d(x, mode=mode, kernel_size=3)
        np.testing.assert_array_equal(np.array(got.feats), np.array(want.feats))
    assert nn.GlobalPool("sum")(x).shape[0] == x.batch_size  # -1: inferred per call

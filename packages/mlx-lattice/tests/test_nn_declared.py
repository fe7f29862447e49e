"""Both runtimes' nn modules from the one declaration in lattice_contract.frontend.nn_*.

Every layer declared in the contract must appear in both runtimes as a real
module class of that runtime (``mlx.nn.Module`` / ``torch.nn.Module``) built
on the declaration, with the same docstring, constructor, repr and error
words; each runtime exports exactly the contract's name list plus its own
few; each runtime class computes in its own file, calling its own
functional op (the contract holds no forward); and a declared layer
computes on MLX what it computes on torch.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import lattice_contract.frontend
import mlx.core as mx
import mlx_lattice
import numpy as np
import pytest
import torch
import torch_lattice
from lattice_contract.dialect import ActivationKind
from lattice_contract.frontend import (
    DECLARED_LAYERS,
    NN_NAMES,
    RUNTIME_LAYER_NAMES,
    Layer,
    nn_activations,
    nn_convs,
)
from lattice_contract.testing import flagged_lines
from mlx.nn.layers.base import Module as MLXModule
from mlx.nn.utils import value_and_grad as mlx_value_and_grad
from mlx.utils import tree_flatten
from mlx_lattice import nn as mnn
from torch_lattice import nn as tnn

RUNTIMES: dict[str, tuple[ModuleType, type]] = {
    "mlx": (mnn, MLXModule),
    "torch": (tnn, torch.nn.Module),
}
OWN_NAMES = {
    "mlx": {
        "LatticeModule",
        "QuantizedConv3d",
        "QuantizedLinear",
        "WeightedModule",
        "map_features",
    },
    "torch": {"Dropout", "SyncBatchNorm"},
}

# Constructor arguments for each declared layer: a test fails when a layer is
# declared without a row here, so every new layer gets its repr compared.
SAMPLES: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Activation": (("softplus",), {"beta": 2.0, "threshold": 5.0}),
    "AvgPool3d": ((2,), {}),
    "Conv3d": ((4, 8, 3), {"stride": 2, "bias": False}),
    "ConvTranspose3d": ((4, 8, 2), {"stride": (2, 1, 1)}),
    "Devoxelize": ((0.5, "nearest"), {"origin": (1.0, 0.0, 0.0)}),
    "ELU": ((0.5,), {}),
    "Embedding": ((7, 3), {}),
    "FullAvgPool3d": ((3,), {"stride": 1, "padding": 1}),
    "FullConv3d": ((4, 8, 3), {"padding": 1}),
    "FullMaxPool3d": ((2,), {}),
    "FullSumPool3d": ((2, 1), {}),
    "GELU": (("tanh",), {}),
    "GenerativeConvTranspose3d": ((4, 8, 2), {"stride": 2}),
    "GlobalPool": (("max",), {"batch_size": 3}),
    "Hardswish": ((), {}),
    "HeightCompression": (((176, 200, 5), 2), {}),
    "Identity": ((), {}),
    "LayerNorm": ((6,), {"eps": 1e-3}),
    "LeakyReLU": ((0.2,), {}),
    "Linear": ((6, 5), {"bias": False}),
    "MaxPool3d": ((2,), {"dilation": 2}),
    "NormalizedConvTranspose3d": ((4, 8, 2), {"stride": 2}),
    "NormalizedGenerativeConvTranspose3d": ((4, 8, 2), {"eps": 1e-6}),
    "NormalizedSubmConv3d": ((4, 8, 3), {"dilation": 2, "bias": False}),
    "PoolTranspose3d": ((2,), {}),
    "RMSNorm": ((6,), {}),
    "ReLU": ((), {}),
    "SiLU": ((), {}),
    "Sigmoid": ((), {}),
    "Softmax": ((), {}),
    "Softplus": ((2.0, 5.0), {}),
    "SparseAdd": (("left",), {}),
    "SparseBinary": (("max",), {"join": "inner"}),
    "SparseCat": ((), {}),
    "SparseReindex": ((), {}),
    "SubmConv3d": ((4, 8, 3), {}),
    "SumPool3d": ((2,), {}),
    "Tanh": ((), {}),
    "TargetConv3d": ((4, 8, 2), {"stride": 2}),
    "TargetConvTranspose3d": ((4, 8, 2), {"stride": 2}),
    "TargetNormalizedConvTranspose3d": ((4, 8, 2), {"stride": 2, "eps": 1e-4}),
    "ToDense": (((4, 5, 6), 3), {"layout": "b_z_y_x_c"}),
    "TrilinearUpsample3d": (((2, 2, 1),), {}),
    "Voxelize": ((0.25, "max"), {"stride": 2}),
}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_each_runtime_exports_exactly_the_declared_names(runtime: str) -> None:
    module, _ = RUNTIMES[runtime]
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), "a name is exported twice"
    assert set(exported) == set(NN_NAMES) | OWN_NAMES[runtime]
    for name in exported:
        assert getattr(module, name).__name__ == name


def test_the_name_list_is_the_declared_layers_and_the_runtime_written_ones() -> None:
    assert set(NN_NAMES) == set(DECLARED_LAYERS) | set(RUNTIME_LAYER_NAMES)
    assert not set(DECLARED_LAYERS) & set(RUNTIME_LAYER_NAMES)
    assert set(SAMPLES) == set(DECLARED_LAYERS)


@pytest.mark.parametrize("name", sorted(DECLARED_LAYERS))
def test_both_runtimes_build_their_class_on_the_declaration(name: str) -> None:
    layer = DECLARED_LAYERS[name]
    args, kwargs = SAMPLES[name]
    reprs = {}
    for runtime, (module, base) in RUNTIMES.items():
        cls = getattr(module, name)
        assert inspect.isclass(cls) and issubclass(cls, layer) and issubclass(cls, base)
        # The declaration's docstring is the class's own, so help() and docs show it.
        assert cls.__doc__ == layer.__doc__ and layer.__doc__
        instance = cls(*args, **kwargs)
        assert isinstance(instance, base)
        reprs[runtime] = repr(instance)
        # Parameter-free layers take their whole constructor from the declaration.
        assert (cls.__init__ is layer.__init__) is not layer.owns_parameters
    assert reprs["mlx"] == reprs["torch"]
    assert reprs["mlx"].startswith(f"{name}(")


def test_the_reprs_show_the_normalised_attributes() -> None:
    # Written from each layer's definition: triples for geometry, enum spellings.
    assert repr(mnn.MaxPool3d(2, dilation=2)) == (
        "MaxPool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0), dilation=(2, 2, 2))"
    )
    assert repr(tnn.GlobalPool("max", 3)) == "GlobalPool(mode=max, batch_size=3)"
    assert repr(tnn.Voxelize(0.25, "max")) == (
        "Voxelize(voxel_size=(0.25, 0.25, 0.25), reduction=max)"
    )
    assert repr(mnn.SubmConv3d(4, 8, 3, bias=False)) == (
        "SubmConv3d(4, 8, kernel_size=(3, 3, 3), dilation=(1, 1, 1), bias=False)"
    )
    quantized = mnn.Conv3d(32, 8, 1)
    quantized.quantize(bits=8, group_size=32)
    assert repr(quantized).endswith("bias=True, bits=8, group_size=32)")


ACTIVATION_ROWS = {
    name: cls
    for name, cls in DECLARED_LAYERS.items()
    if issubclass(cls, nn_activations.Activation) and cls is not nn_activations.Activation
}


def test_the_activation_table_names_every_kind_once() -> None:
    kinds = [cls().kind for cls in ACTIVATION_ROWS.values()]  # type: ignore[call-arg]
    assert sorted(k.value for k in kinds) == sorted(k.value for k in set(kinds))
    assert set(kinds) == set(ActivationKind)


@pytest.mark.parametrize("name", sorted({*ACTIVATION_ROWS, "Activation", "Softmax"}))
def test_feature_layers_compute_the_same_on_both_runtimes(name: str) -> None:
    """MLX's module against torch's: the other runtime is the oracle, dense and sparse."""
    args, kwargs = SAMPLES[name]
    x = np.random.default_rng(3).uniform(-4, 4, (40, 6)).astype(np.float32)
    got = np.array(getattr(mnn, name)(*args, **kwargs)(mx.array(x)))
    with torch.no_grad():
        want = getattr(tnn, name)(*args, **kwargs)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    coords = np.c_[np.zeros(40), np.arange(40), np.zeros((40, 2))].astype(np.int32)
    sparse = mlx_lattice.SparseTensor(mx.array(coords), mx.array(x))
    out = getattr(mnn, name)(*args, **kwargs)(sparse)
    assert isinstance(out, mlx_lattice.SparseTensor) and out.cache is sparse.cache
    np.testing.assert_allclose(np.array(out.feats), want, rtol=1e-5, atol=1e-6)


def test_declared_layers_run_the_runtimes_own_ops() -> None:
    """A pool and a conv module give what their functional op gives, on each runtime."""
    rng = np.random.default_rng(5)
    cells = np.unique(rng.integers(0, 6, (60, 3)), axis=0).astype(np.int32)
    coords = np.c_[np.zeros(len(cells), np.int32), cells]
    feats = rng.standard_normal((len(cells), 4)).astype(np.float32)
    mx_x = mlx_lattice.SparseTensor(mx.array(coords), mx.array(feats))
    t_x = torch_lattice.SparseTensor(torch.from_numpy(coords), torch.from_numpy(feats))
    m_conv, t_conv = mnn.Conv3d(4, 3, 2, stride=2), tnn.Conv3d(4, 3, 2, stride=2)
    t_conv.load_state_dict(
        {k: torch.from_numpy(np.array(v)) for k, v in m_conv.state_dict().items()}
    )
    m_out, t_out = m_conv(mx_x), t_conv(t_x)
    np.testing.assert_array_equal(np.array(m_out.coords), t_out.coords.numpy())
    np.testing.assert_allclose(np.array(m_out.feats), t_out.feats.detach().numpy(), atol=1e-5)
    pooled = mnn.FullMaxPool3d(3, 1, 1)(mx_x)
    want = mlx_lattice.ops.full_pool3d(
        mx_x, mode="max", kernel_size=3, stride=1, padding=1, dilation=1
    )
    np.testing.assert_array_equal(np.array(pooled.feats), np.array(want.feats))
    assert isinstance(mnn.FullMaxPool3d(2), mnn.MaxPool3d)
    assert isinstance(tnn.SparseAdd(), tnn.SparseBinary)


BAD_ARGUMENTS: list[tuple[str, Callable[[ModuleType], object], type[Exception], str]] = [
    (
        "leaky slope",
        lambda nn: nn.LeakyReLU(math.nan),
        ValueError,
        "activation: alpha must be a finite number, got nan",
    ),
    ("softplus beta", lambda nn: nn.Softplus(0.0), ValueError, "softplus needs beta != 0"),
    ("pool window", lambda nn: nn.MaxPool3d(0), ValueError, "kernel_size"),
    ("pool mode", lambda nn: nn.GlobalPool("median"), ValueError, "'median'"),
    ("voxel size", lambda nn: nn.Voxelize(-1.0), ValueError, "voxel_size"),
    ("join", lambda nn: nn.SparseCat("sideways"), ValueError, "'sideways'"),
    ("channels", lambda nn: nn.Conv3d(4, 0, 3), ValueError, "out_channels"),
    ("eps", lambda nn: nn.NormalizedSubmConv3d(4, 4, 3, eps=0.0), ValueError, "eps"),
    ("batch norm size", lambda nn: nn.BatchNorm(0), ValueError, "num_features"),
    ("layer norm size", lambda nn: nn.LayerNorm(2.5), ValueError, "num_features"),
    ("table size", lambda nn: nn.Embedding(10, -3), ValueError, "embedding_dim"),
]


@pytest.mark.parametrize(
    ("case", "build", "error", "words"), BAD_ARGUMENTS, ids=[row[0] for row in BAD_ARGUMENTS]
)
def test_a_bad_argument_gets_the_same_error_on_both_runtimes(
    case: str, build: Callable[[ModuleType], object], error: type[Exception], words: str
) -> None:
    messages = []
    for module, _ in RUNTIMES.values():
        with pytest.raises(error) as caught:
            build(module)
        assert words in str(caught.value)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def _state_dict_model(nn: ModuleType) -> Any:
    return nn.Sequential(
        nn.SubmConv3d(4, 8, 3),
        nn.BatchNorm(8),
        nn.ReLU(),
        nn.Conv3d(8, 16, 2, stride=2, bias=False),
        nn.ConvTranspose3d(16, 8, (2, 3, 1), stride=(2, 1, 1)),
        nn.Linear(8, 5),
        nn.LayerNorm(5),
        nn.RMSNorm(5),
    )


def test_state_dict_keys_are_the_artifact_storage_keys_on_both_runtimes() -> None:
    """Conv weights (C_out, Kx, Ky, Kz, C_in), children named 0, 1, ... as torch's Sequential."""
    want = {
        "0.weight": (8, 3, 3, 3, 4),
        "0.bias": (8,),
        "1.weight": (8,),
        "1.bias": (8,),
        "1.running_mean": (8,),
        "1.running_var": (8,),
        "3.weight": (16, 2, 2, 2, 8),
        "4.weight": (8, 2, 3, 1, 16),
        "4.bias": (8,),
        "5.weight": (5, 8),
        "5.bias": (5,),
        "6.weight": (5,),
        "6.bias": (5,),
        "7.weight": (5,),
    }
    mlx_state = _state_dict_model(mnn).state_dict()
    torch_state = _state_dict_model(tnn).state_dict()
    assert {k: tuple(v.shape) for k, v in mlx_state.items()} == want
    # torch's BatchNorm also counts its training batches, as torch.nn.BatchNorm1d does.
    assert {k: tuple(v.shape) for k, v in torch_state.items()} == {
        **want,
        "1.num_batches_tracked": (),
    }


def test_declared_layers_are_layers_only_through_a_runtime_base() -> None:
    """The contract's layers hold no array code: alone they cannot run an op."""
    declared: Any = DECLARED_LAYERS["MaxPool3d"]
    layer = declared(2)
    assert isinstance(layer, Layer) and not hasattr(layer, "_ops")


# The method each runtime's module base runs when a module is called.
CALL_METHOD = {"mlx": "__call__", "torch": "forward"}


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(DECLARED_LAYERS))
def test_each_runtime_layer_computes_in_its_own_file(runtime: str, name: str) -> None:
    """A reader of ``<runtime>/nn/<file>.py`` sees the layer's op call, in that file.

    The class that gives the module its forward (MLX: ``__call__``) is defined
    in the same runtime module as the layer's class, never in the contract,
    and its body calls the runtime's functional op that the declaration names.
    """
    module, _ = RUNTIMES[runtime]
    cls = getattr(module, name)
    method = CALL_METHOD[runtime]
    owner = next(c for c in cls.__mro__ if method in vars(c))
    assert owner.__module__ == cls.__module__, (name, owner)
    assert cls.__module__.startswith(f"{module.__name__}."), cls.__module__
    source = inspect.getsource(vars(owner)[method])
    assert re.search(rf"\bops\.{DECLARED_LAYERS[name].functional_op}\b", source), source
    assert "_ops" not in source


def _frontend_classes() -> list[type]:
    found = []
    package = lattice_contract.frontend
    for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
        loaded = importlib.import_module(info.name)
        found += [
            value
            for value in vars(loaded).values()
            if inspect.isclass(value) and value.__module__ == info.name
        ]
    return found


def test_the_contract_injects_no_ops_and_its_layers_have_no_forward() -> None:
    """Shared as data and constructors: no layer computes, nothing calls back via ``_ops``."""
    classes = _frontend_classes()
    assert set(DECLARED_LAYERS.values()) <= set(classes)
    for cls in classes:
        for method in ("forward", "__call__"):
            if method not in vars(cls):
                continue
            assert not issubclass(cls, Layer), f"{cls.__qualname__}.{method} in the contract"
            assert "_ops" not in inspect.getsource(vars(cls)[method]), cls
        assert "_ops" not in vars(cls), cls


def test_mlx_parameter_handling_sees_through_the_declared_layers(tmp_path: Path) -> None:
    """Gradients, trainable parameters and save/load_weights of a model of declared layers."""
    rng = np.random.default_rng(0)
    cells = np.unique(rng.integers(0, 6, (80, 3)), axis=0).astype(np.int32)
    coords = np.c_[np.zeros(len(cells), np.int32), cells]
    x = mlx_lattice.SparseTensor(
        mx.array(coords), mx.array(rng.standard_normal((len(cells), 4)).astype(np.float32))
    )

    def model() -> mnn.Sequential:
        return mnn.Sequential(
            mnn.SubmConv3d(4, 8, 3),
            mnn.BatchNorm(8),
            mnn.ReLU(),
            mnn.MaxPool3d(2),
            mnn.Conv3d(8, 4, 1),
        )

    def loss(m: mnn.Sequential, value: mlx_lattice.SparseTensor) -> mx.array:
        out: mlx_lattice.SparseTensor = m(value)
        return (out.feats**2).mean()

    first = model()
    trainable = {"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"}
    _, grads = mlx_value_and_grad(first, loss)(first, x)
    flat: dict[str, mx.array] = dict(tree_flatten(grads))
    assert set(flat) == trainable
    assert all(float(mx.abs(g).sum()) > 0 for g in flat.values())
    path = tmp_path / "weights.safetensors"
    first.save_weights(str(path))
    second = model()
    second.load_weights(str(path))
    np.testing.assert_array_equal(np.array(second(x).feats), np.array(first(x).feats))


def test_torch_containers_and_hooks_see_the_declared_layers() -> None:
    """torch.nn.Sequential, forward hooks (the exporter's tracer uses them), .to(), state_dict."""
    cells = np.unique(np.random.default_rng(0).integers(0, 6, (50, 3)), axis=0)
    coords = torch.from_numpy(np.c_[np.zeros(len(cells)), cells].astype(np.int32))
    g = torch.Generator().manual_seed(0)
    x = torch_lattice.SparseTensor(coords, torch.randn(len(coords), 4, generator=g))
    seq = torch.nn.Sequential(tnn.SubmConv3d(4, 4, 3), tnn.GELU("tanh"), tnn.MaxPool3d(2))
    seen: list[str] = []
    for child in seq:
        child.register_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
    out = seq(x)
    assert seen == ["SubmConv3d", "GELU", "MaxPool3d"] and out.stride == (2, 2, 2)
    assert list(seq.state_dict()) == ["0.weight", "0.bias"]
    seq.to(torch.float64)
    assert seq(x.with_feats(x.feats.double())).feats.dtype == torch.float64


@pytest.mark.parametrize("name", ["Linear", "LayerNorm", "RMSNorm", "Embedding"])
def test_weighted_feature_layers_compute_the_same_on_both_runtimes(name: str) -> None:
    """torch's module, its state dict loaded into MLX's: the same rows come out."""
    args, kwargs = SAMPLES[name]
    torch.manual_seed(1)
    reference = getattr(tnn, name)(*args, **kwargs)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.uniform_(0.5, 1.5)
    ours = getattr(mnn, name)(*args, **kwargs)
    ours.load_state_dict({k: v.numpy() for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(2)
    if name == "Embedding":
        x = rng.integers(0, args[0], 20).astype(np.int32)
    else:
        x = rng.standard_normal((30, args[0])).astype(np.float32)
    with torch.no_grad():
        want = reference(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.array(ours(mx.array(x))), want, rtol=1e-5, atol=1e-5)


def test_mypy_sees_the_declared_constructors_on_the_runtime_classes(tmp_path: Path) -> None:
    """Real classes: mypy checks keywords of a declared layer through the MLX class.

    (torch's classes are the same construction; checking them would type-check
    all of torch, which takes far longer.)
    """
    flagged, report = flagged_lines(
        tmp_path,
        "from mlx_lattice import nn\n"
        "model = nn.Sequential(nn.SubmConv3d(4, 8, 3), nn.LeakyReLU(0.2), nn.MaxPool3d(2))\n"
        "act: nn.Activation = nn.GELU(approximate='tanh')\n"
        "bad = nn.LeakyReLU(negative_slop=0.1)\n"
        "worse = nn.Voxelize(0.1, orign=0.0)\n"
        "conv = nn.NormalizedSubmConv3d(4, 8, 3, 2, eps=1e-6, bias=False)\n"
        "placed = nn.SubmConv3d(4, 8, 3, device=None)\n"
        "positional_bias = nn.Conv3d(4, 8, 3, 1, 0, 1, False)\n",
    )
    assert flagged == {4, 5, 7, 8}, report
    assert '"negative_slope"' in report and '"origin"' in report, report
    assert 'Argument "device" to "SubmConv3d" has incompatible type "None"' in report, report


CONV_LAYERS = {
    name: cls for name, cls in DECLARED_LAYERS.items() if issubclass(cls, nn_convs.ConvLayer)
}


@pytest.mark.parametrize("name", sorted(CONV_LAYERS))
def test_conv_constructors_are_the_declared_one_on_both_runtimes(name: str) -> None:
    """One constructor per conv: geometry positional, ``eps``/``bias``/factory keyword-only."""
    layer = CONV_LAYERS[name]
    normalized = issubclass(layer, nn_convs.NormalizedLayer)
    signatures = {
        runtime: inspect.signature(getattr(module, name))
        for runtime, (module, _) in RUNTIMES.items()
    }
    assert signatures["mlx"] == signatures["torch"]
    kinds: list[tuple[str, inspect._ParameterKind]]
    kinds = [(p.name, p.kind) for p in signatures["mlx"].parameters.values()]
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    keyword = inspect.Parameter.KEYWORD_ONLY
    want: list[tuple[str, inspect._ParameterKind]]
    want = [(n, positional) for n in ("in_channels", "out_channels", *layer._geometry_keys)]
    want += [("eps", keyword)] if normalized else []
    want += [("bias", keyword), ("factory", inspect.Parameter.VAR_KEYWORD)]
    assert kinds == want


# The reference system's positional order (upstream torch-lattice's conv modules):
# torch.nn.Conv3d's kernel_size, stride, padding, dilation for a full window,
# kernel_size, dilation for the submanifold convs, kernel_size, stride for the
# generative ones.  Built from positional arguments only, on both runtimes.
POSITIONAL_GEOMETRY: list[tuple[str, tuple[int, ...], dict[str, tuple[int, int, int]]]] = [
    ("Conv3d", (3, 2, 1, 2), {"stride": (2,) * 3, "padding": (1,) * 3, "dilation": (2,) * 3}),
    ("ConvTranspose3d", (2, 2), {"stride": (2,) * 3, "padding": (0,) * 3}),
    ("SubmConv3d", (3, 2), {"dilation": (2,) * 3}),
    ("NormalizedSubmConv3d", (3, 2), {"dilation": (2,) * 3}),
    ("GenerativeConvTranspose3d", (2, 2), {"stride": (2,) * 3}),
    ("NormalizedGenerativeConvTranspose3d", (2, 2), {"stride": (2,) * 3}),
    (
        "NormalizedConvTranspose3d",
        (3, 2, 1, 2),
        {"stride": (2,) * 3, "padding": (1,) * 3, "dilation": (2,) * 3},
    ),
    (
        "TargetNormalizedConvTranspose3d",
        (3, 2, 1),
        {"stride": (2,) * 3, "padding": (1,) * 3, "dilation": (1,) * 3},
    ),
]


@pytest.mark.parametrize(
    ("name", "geometry", "want"), POSITIONAL_GEOMETRY, ids=[r[0] for r in POSITIONAL_GEOMETRY]
)
def test_positional_geometry_means_the_same_on_both_runtimes(
    name: str, geometry: tuple[int, ...], want: dict[str, tuple[int, int, int]]
) -> None:
    reprs = []
    for module, _ in RUNTIMES.values():
        conv = getattr(module, name)(4, 8, *geometry)
        assert {key: getattr(conv, key) for key in want} == want
        assert conv.kernel_size == (geometry[0],) * 3
        reprs.append(repr(conv))
    assert reprs[0] == reprs[1]


def test_bias_and_eps_are_keyword_only_on_both_runtimes() -> None:
    """A 7th positional of torch.nn.Conv3d is ``groups``; upstream's normalised convs take
    ``bias`` before ``eps``: a positional value there would be misread, so it is refused."""
    for module, _ in RUNTIMES.values():
        with pytest.raises(TypeError, match="positional"):
            module.Conv3d(4, 8, 3, 1, 0, 1, False)
        with pytest.raises(TypeError, match="positional"):
            module.SubmConv3d(4, 8, 3, 1, False)
        with pytest.raises(TypeError, match="positional"):
            module.NormalizedSubmConv3d(4, 8, 3, 1, 1e-6)


# A keyword a conv does not take: an spconv habit (stride on a submanifold
# conv), a geometry the generative conv fixes, a misspelling, and torch.empty's
# own keywords, which are not the convs' (only device= and dtype= are).
UNKNOWN_KEYWORDS: list[tuple[str, dict[str, Any], str]] = [
    ("SubmConv3d", {"stride": 2}, "'stride'; its geometry is kernel_size, dilation"),
    ("NormalizedSubmConv3d", {"padding": 1}, "'padding'; its geometry is kernel_size, dilation"),
    ("GenerativeConvTranspose3d", {"padding": 1}, "'padding'; its geometry is kernel_size, stride"),
    ("Conv3d", {"stide": 2}, "'stide'; its geometry is kernel_size, stride, padding, dilation"),
    ("ConvTranspose3d", {"pin_memory": True}, "'pin_memory'"),
]


@pytest.mark.parametrize(
    ("name", "keywords", "words"), UNKNOWN_KEYWORDS, ids=[r[0] for r in UNKNOWN_KEYWORDS]
)
def test_a_keyword_the_conv_does_not_take_is_refused_on_both_runtimes(
    name: str, keywords: dict[str, Any], words: str
) -> None:
    """``**factory`` takes only the factory keywords: nothing is silently dropped or passed on."""
    for module, _ in RUNTIMES.values():
        with pytest.raises(
            TypeError, match=f"{name}\\(\\) got an unexpected keyword argument {words}"
        ):
            getattr(module, name)(4, 8, 2, **keywords)


def test_factory_keywords_are_torchs_alone() -> None:
    """torch's convs create their parameters as torch's factory keywords say; MLX refuses them."""
    for name in CONV_LAYERS:
        conv = getattr(tnn, name)(4, 8, 3, dtype=torch.float64, device="cpu")
        assert {(p.dtype, p.device.type) for p in conv.parameters()} == {(torch.float64, "cpu")}
        assert conv.bias is not None and conv.weight.shape == (8, 3, 3, 3, 4)
        no_bias = getattr(tnn, name)(4, 8, 3, bias=False, dtype=torch.float16)
        assert no_bias.bias is None and no_bias.weight.dtype == torch.float16
    with pytest.raises(TypeError, match=r"SubmConv3d takes no dtype=: MLX arrays live in unified"):
        mnn.SubmConv3d(4, 8, 3, dtype=mx.float16)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Conv3d takes no device=, dtype=: MLX"):
        mnn.Conv3d(4, 8, 3, device=None, dtype=None)  # type: ignore[arg-type]
    # What the message recommends instead: MLX casts a built model.
    model = mnn.Sequential(mnn.Conv3d(4, 8, 3), mnn.NormalizedSubmConv3d(8, 8, 3, 2))
    model.set_dtype(mx.float16)
    assert {v.dtype for v in model.state_dict().values()} == {mx.float16}
    # help() shows the one constructor's words on every conv (inherited docstring).
    assert "device=" in (inspect.getdoc(mnn.SubmConv3d.__init__) or "")


def test_the_normalised_convs_former_module_still_imports() -> None:
    """``<runtime>.nn.normalized`` re-exports the classes now bound in ``nn.conv``."""
    import mlx_lattice.nn.normalized as mlx_old
    import torch_lattice.nn.normalized as torch_old

    for old, new in ((mlx_old, mnn), (torch_old, tnn)):
        for name in CONV_LAYERS:
            if name.startswith(("Normalized", "TargetNormalized")):
                assert getattr(old, name) is getattr(new, name), name

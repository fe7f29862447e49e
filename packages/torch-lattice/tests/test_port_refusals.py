"""The port keeps the source's names and refuses what it cannot reproduce.

Names: a checkpoint converted by ``convert_state_dict`` (what
``convert-checkpoint`` runs) loads into the ported model with ``strict=True``
and equals, key for key, the weights the port converted itself.  Refusals:
each case below was accepted before and ran with a wrong result against real
spconv (CPU, one thread); now it is either ported exactly (checked against
spconv) or refused with the module's path and the reason.
"""

from __future__ import annotations

from typing import Any

import pytest
import spconv.pytorch as spconv
import spconv_zoo as zoo
import torch
import torchsparse_layers as ts
from torch_lattice import SparseTensor, canonical_order
from torch_lattice.convert import KernelSpec, convert_state_dict
from torch_lattice.port import PortError, from_spconv, from_torchsparse

pytestmark = pytest.mark.usefixtures("one_thread")

SHAPE = [24, 24, 24]


def _spconv_spec(model: torch.nn.Module, axes: str) -> KernelSpec:
    """A kernel spec declaring every spconv conv weight of ``model`` (what a user writes)."""
    kernels: dict[str, Any] = {}
    for name, module in model.named_modules():
        if isinstance(module, spconv.conv.SparseConvolution):
            entry: dict[str, Any] = {"framework": "spconv", "version": "2.2", "axes": axes}
            if all(k == 1 for k in module.kernel_size):
                entry.update(stride=list(module.stride), subm=bool(module.subm))
            kernels[f"{name}.weight"] = entry
    return KernelSpec.from_json({"format": "lattice-kernel-spec", "version": 2, "kernels": kernels})


def _strict_roundtrip(source: torch.nn.Module, ported: torch.nn.Module, spec: KernelSpec) -> None:
    converted = convert_state_dict(source.state_dict(), spec).tensors
    mine = ported.state_dict()
    assert sorted(mine) == sorted(converted)
    for key, value in converted.items():
        assert torch.equal(mine[key], value), key
    result = ported.load_state_dict(converted, strict=True)
    assert not result.missing_keys and not result.unexpected_keys


@pytest.mark.parametrize("kind", ["plain", "res"])
def test_converted_checkpoint_loads_strict_into_ported_backbone(kind: str) -> None:
    model = zoo.randomise(
        zoo.VoxelBackBone8x() if kind == "plain" else zoo.VoxelResBackBone8x(), seed=1
    )
    ported = from_spconv(
        model, axes="zyx", spatial_shape=[41, 200, 176], batch_size=2, types=zoo.PCDET_TYPES
    )
    assert "conv_input.0.weight" in ported.state_dict()
    assert "conv2.0.0.weight" in ported.state_dict()  # a bounded strided conv: no extra segment
    _strict_roundtrip(model, ported, _spconv_spec(model, "zyx"))


def test_converted_checkpoint_loads_strict_into_ported_unet() -> None:
    model = zoo.randomise(zoo.UNetV2(), seed=2)
    ported = from_spconv(
        model, axes="zyx", spatial_shape=[41, 200, 176], batch_size=2, types=zoo.PCDET_TYPES
    )
    assert "inv_conv4.0.weight" in ported.state_dict()
    _strict_roundtrip(model, ported, _spconv_spec(model, "zyx"))


def test_converted_torchsparse_checkpoint_loads_strict_with_rename() -> None:
    model = ts.SparseResUNet42(in_channels=4)
    ported = from_torchsparse(model, version="2.1", types=ts.TYPES)
    spec = KernelSpec.from_json(
        {
            "format": "lattice-kernel-spec",
            "version": 2,
            "kernels": {
                f"{n}.kernel": {
                    "framework": "torchsparse",
                    "version": "2.1",
                    "kernel_size": list(m.kernel_size),
                    "stride": list(m.stride),
                }
                for n, m in model.named_modules()
                if isinstance(m, ts.Conv3d)
            },
            "rename": [[r"\.kernel$", ".weight"]],
        }
    )
    _strict_roundtrip(model, ported, spec)


# ---------------------------------------------------------------------------
# spconv: ported exactly, or refused


def _cloud(seed: int, rows: int = 300, channels: int = 4) -> SparseTensor:
    gen = torch.Generator().manual_seed(seed)
    xyz = torch.randint(0, SHAPE[0], (rows, 3), generator=gen)
    xyz[:6] = torch.tensor([[0, 5, 5], [23, 5, 5], [5, 0, 5], [5, 23, 5], [5, 5, 0], [5, 5, 23]])
    batch = torch.randint(0, 2, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, xyz], 1), dim=0).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), channels, generator=gen))


def _sorted(coords: Any, feats: Any) -> tuple[torch.Tensor, torch.Tensor]:
    c = torch.as_tensor(coords).to(torch.int32)
    perm = canonical_order(c)
    return c[perm], torch.as_tensor(feats, dtype=torch.float32)[perm]


def _against_spconv(model: torch.nn.Module, seed: int) -> float:
    zoo.randomise(model, seed)
    ported = from_spconv(model, spatial_shape=SHAPE).eval()
    x = _cloud(seed)
    with torch.no_grad():
        want = zoo.oracle_mode(model)(spconv.SparseConvTensor(x.feats, x.coords, SHAPE, 2))
        got = ported(x)
    want_c, want_f = _sorted(want.indices, want.features)
    got_c, got_f = _sorted(got.coords, got.feats)
    assert torch.equal(got_c, want_c)
    return float((got_f - want_f).abs().max())


def test_shared_subm_conv_and_shared_relu_port_as_shared() -> None:
    conv = spconv.SubMConv3d(8, 8, 3, bias=False)
    relu = torch.nn.ReLU()
    model = spconv.SparseSequential(
        spconv.SubMConv3d(4, 8, 3, bias=False), relu, conv, torch.nn.BatchNorm1d(8), relu, conv
    )
    ported = from_spconv(model, spatial_shape=SHAPE)
    inner: Any = ported.inner
    assert inner.order == ["0", "1", "2", "3", "4", "5"]
    assert inner._modules["5"] is inner._modules["2"]
    assert _against_spconv(model, seed=3) < 1e-5


def test_shared_strided_conv_is_refused() -> None:
    down = spconv.SparseConv3d(4, 4, 3, stride=2, padding=1, bias=False)
    model = spconv.SparseSequential(down, torch.nn.ReLU(), down)
    with pytest.raises(PortError, match=r"^2: is the same SparseConv3d object as 0; a shared"):
        from_spconv(model, spatial_shape=SHAPE)


@pytest.mark.parametrize("where", ["conv", "sequential"])
@pytest.mark.parametrize("hook", ["forward", "pre"])
def test_hooks_are_refused(where: str, hook: str) -> None:
    conv = spconv.SubMConv3d(4, 8, 3, bias=False)
    model = spconv.SparseSequential(spconv.SubMConv3d(4, 4, 3, bias=False), conv)
    target = conv if where == "conv" else model
    if hook == "forward":
        target.register_forward_hook(lambda m, i, o: o)
    else:
        target.register_forward_pre_hook(lambda m, i: i)
    path = "1" if where == "conv" else "<root>"
    kind = "a forward hook" if hook == "forward" else "a forward pre-hook"
    with pytest.raises(PortError, match=rf"^{path}: has {kind}; .*remove the hook"):
        from_spconv(model, spatial_shape=SHAPE)


def test_a_user_class_named_relu_is_not_a_relu() -> None:
    class ReLU(torch.nn.Module):  # computes something else under a known name
        def forward(self, x: Any) -> Any:
            return x.replace_feature(x.features * 2)

    model = spconv.SparseSequential(spconv.SubMConv3d(4, 4, 3, bias=False), ReLU())
    with pytest.raises(PortError, match=r"^1: the spconv port does not know .*\.ReLU \(modules"):
        from_spconv(model, spatial_shape=SHAPE)


def test_a_relu_subclass_without_methods_is_a_relu() -> None:
    class MyReLU(torch.nn.ReLU):
        pass

    model = spconv.SparseSequential(spconv.SubMConv3d(4, 4, 3, bias=False), MyReLU())
    assert _against_spconv(model, seed=5) < 1e-5


def test_a_sequential_with_its_own_forward_is_refused() -> None:
    class Twice(spconv.SparseSequential):
        def forward(self, x: Any) -> Any:
            return super().forward(super().forward(x))

    model = Twice(spconv.SubMConv3d(4, 4, 3, bias=False))
    with pytest.raises(PortError, match=r"^<root>: .*Twice subclasses .*SparseSequential but "):
        from_spconv(model, spatial_shape=SHAPE)


def test_a_backbone_with_an_extra_stage_is_refused() -> None:
    model = zoo.VoxelBackBone8x()
    model.conv5 = spconv.SparseSequential(spconv.SubMConv3d(128, 128, 3, bias=False))
    with pytest.raises(PortError, match=r"^<root>: a VoxelBackBone8x with conv5 is neither"):
        from_spconv(model, axes="zyx", spatial_shape=[41, 200, 176], types=zoo.PCDET_TYPES)


def test_an_undeclared_backbone_is_refused() -> None:
    with pytest.raises(PortError, match=r"does not know .*VoxelBackBone8x .*declared with types="):
        from_spconv(zoo.VoxelBackBone8x(), axes="zyx", spatial_shape=[41, 200, 176])


def test_torchsparse_sequential_subclass_with_forward_is_refused() -> None:
    class Block(torch.nn.Sequential):
        def forward(self, x: Any) -> Any:
            return x

    model = torch.nn.Sequential(Block(ts.Conv3d(4, 4, 3)))
    with pytest.raises(PortError, match=r"^0: .*Block subclasses torch.nn.modules.container"):
        from_torchsparse(model, types=ts.TYPES)


def test_module_paths_reach_the_graph_and_the_runtime_diagnostics(tmp_path: Any) -> None:
    from lattice_contract.plan import import_native_plan
    from torch_lattice.artifact import load_lattice_artifact
    from torch_lattice.export import save_lattice_model_artifact

    model = zoo.randomise(
        spconv.SparseSequential(
            conv_input=spconv.SparseSequential(
                spconv.SubMConv3d(4, 8, 3, bias=False), torch.nn.BatchNorm1d(8)
            ),
            down=spconv.SparseConv3d(8, 8, 3, stride=2, padding=1, bias=False),
        ),
        seed=4,
    )
    ported = from_spconv(model, spatial_shape=SHAPE).eval()
    save_lattice_model_artifact(ported, _cloud(4), tmp_path / "named.lattice")
    graph = load_lattice_artifact(tmp_path / "named.lattice").graph
    assert 'loc("conv_input.0")' in graph and 'loc("down")' in graph
    plan = import_native_plan(graph)
    located = {op.location for op in plan.ops}
    assert {"conv_input.0", "conv_input.1", "down"} <= located
    conv = next(op for op in plan.ops if op.name == "lattice.subm_conv3d")
    assert conv.describe().endswith(" at conv_input.0")

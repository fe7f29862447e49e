"""save_lattice_model_artifact: tracing, weights, naming, quantization and every refusal.

Besides the exporter's own self-check, each success case reloads the written
artifact with ``load_lattice_program`` and compares it with the eager model
here, so a self-check that passed vacuously would still be caught.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch_lattice import SparseTensor, canonical_order, nn, ops
from torch_lattice.artifact import LOWERINGS, load_lattice_program
from torch_lattice.export import ExportError, save_lattice_model_artifact

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _sparse(rows: int = 60, channels: int = 4, *, seed: int = 0, extent: int = 8) -> SparseTensor:
    gen = torch.Generator().manual_seed(seed)
    logical = torch.randint(0, extent, (rows, 3), generator=gen)
    batch = torch.randint(0, 2, (rows, 1), generator=gen)
    coords = torch.unique(torch.cat([batch, logical], 1), dim=0).to(torch.int32)
    return SparseTensor(coords, torch.randn(len(coords), channels, generator=gen))


def _same(actual: Any, expected: Any, atol: float = 1e-5) -> None:
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            _same(a, e, atol)
        return
    if isinstance(expected, SparseTensor):
        assert isinstance(actual, SparseTensor) and actual.stride == expected.stride
        pa, pe = canonical_order(actual.coords), canonical_order(expected.coords)
        assert torch.equal(actual.coords[pa].cpu(), expected.coords[pe].cpu())
        actual, expected = actual.feats[pa], expected.feats[pe]
    torch.testing.assert_close(actual.cpu(), expected.cpu(), atol=atol, rtol=1e-4)


def _eager(model: torch.nn.Module, *inputs: Any) -> Any:
    model.eval()
    with torch.no_grad():
        return model(*inputs)


class Stack(torch.nn.Module):
    """Conv family, pools, norms and activations through modules."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.SubmConv3d(4, 8, 3),
            nn.BatchNorm(8),
            nn.ReLU(),
            nn.Conv3d(8, 16, 2, stride=2),
            nn.LayerNorm(16),
            nn.GELU(approximate="tanh"),
            nn.MaxPool3d(2, stride=2),
            nn.GenerativeConvTranspose3d(16, 8, 2, stride=2),
            nn.RMSNorm(8),
            nn.SiLU(),
            nn.ConvTranspose3d(8, 8, 3, stride=2, padding=1),
            nn.AvgPool3d(3, stride=1, padding=1),
            nn.Linear(8, 5),
            nn.Softmax(),
        )

    def forward(self, x: SparseTensor) -> SparseTensor:
        out: SparseTensor = self.body(x)
        return out


class TwoInTwoOut(torch.nn.Module):
    """Two sparse inputs, target conv, algebra, functional ops; returns (sparse, dense)."""

    def __init__(self) -> None:
        super().__init__()
        self.to_target = nn.TargetConv3d(4, 6, 3, stride=1, padding=1)
        self.scale = torch.nn.Parameter(torch.rand(12) + 0.5)
        self.pool = nn.GlobalPool("max", batch_size=2)

    def forward(self, x: SparseTensor, t: SparseTensor) -> tuple[SparseTensor, torch.Tensor]:
        on_t = self.to_target(x, t)
        back = ops.sparse_reindex(x, on_t)
        mixed = ops.sparse_binary(on_t, self.to_target(back, t), op="mul", join="inner")
        both = ops.sparse_cat(mixed, on_t, join="outer")
        h = ops.rms_norm(ops.activation(both.feats, kind="elu", alpha=0.7), self.scale, eps=1e-4)
        act = both.with_feats(h)
        return act, self.pool(act)


@pytest.mark.parametrize("device", DEVICES)
def test_stack_exports_and_reloads(tmp_path: Path, device: str) -> None:
    torch.manual_seed(0)
    model = Stack().to(device)
    x = _sparse().to(device)
    report = save_lattice_model_artifact(model, x, tmp_path / "stack.lattice")
    assert all(c.passed for c in report.checks)
    assert {"lattice.subm_conv3d", "lattice.conv3d", "lattice.generative_conv_transpose3d",
            "lattice.conv_transpose3d", "lattice.pool3d", "lattice.batch_norm",
            "lattice.layer_norm", "lattice.rms_norm", "lattice.softmax",
            "lattice.linear"} <= set(report.ops)  # fmt: skip
    program = load_lattice_program(tmp_path / "stack.lattice", device=device)
    _same(program(x), _eager(model, x))
    # Storage keys are the state_dict keys of the parameters and buffers used.
    stored = load_file(str(tmp_path / "stack.lattice" / "weights.safetensors"))
    state = model.state_dict()
    assert set(stored) == set(report.weights)
    assert set(stored) <= set(state)
    for key, value in stored.items():
        assert torch.equal(value, state[key].cpu()), key
    assert {"body.1.running_mean", "body.1.running_var", "body.1.weight", "body.1.bias"} <= set(
        stored
    )


def test_two_inputs_two_outputs_and_names(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = TwoInTwoOut()
    x = _sparse(seed=3)
    t = _sparse(40, 2, seed=4)
    report = save_lattice_model_artifact(
        model, (x, t), tmp_path / "m.lattice", input_names=["scan", "query"],
        output_names=["field", "pooled"],
    )  # fmt: skip
    assert report.input_names == ("scan", "query")
    program = load_lattice_program(tmp_path / "m.lattice")
    assert program.input_names == ("scan", "query")
    assert program.output_names == ("field", "pooled")
    assert [a.abi_name for a in program.inputs][:3] == [
        "scan_coords",
        "scan_features",
        "scan_active",
    ]
    _same(program(scan=x, query=t), _eager(model, x, t))
    for op in ("target_conv3d", "sparse.reindex", "sparse.binary", "sparse.cat", "global_pool"):
        assert f"lattice.{op}" in report.ops


class Points(torch.nn.Module):
    """Dense point inputs: voxelize, conv, devoxelize, linear, cast."""

    def __init__(self) -> None:
        super().__init__()
        self.vox = nn.Voxelize(0.5, "sum")
        self.conv = nn.SubmConv3d(3, 8, 3)
        self.devox = nn.Devoxelize(0.5, "nearest")
        self.head = nn.Linear(8, 2)

    def forward(
        self, p: torch.Tensor, f: torch.Tensor, b: torch.Tensor, a: torch.Tensor
    ) -> torch.Tensor:
        y = self.head(self.devox(self.conv(self.vox(p, f, b, a)), p, b, a))
        return ops.cast(y, torch.bfloat16, rounding="nearest_away")


def test_dense_point_inputs(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(5)
    p = torch.rand(100, 3, generator=gen) * 3
    f = torch.randn(100, 3, generator=gen)
    b = torch.randint(0, 2, (100,), generator=gen).to(torch.int32)
    a = torch.tensor([90], dtype=torch.int32)  # upstream's form: only the active points count
    model = Points()
    report = save_lattice_model_artifact(model, (p, f, b, a), tmp_path / "p.lattice")
    assert "lattice.cast" in report.ops and "lattice.voxelize" in report.ops
    program = load_lattice_program(tmp_path / "p.lattice")
    got = program(p, f, b, a)
    assert got.dtype == torch.bfloat16 and got.shape == (100, 2)
    _same(got, _eager(model, p, f, b, a))
    with pytest.raises(ExportError, match="active-row count"):
        save_lattice_model_artifact(_NoActive(), (p, f, b), tmp_path / "q.lattice")


class _NoActive(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vox = nn.Voxelize(0.5)

    def forward(self, p: torch.Tensor, f: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ops.global_pool(self.vox(p, f, b), mode="avg")


def test_half_model(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = Stack().half()
    x = _sparse().to(dtype=torch.float16)
    report = save_lattice_model_artifact(model, x, tmp_path / "h.lattice")
    assert "f16" in report.graph and "f32>" not in report.graph.split("func.func")[1][:200]
    got = load_lattice_program(tmp_path / "h.lattice")(x)
    assert got.dtype == torch.float16
    _same(got, _eager(model, x), atol=1e-3)


class Wide(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.SubmConv3d(4, 32, 3)
        self.mid = nn.Conv3d(32, 64, 2, stride=2)
        self.act = nn.ReLU()
        self.head = nn.Linear(64, 3)

    def forward(self, x: SparseTensor) -> SparseTensor:
        out: SparseTensor = self.head(self.act(self.mid(self.stem(x))))
        return out


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("device", DEVICES)
def test_quantized_export(tmp_path: Path, bits: int, device: str) -> None:
    torch.manual_seed(3)
    model = Wide().to(device)
    before = copy.deepcopy(model.state_dict())
    x = _sparse().to(device)
    path = tmp_path / "q.lattice"
    report = save_lattice_model_artifact(model, x, path, quantize={"bits": bits, "group_size": 32})
    assert report.packed_weights == ("mid.weight", "head.weight")
    assert report.dense_unpackable_weights == ("stem.weight",)  # C_in = 4
    assert f"#lattice.packing<int{bits}, group_size = 32, scale_dtype = f32" in report.graph
    stored = load_file(str(path / "weights.safetensors"))
    assert {"mid.weight.weight", "mid.weight.scales", "mid.weight.biases"} <= set(stored)
    assert "mid.weight" not in stored and "stem.weight" in stored
    assert stored["mid.weight.weight"].dtype == torch.uint32
    assert stored["mid.weight.weight"].shape == (8, 32 * bits // 32, 64)  # (K, words, C_out)
    assert stored["mid.bias"].dtype == torch.float32  # biases stay dense
    # The exporter put the model back exactly as it was.
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    # Independent reference: the model with packed-then-dequantized weights.
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for key in report.packed_weights:
            param = reference.get_parameter(key)  # the packed storage key is its state name
            q = ops.QuantizedWeight(
                stored[key + ".weight"], stored[key + ".scales"], stored[key + ".biases"],
                bits, 32,
            )  # fmt: skip
            param.copy_(q.dequantize_as(tuple(param.shape)).to(device))
    program = load_lattice_program(path, device=device)
    _same(program(x), _eager(reference, x))
    # ... which differs measurably from the unquantized model at 4 bits.
    if bits == 4:
        diff = (program(x).feats - _eager(model, x).feats).abs().max()
        assert float(diff) > 1e-4


def test_training_mode_is_restored(tmp_path: Path) -> None:
    model = Stack()
    model.train()
    save_lattice_model_artifact(model, _sparse(), tmp_path / "a.lattice")
    assert all(m.training for m in model.modules())


# ---------------------------------------------------------------------------
# Refusals: each names the culprit and writes nothing.


class TorchReLU(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.SubmConv3d(4, 4, 3)
        self.act = torch.nn.ReLU()

    def forward(self, x: SparseTensor) -> SparseTensor:
        y = self.conv(x)
        return y.with_feats(self.act(y.feats))


class TorchOp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.SubmConv3d(4, 4, 3)

    def forward(self, x: SparseTensor) -> SparseTensor:
        y = self.conv(x)
        return y.with_feats(torch.relu(y.feats) + 1)


class HandBuilt(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.SubmConv3d(4, 4, 3)

    def forward(self, x: SparseTensor) -> SparseTensor:
        out: SparseTensor = self.conv(SparseTensor(x.coords, x.feats * 2))
        return out


class LooseWeight(torch.nn.Module):
    def forward(self, x: SparseTensor) -> SparseTensor:
        return x.with_feats(ops.linear(x.feats, torch.ones(3, x.num_channels)))


class WeightAsData(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 4))
        self.lin = nn.Linear(4, 4)

    def forward(self, x: SparseTensor) -> torch.Tensor:
        out: torch.Tensor = self.lin(self.table)
        return out


class OutputUntraced(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x: SparseTensor) -> torch.Tensor:
        out: torch.Tensor = self.lin(x.feats)
        return out


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (TorchReLU, r"module 'act' \(torch\.nn\.modules\.activation\.ReLU\)"),
        (TorchOp, r"torch operation outside torch_lattice\.ops.*module ''|torch operation outside"),
        (HandBuilt, r"SparseTensor built outside the traced ops"),
        (LooseWeight, r"not a parameter or buffer"),
        (WeightAsData, r"parameter/buffer 'table'"),
        (OutputUntraced, r"output 'y'.*module 'lin' \(torch\.nn\.modules\.linear\.Linear\)"),
    ],
)
def test_untraced_things_are_named(tmp_path: Path, model: type, message: str) -> None:
    path = tmp_path / "bad.lattice"
    with pytest.raises(ExportError, match=message):
        save_lattice_model_artifact(model(), _sparse(), path)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_mismatch_writes_nothing_and_keeps_old_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = nn.SubmConv3d(4, 4, 3)
    model = nn.Sequential(conv, nn.ReLU())
    x = _sparse()
    path = tmp_path / "m.lattice"
    save_lattice_model_artifact(model, x, path)
    before = {p.name: p.read_bytes() for p in path.iterdir()}

    original = LOWERINGS.lowering("activation")

    def broken(
        input: torch.Tensor, *, kind: str, approximate: str, alpha: float, beta: float,
        threshold: float,
    ) -> torch.Tensor:  # fmt: skip
        return original.function(
            input, kind=kind, approximate=approximate, alpha=alpha, beta=beta,
            threshold=threshold,
        ) + 1e-3  # fmt: skip

    monkeypatch.setitem(
        LOWERINGS._lowerings, "activation", dataclasses.replace(original, function=broken)
    )
    with torch.no_grad():
        conv.weight.mul_(2)  # a different model, so a successful save would change files
    with pytest.raises(ExportError, match=r"(?s)does not reproduce.*y: features differ"):
        save_lattice_model_artifact(model, x, path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    with pytest.raises(ExportError, match="does not reproduce"):
        save_lattice_model_artifact(model, x, tmp_path / "new.lattice")
    assert not (tmp_path / "new.lattice").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lattice"]


def test_tolerance_is_the_callers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = LOWERINGS.lowering("softmax")

    def nudged(input: torch.Tensor, *, axis: int | None = None) -> torch.Tensor:
        return original.function(input, axis=axis) * (1 + 1e-3)

    monkeypatch.setitem(
        LOWERINGS._lowerings, "softmax", dataclasses.replace(original, function=nudged)
    )
    model = nn.Sequential(nn.SubmConv3d(4, 4, 3), nn.Softmax())
    with pytest.raises(ExportError):
        save_lattice_model_artifact(model, _sparse(), tmp_path / "a.lattice")
    report = save_lattice_model_artifact(model, _sparse(), tmp_path / "b.lattice", rtol=1e-2)
    assert report.checks[0].max_rel_error > 5e-4


def test_dtype_mismatch_is_refused(tmp_path: Path) -> None:
    model = nn.SubmConv3d(4, 4, 3)
    x = _sparse().to(dtype=torch.float16)
    with pytest.raises(ExportError, match=r"'weight'.*float32.*f16.*model\.half\(\)"):
        save_lattice_model_artifact(model, x, tmp_path / "a.lattice")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quantize": {"bits": 3, "group_size": 32}}, "bits must be 4 or 8"),
        ({"quantize": {"bits": 4, "group_size": 48}}, "group_size must be"),
        ({"quantize": {"bits": 4}}, 'quantize must be "int8", "int4" or a mapping'),
        ({"input_names": ["a", "b"]}, "2 names for 1 values"),
        ({"input_names": ["1x"]}, "not a valid ABI name"),
        ({"output_names": ["o", "p"]}, "2 names for 1 values"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ExportError, match=message):
        save_lattice_model_artifact(nn.SubmConv3d(4, 4, 3), _sparse(), tmp_path / "a", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"SparseTensor, a torch\.Tensor or a tuple"):
        save_lattice_model_artifact(nn.SubmConv3d(4, 4, 3), {"x": 1}, tmp_path / "a")
    with pytest.raises(ExportError, match=r"torch\.nn\.Module"):
        save_lattice_model_artifact(ops.subm_conv3d, _sparse(), tmp_path / "a")  # type: ignore[arg-type]
    with pytest.raises(ExportError, match="empty"):
        save_lattice_model_artifact(nn.SubmConv3d(4, 4, 3), (), tmp_path / "a")


def test_global_pool_exports_batch_size_minus_one_and_serves_any_batch(tmp_path: Path) -> None:
    model = nn.Sequential(nn.SubmConv3d(4, 6, 3), nn.GlobalPool("avg"), nn.Linear(6, 3))
    report = save_lattice_model_artifact(model, _sparse(), tmp_path / "g.lattice")
    assert "batch_size = -1" in report.graph
    program = load_lattice_program(tmp_path / "g.lattice")
    for batches in (1, 2, 5):
        x = _sparse(80, seed=batches)
        coords = x.coords.clone()
        coords[:, 0] = torch.arange(len(coords), dtype=torch.int32) % batches
        coords[:, 1] += 16 * x.coords[:, 0]  # keep rows distinct after re-batching
        x = SparseTensor(coords, x.feats)
        got = program(x)
        assert got.shape == (batches, 3)
        _same(got, _eager(model, x))


def test_spconv_style_full_ops_export(tmp_path: Path) -> None:
    """full_conv3d / full_pool3d trace to their own ops and reproduce the eager model."""
    model = nn.Sequential(
        nn.FullConv3d(4, 8, 3, stride=2, padding=1), nn.FullMaxPool3d(2), nn.Conv3d(8, 4, 3)
    )
    x = _sparse()
    report = save_lattice_model_artifact(model, x, tmp_path / "f.lattice")
    assert {"lattice.full_conv3d", "lattice.full_pool3d", "lattice.conv3d"} <= set(report.ops)
    _same(load_lattice_program(tmp_path / "f.lattice")(x), _eager(model, x))

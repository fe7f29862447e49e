"""Every schema op through a real bundle on the torch runtime.

The cases are the shared table of :mod:`lattice_conformance.op_cases` (one
graph built with ``MLIRModuleBuilder``, its NumPy inputs and weights, and the
result in terms of the runtime's own ops), which the MLX runtime runs too.
Each case's artifact is written with ``save_lattice_artifact``, loaded with
``load_lattice_program`` (native verification, frozen plan, type check,
torch lowerings) on every available device, and its output compared with
the direct ``torch_lattice.ops`` calls on the same inputs (rows in canonical
order, features to 1e-5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from lattice_conformance.op_cases import OP_CASES, Packed, Sparse, Tensor, covered_ops, make_case
from lattice_contract import SCHEMA
from torch_lattice import SparseTensor, canonical_order, ops
from torch_lattice.artifact import load_lattice_program, save_lattice_artifact
from torch_lattice.ops.quant import QuantizedWeight, quantize_weight

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TD = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}


class TorchCases:
    """The torch side of :class:`lattice_conformance.op_cases.CaseRuntime`, on one device."""

    ops = ops

    def __init__(self, device: str) -> None:
        self.device = device

    def array(self, value: Tensor) -> torch.Tensor:
        return torch.from_numpy(value.values.copy()).to(self.device, TD[value.dtype])

    def sparse(self, value: Sparse) -> SparseTensor:
        coords = torch.from_numpy(value.coords.copy()).to(self.device)
        feats = torch.from_numpy(value.feats.copy()).to(self.device, TD[value.dtype])
        return SparseTensor(coords, feats, stride=value.stride)

    def dtype(self, name: str) -> torch.dtype:
        return TD[name]

    def pack(self, value: Packed) -> QuantizedWeight:
        w = torch.from_numpy(value.values.copy())
        return quantize_weight(w, bits=value.bits, group_size=value.group_size)

    def dequantize(self, packed: Any) -> torch.Tensor:
        assert isinstance(packed, QuantizedWeight)
        return packed.dequantize(torch.float32).to(self.device)


def assert_same(actual: Any, expected: Any, atol: float = 1e-5) -> None:
    if isinstance(expected, SparseTensor):
        assert isinstance(actual, SparseTensor)
        assert actual.stride == expected.stride
        pa, pe = canonical_order(actual.coords), canonical_order(expected.coords)
        assert torch.equal(actual.coords[pa].cpu(), expected.coords[pe].cpu())
        actual, expected = actual.feats[pa], expected.feats[pe]
    assert isinstance(actual, torch.Tensor)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected.cpu(), atol=atol, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_op_matches_direct_call(name: str, device: str, tmp_path: Path) -> None:
    runtime = TorchCases(device)
    case = make_case(name)
    path = tmp_path / f"{name}.lattice"
    save_lattice_artifact(path, case.builder.build(), case.runtime_weights(TorchCases("cpu")))
    program = load_lattice_program(path, device=device)
    args = case.runtime_inputs(runtime)
    got = program(*args)
    weights = {
        k: v if isinstance(v, QuantizedWeight) else v.to(device)
        for k, v in case.runtime_weights(runtime).items()
    }
    case.check(got, case.expected(runtime, args, weights), assert_same)
    for item in got if isinstance(got, tuple) else (got,):
        value = item.feats if isinstance(item, SparseTensor) else item
        assert value.device.type == device


def test_cases_cover_every_schema_op() -> None:
    covered = covered_ops()
    assert covered == set(SCHEMA.ops), set(SCHEMA.ops) - covered

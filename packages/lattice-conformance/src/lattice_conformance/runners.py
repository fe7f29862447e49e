"""Execute an artifact on one runtime with numpy inputs and numpy outputs.

Replay compares a runtime's outputs with expected arrays; it needs the same
three things from every runtime: load the artifact, run it on exact inputs,
hand the outputs back as numpy.  Each runner imports its framework lazily so
that MLX replay never loads torch (and the other way round).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from lattice_conformance.archive import SparseArrays

Array = npt.NDArray[Any]


class RuntimeUnavailable(RuntimeError):
    """The requested runtime or device cannot be used in this install."""


@dataclass(frozen=True)
class ActualOutput:
    """One output as numpy, with the runtime's dtype name (f16, bf16, f32, i32)."""

    value: SparseArrays | Array
    dtype: str


@dataclass(frozen=True)
class RunResult:
    outputs: tuple[ActualOutput, ...]
    prepare_s: float
    compute_s: float
    convert_s: float


class Runner(Protocol):
    name: str
    device: str

    def op_counts(self) -> dict[str, int]: ...

    def abi(self) -> dict[str, list[dict[str, str]]]: ...

    def run(self, inputs: Sequence[Array], dtypes: Sequence[str]) -> RunResult: ...


def _triple(stride: Any) -> tuple[int, int, int]:
    a, b, c = (int(s) for s in stride)
    return (a, b, c)


def _plan_summary(plan: Any) -> tuple[dict[str, int], dict[str, list[dict[str, str]]]]:
    counts = Counter(str(op.name) for op in plan.ops)
    abi = {
        "inputs": [{"name": a.abi_name, "role": a.role, "type": a.type} for a in plan.args],
        "outputs": [{"name": o.abi_name, "role": o.role, "type": o.type} for o in plan.outputs],
    }
    return dict(sorted(counts.items())), abi


class MLXRunner:
    """Runs an artifact through ``mlx_lattice.artifact.load_lattice_program``."""

    name = "mlx"

    def __init__(self, artifact_dir: Path, device: str = "cpu") -> None:
        import mlx.core as mx

        if device not in ("cpu", "gpu"):
            raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
        if device == "gpu":
            backends = [
                getattr(mx, backend).is_available()
                for backend in ("metal", "cuda")
                if hasattr(mx, backend)
            ]
            if not any(backends):
                raise RuntimeUnavailable(
                    "this MLX install has no GPU backend (mlx[cpu]); replay with --device cpu, "
                    "or install mlx[cuda13] (NVIDIA) / mlx (macOS, Metal)"
                )
            mx.set_default_device(mx.gpu)
        else:
            mx.set_default_device(mx.cpu)
        from mlx_lattice.artifact import load_lattice_program

        self._mx = mx
        self.device = device
        self.program = load_lattice_program(artifact_dir)
        self._counts, self._abi = _plan_summary(self.program.plan)

    def op_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def abi(self) -> dict[str, list[dict[str, str]]]:
        return self._abi

    def _dtype_name(self, dtype: Any) -> str:
        mx = self._mx
        names = {mx.float16: "f16", mx.bfloat16: "bf16", mx.float32: "f32", mx.int32: "i32"}
        return names.get(dtype, str(dtype))

    def _to_numpy(self, array: Any) -> Array:
        mx = self._mx
        if array.dtype == mx.bfloat16:  # numpy has no bf16; f32 holds it exactly
            array = array.astype(mx.float32)
        return np.asarray(array)

    def run(self, inputs: Sequence[Array], dtypes: Sequence[str]) -> RunResult:
        mx = self._mx
        from mlx_lattice import SparseTensor

        start = time.perf_counter()
        arrays = []
        for array, dtype in zip(inputs, dtypes, strict=True):
            value = mx.array(array)
            if dtype == "bf16":
                value = value.astype(mx.bfloat16)
            arrays.append(value)
        mx.eval(arrays)
        prepared = time.perf_counter()
        result = self.program(*arrays)
        results = result if isinstance(result, tuple) else (result,)
        pending = []
        for item in results:
            if isinstance(item, SparseTensor):
                pending += [item.coords, item.feats]
            else:
                pending.append(item)
        mx.eval(pending)
        computed = time.perf_counter()
        outputs = []
        for item in results:
            if isinstance(item, SparseTensor):
                sparse = SparseArrays(
                    np.asarray(item.coords), self._to_numpy(item.feats), _triple(item.stride)
                )
                outputs.append(ActualOutput(sparse, self._dtype_name(item.feats.dtype)))
            else:
                outputs.append(ActualOutput(self._to_numpy(item), self._dtype_name(item.dtype)))
        converted = time.perf_counter()
        return RunResult(
            tuple(outputs), prepared - start, computed - prepared, converted - computed
        )


class TorchRunner:
    """Runs an artifact through ``torch_lattice.artifact.load_lattice_program``."""

    name = "torch"

    def __init__(self, artifact_dir: Path, device: str = "cpu") -> None:
        import torch

        if device == "gpu":
            if not torch.cuda.is_available():
                raise RuntimeUnavailable("torch has no CUDA device here; use --device cpu")
            self._device = torch.device("cuda")
        elif device == "cpu":
            self._device = torch.device("cpu")
        else:
            raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
        from torch_lattice.artifact import load_lattice_program

        self._torch = torch
        self.device = device
        self.program = load_lattice_program(artifact_dir, device=self._device)
        self._counts, self._abi = _plan_summary(self.program.plan)

    def op_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def abi(self) -> dict[str, list[dict[str, str]]]:
        return self._abi

    def _dtype_name(self, dtype: Any) -> str:
        torch = self._torch
        names = {
            torch.float16: "f16",
            torch.bfloat16: "bf16",
            torch.float32: "f32",
            torch.int32: "i32",
        }
        return names.get(dtype, str(dtype))

    def _to_numpy(self, tensor: Any) -> Array:
        if tensor.dtype == self._torch.bfloat16:
            tensor = tensor.float()
        return np.asarray(tensor.detach().cpu().numpy())

    def _sync(self) -> None:
        if self._device.type == "cuda":
            self._torch.cuda.synchronize()

    def run(self, inputs: Sequence[Array], dtypes: Sequence[str]) -> RunResult:
        torch = self._torch
        from torch_lattice import SparseTensor

        start = time.perf_counter()
        tensors = []
        for array, dtype in zip(inputs, dtypes, strict=True):
            value = torch.from_numpy(np.ascontiguousarray(array)).to(self._device)
            if dtype == "bf16":
                value = value.to(torch.bfloat16)
            tensors.append(value)
        self._sync()
        prepared = time.perf_counter()
        with torch.no_grad():
            result = self.program(*tensors)
        self._sync()
        computed = time.perf_counter()
        results = result if isinstance(result, tuple) else (result,)
        outputs = []
        for item in results:
            if isinstance(item, SparseTensor):
                sparse = SparseArrays(
                    self._to_numpy(item.coords), self._to_numpy(item.feats), _triple(item.stride)
                )
                outputs.append(ActualOutput(sparse, self._dtype_name(item.feats.dtype)))
            else:
                outputs.append(ActualOutput(self._to_numpy(item), self._dtype_name(item.dtype)))
        converted = time.perf_counter()
        return RunResult(
            tuple(outputs), prepared - start, computed - prepared, converted - computed
        )


def make_runner(runtime: str, artifact_dir: Path, device: str = "cpu") -> Runner:
    """The runner for ``runtime`` ("mlx" or "torch") on ``device`` ("cpu" or "gpu")."""
    if runtime == "mlx":
        return MLXRunner(artifact_dir, device)
    if runtime == "torch":
        return TorchRunner(artifact_dir, device)
    raise ValueError(f"runtime must be 'mlx' or 'torch', got {runtime!r}")

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


class _ProgramRunner:
    """The shared run loop; subclasses supply the framework-specific pieces."""

    name = ""
    device = "cpu"
    program: Any

    def _init_plan(self) -> None:
        self._counts, self._abi = _plan_summary(self.program.plan)

    def op_counts(self) -> dict[str, int]:
        return dict(self._counts)

    def abi(self) -> dict[str, list[dict[str, str]]]:
        return self._abi

    # Hooks.
    def _dtype_names(self) -> dict[Any, str]:
        raise NotImplementedError

    def _input(self, array: Array, dtype: str) -> Any:
        raise NotImplementedError

    def _call(self, values: list[Any]) -> Any:
        raise NotImplementedError

    def _sparse_type(self) -> Any:
        raise NotImplementedError

    def _wait(self, values: list[Any]) -> None:
        raise NotImplementedError

    def _to_numpy(self, value: Any) -> Array:
        raise NotImplementedError

    def _dtype_name(self, dtype: Any) -> str:
        return self._dtype_names().get(dtype, str(dtype))

    def run(self, inputs: Sequence[Array], dtypes: Sequence[str]) -> RunResult:
        sparse_type = self._sparse_type()
        start = time.perf_counter()
        values = [self._input(a, d) for a, d in zip(inputs, dtypes, strict=True)]
        self._wait(values)
        prepared = time.perf_counter()
        result = self._call(values)
        results = result if isinstance(result, tuple) else (result,)
        pending: list[Any] = []
        for item in results:
            pending += [item.coords, item.feats] if isinstance(item, sparse_type) else [item]
        self._wait(pending)
        computed = time.perf_counter()
        outputs = []
        for item in results:
            if isinstance(item, sparse_type):
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


class MLXRunner(_ProgramRunner):
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
        self._init_plan()

    def _dtype_names(self) -> dict[Any, str]:
        mx = self._mx
        return {mx.float16: "f16", mx.bfloat16: "bf16", mx.float32: "f32", mx.int32: "i32"}

    def _input(self, array: Array, dtype: str) -> Any:
        value = self._mx.array(array)
        return value.astype(self._mx.bfloat16) if dtype == "bf16" else value

    def _call(self, values: list[Any]) -> Any:
        return self.program(*values)

    def _sparse_type(self) -> Any:
        from mlx_lattice import SparseTensor

        return SparseTensor

    def _wait(self, values: list[Any]) -> None:
        self._mx.eval(values)

    def _to_numpy(self, value: Any) -> Array:
        if value.dtype == self._mx.bfloat16:  # numpy has no bf16; f32 holds it exactly
            value = value.astype(self._mx.float32)
        return np.asarray(value)


class TorchRunner(_ProgramRunner):
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
        self._init_plan()

    def _dtype_names(self) -> dict[Any, str]:
        t = self._torch
        return {t.float16: "f16", t.bfloat16: "bf16", t.float32: "f32", t.int32: "i32"}

    def _input(self, array: Array, dtype: str) -> Any:
        value = self._torch.from_numpy(np.ascontiguousarray(array)).to(self._device)
        return value.to(self._torch.bfloat16) if dtype == "bf16" else value

    def _call(self, values: list[Any]) -> Any:
        with self._torch.no_grad():
            return self.program(*values)

    def _sparse_type(self) -> Any:
        import torch_lattice

        sparse_type: Any = torch_lattice.SparseTensor
        return sparse_type

    def _wait(self, values: list[Any]) -> None:
        if self._device.type == "cuda":
            self._torch.cuda.synchronize()

    def _to_numpy(self, value: Any) -> Array:
        if value.dtype == self._torch.bfloat16:
            value = value.float()
        return np.asarray(value.detach().cpu().numpy())


def make_runner(runtime: str, artifact_dir: Path, device: str = "cpu") -> Runner:
    """The runner for ``runtime`` ("mlx" or "torch") on ``device`` ("cpu" or "gpu")."""
    if runtime == "mlx":
        return MLXRunner(artifact_dir, device)
    if runtime == "torch":
        return TorchRunner(artifact_dir, device)
    raise ValueError(f"runtime must be 'mlx' or 'torch', got {runtime!r}")

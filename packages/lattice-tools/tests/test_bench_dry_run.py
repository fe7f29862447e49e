"""A benchmark's ``--dry-run`` exits non-zero when any section fails.

The CPU benchmarks run every section inside a guard that records the failure
and goes on; the exit status is 1 if any failed.  Here a section is made to
fail (its function raises) and the status must say so, while the other
sections still run; benchmarks/bench_cuda.py is rewritten under issue 29 and
has its own dry run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_torch_conv_dry_run_fails_on_a_failing_section(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load("bench_torch_conv", monkeypatch)
    ran: list[int] = []

    def broken(n: int, threads: int, repeat: int) -> None:
        ran.append(n)
        raise RuntimeError("BatchNorm in training mode needs at least 2 rows")

    monkeypatch.setattr(bench, "bench_cpu", broken)
    monkeypatch.setattr(bench.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["bench_torch_conv.py", "--dry-run"])
    assert bench.main() == 1
    assert ran == [4000]  # the dry run's scene
    monkeypatch.setattr(bench, "bench_cpu", lambda n, threads, repeat: None)
    assert bench.main() == 0


def test_mlx_conv_dry_run_fails_on_a_failing_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _load("bench_mlx_conv", monkeypatch)
    calls: list[str] = []

    def broken(coords: object, layer: object, repeat: int) -> dict[str, float]:
        calls.append(str(layer))
        raise ValueError("no rows")

    monkeypatch.setattr(bench, "run_mlx", broken)
    monkeypatch.setattr(bench, "mlx_matmul_rate", lambda *a: 1.0)
    monkeypatch.setattr(bench, "make_scene", lambda n, grid, seed: (bench.np.zeros((8, 3)), None))
    monkeypatch.setattr(sys, "argv", ["bench_mlx_conv.py", "--dry-run"])
    assert bench.main() == 1
    assert len(calls) == len(bench.LAYERS)  # every layer still ran after the first failure


@pytest.mark.parametrize(
    "argv",
    [
        ["bench.py", "--processes", "3", "--sizes", "100000"],
        ["bench.py", "--processes=3", "--sizes", "100000"],
        ["bench.py", "--sizes", "100000", "--processes", "3"],
        ["bench.py", "--sizes", "100000"],
    ],
)
def test_processes_option_is_dropped_with_its_value(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--processes N`` re-runs the script without the option: its value must go too.

    A filter on the option's name alone would pass ``3`` on to each process
    as a stray argument.
    """
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    harness = _load("bench_harness", monkeypatch)
    assert harness.without_option(argv, "--processes") == ["bench.py", "--sizes", "100000"]

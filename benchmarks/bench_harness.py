"""Measurement helpers that keep the CUDA benchmark honest: warm until stable, count, aggregate.

* :func:`stable_time` times a call with CUDA events in rounds and stops only
  when the last ``k`` round medians agree within ``tol`` (spconv tunes its
  algorithms on its first calls; Triton compiles; a peer still warming up
  makes every ratio look better than it is).
* :func:`paired_stable_time` does the same for several libraries at once,
  round by round in turn, so that the machine's drift (a host-bound call
  follows the CPU's clock, and the device machines are shared) falls on every
  library alike: ratios come from the same rounds.
* :func:`host_time` is the time the host spends issuing one call (no final
  synchronisation): next to the wall time it shows a host-bound call.
* :func:`launches_and_syncs` counts, for one call, the kernels the GPU ran and
  the host synchronisations the CPU waited on (``torch.profiler``; no CUDA
  graph involved, so the count is what an eager step costs).
* :func:`peak_bytes` is the torch allocator's peak above what was allocated
  before the call.
* :func:`aggregate` runs the benchmark in several processes and prints the
  median of every recorded number (``RESULT key value`` lines) with its spread.
"""

from __future__ import annotations

import collections
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "LAYERS",
    "POOLS",
    "Layer",
    "Pool",
    "aggregate",
    "count_flops",
    "host_time",
    "launches_and_syncs",
    "paired_stable_time",
    "peak_bytes",
    "stable_time",
    "without_option",
]


@dataclass(frozen=True)
class Layer:
    """One layer row of the CUDA benchmarks (``bench_cuda.py``, ``bench_mlx_cuda.py``)."""

    name: str
    kind: str  # subm, conv (spconv's SparseConv3d: the indexed relation), transpose, inverse
    c_in: int
    c_out: int
    kernel: int
    stride: int = 1
    padding: int = 0


LAYERS = (
    Layer("subm3 32", "subm", 32, 32, 3),
    Layer("subm3 64", "subm", 64, 64, 3),
    Layer("subm3 128", "subm", 128, 128, 3),
    Layer("conv k2s2 64", "conv", 64, 64, 2, 2),
    Layer("conv k3s2 64", "conv", 64, 64, 3, 2, 1),
    Layer("transposed k2s2 64", "transpose", 64, 64, 2, 2),
    Layer("inverse k2s2 64", "inverse", 64, 64, 2, 2),
)
"""The layers both libraries are timed on: a sparse U-Net's convs at 32-128 channels."""


@dataclass(frozen=True)
class Pool:
    """One pool row of the CUDA benchmarks (f16, 64 channels)."""

    name: str
    op: str  # full_pool3d (spconv's pools) or pool3d
    mode: str
    kernel: int
    stride: int
    padding: int = 0
    peer: str | None = None  # the spconv module of the same pool, where one exists


POOLS = (
    Pool("maxpool k2s2 64", "full_pool3d", "max", 2, 2, 0, "SparseMaxPool3d"),
    Pool("maxpool k3s2 p1 64", "full_pool3d", "max", 3, 2, 1, "SparseMaxPool3d"),
    Pool("avgpool k2s2 64", "full_pool3d", "avg", 2, 2, 0, "SparseAvgPool3d"),
    Pool("sumpool k3s2 64 (pool3d)", "pool3d", "sum", 3, 2),
)
"""spconv's pools are ``full_pool3d`` (the indexed relation); it has no sum pool."""

_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _round(fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds of ``repeat`` calls, each between two CUDA events on torch's stream."""
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def _wall_round(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall seconds of ``repeat`` calls; ``fn`` waits for its own work to finish.

    For libraries whose work runs on streams torch's events do not see (MLX
    has its own CUDA stream): each call ends with that library's
    synchronisation, so launch overhead and the host's share are counted for
    every library alike.
    """
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def stable_time(
    fn: Callable[[], Any], repeat: int = 10, k: int = 3, tol: float = 0.02, max_rounds: int = 30
) -> tuple[float, int]:
    """(median seconds, rounds taken): rounds of ``repeat`` calls until ``k`` medians agree.

    Agreement: the last ``k`` round medians lie within ``tol`` of their own
    median.  After ``max_rounds`` the last median is returned anyway and the
    caller sees the round count (an unstable number is printed as such).
    """
    fn()
    torch.cuda.synchronize()
    medians: list[float] = []
    for _ in range(max_rounds):
        medians.append(_round(fn, repeat))
        if len(medians) >= k:
            last = medians[-k:]
            mid = statistics.median(last)
            if max(abs(m - mid) for m in last) <= tol * mid:
                return mid, len(medians)
    return medians[-1], len(medians)


def paired_stable_time(
    fns: dict[str, Callable[[], Any]],
    repeat: int = 10,
    k: int = 3,
    tol: float = 0.02,
    max_rounds: int = 30,
    *,
    wall: bool = False,
) -> tuple[dict[str, float], int, list[str]]:
    """(median seconds per name, rounds taken, names not stable): every function in turn.

    Each round times ``repeat`` calls of every function (CUDA events, their
    median), in an order rotated by one each round.  Rounds go on until, for
    every function, the last ``k`` round medians lie within ``tol`` of their
    own median; each function's time is the median of its last ``k`` rounds,
    which are the same rounds for all, so a ratio compares like with like.
    Measured apart, two libraries' times on one device machine moved by up to
    2x between processes (a host-bound network follows the CPU's speed).
    ``wall=True`` times each call by the wall clock (:func:`_wall_round`):
    every function must then synchronise its own library before returning.
    """
    timed = _wall_round if wall else _round
    for fn in fns.values():
        fn()
    if not wall:
        torch.cuda.synchronize()
    names = list(fns)
    medians: dict[str, list[float]] = {name: [] for name in names}
    rounds, unstable = 0, names
    while unstable and rounds < max_rounds:
        for i in range(len(names)):
            name = names[(i + rounds) % len(names)]
            medians[name].append(timed(fns[name], repeat))
        rounds += 1
        unstable = _unstable(medians, k, tol)
    last = {name: statistics.median(m[-k:]) for name, m in medians.items()}
    return last, rounds, unstable


def _unstable(medians: dict[str, list[float]], k: int, tol: float) -> list[str]:
    """Names whose last ``k`` round medians do not agree within ``tol``."""
    out = []
    for name, m in medians.items():
        last = m[-k:]
        mid = statistics.median(last)
        if len(last) < k or max(abs(v - mid) for v in last) > tol * mid:
            out.append(name)
    return out


def host_time(fn: Callable[[], Any], calls: int = 10) -> float:
    """Median seconds the host takes to return from ``fn`` (each call starts on an idle GPU).

    A call whose host time is close to its wall time is bound by the host
    (launches, Python, synchronisations), not by the GPU.
    """
    fn()
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times)


def launches_and_syncs(fn: Callable[[], Any]) -> tuple[int, int]:
    """(GPU kernels run, host synchronisations) in one call of ``fn`` (after one warm call)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = syncs = 0
    for event in prof.events():
        name = event.name
        if event.device_type == torch.autograd.DeviceType.CUDA:
            if not name.startswith("Memcpy") and not name.startswith("Memset"):
                kernels += 1
        elif any(name.startswith(s) for s in _SYNC_CALLS):
            syncs += 1
    return kernels, max(syncs - 1, 0)  # less the one synchronize that closes the region


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes of the torch allocator during ``fn`` above what was allocated before it."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - before)


def without_option(argv: Sequence[str], name: str) -> list[str]:
    """``argv`` less the option ``name`` and its value (``--name N`` or ``--name=N``)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(name + "="):
            out.append(arg)
    return out


def aggregate(argv: Sequence[str], processes: int) -> int:
    """Run ``argv`` ``processes`` times; print each ``RESULT`` key's median, min and max.

    Returns the worst exit status (non-zero if any run failed).
    """
    values: dict[str, list[float]] = collections.defaultdict(list)
    status = 0
    for i in range(processes):
        print(f"--- process run {i + 1}/{processes}", flush=True)
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, check=False)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-4000:])
        status = max(status, proc.returncode)
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                cut = line.rindex(" ")
                values[line[len("RESULT ") : cut]].append(float(line[cut + 1 :]))
    print(f"\n=== medians over {processes} processes (min..max) ===")
    for key, vals in values.items():
        print(f"  {key:<60} {statistics.median(vals):12.4f}  ({min(vals):.4f}..{max(vals):.4f})")
    return status


def count_flops(fn: Callable[[], Any]) -> float:
    """FLOPs of the real pairs in every conv and weight-gradient launch of one call of ``fn``."""
    from torch_lattice.triton import conv as conv_module

    total = [0]
    launch_conv, launch_wgrad = conv_module.launch_conv, conv_module.launch_wgrad

    def conv(x: Any, w: Any, slots: Any, *args: Any, **kw: Any) -> Any:
        total[0] += 2 * int((slots >= 0).sum()) * int(w.shape[1]) * int(w.shape[2])
        return launch_conv(x, w, slots, *args, **kw)

    def wgrad(x: Any, g: Any, pin: Any, *args: Any) -> Any:
        total[0] += 2 * int(pin.numel()) * int(x.shape[1]) * int(g.shape[1])
        return launch_wgrad(x, g, pin, *args)

    conv_module.launch_conv, conv_module.launch_wgrad = conv, wgrad  # type: ignore[assignment]
    try:
        fn()
    finally:
        conv_module.launch_conv, conv_module.launch_wgrad = launch_conv, launch_wgrad
    return float(total[0])

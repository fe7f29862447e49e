"""Measurement helpers that keep the CUDA benchmark honest: warm until stable, count, aggregate.

* :func:`stable_time` times a call with CUDA events in rounds and stops only
  when the last ``k`` round medians agree within ``tol`` (spconv tunes its
  algorithms on its first calls; Triton compiles; a peer still warming up
  makes every ratio look better than it is).
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
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["aggregate", "count_flops", "launches_and_syncs", "peak_bytes", "stable_time"]

_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _round(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
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

"""Where the time of one fresh layer goes on CUDA (map built): launches, host syncs, GPU time.

For each layer (a new input every call, so every map is built) it prints the
device operations per call (kernels, copies and fills, as CUPTI sees them),
the host synchronisations per call (``torch.cuda.set_sync_debug_mode``
warnings), the summed GPU time and the wall time per call, then
torch.profiler's top ops.

Run: ``python benchmarks/profile_cuda.py`` on a CUDA machine (PYTHONPATH as for bench_cuda.py).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from lattice_conformance.scenes import batched, make_scene
from torch_lattice import SparseTensor, ops

CALLS = 5


def _count(fn: Callable[[], Any]) -> tuple[float, float, float, float, Any]:
    """(device ops, host syncs, GPU ms, wall ms) per call, and the profiler."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
    device_ops = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    gpu_us = sum(e.device_time for e in device_ops)
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(CALLS):
                fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / CALLS * 1e3
    syncs = sum(1 for w in caught if "synchroniz" in str(w.message))
    return len(device_ops) / CALLS, syncs / CALLS, gpu_us / CALLS / 1e3, wall, prof


def main() -> None:
    coords = torch.from_numpy(batched(make_scene(100_000)[0])).cuda()
    feats = torch.randn(coords.shape[0], 64, device="cuda").half()
    w3 = torch.randn(64, 3, 3, 3, 64, device="cuda").half() * 0.05
    w2 = torch.randn(64, 2, 2, 2, 64, device="cuda").half() * 0.05

    def fresh() -> SparseTensor:
        return SparseTensor.trusted(coords, feats)

    coarse = ops.conv3d(fresh(), w2, kernel_size=2, stride=2)

    def subm_train() -> None:
        f = feats.float().requires_grad_(True)
        w = w3.float().requires_grad_(True)
        ops.subm_conv3d(SparseTensor.trusted(coords, f), w, kernel_size=3).feats.sum().backward()

    layers: dict[str, Callable[[], Any]] = {
        "subm3 64 +map": lambda: ops.subm_conv3d(fresh(), w3, kernel_size=3),
        "conv k2s2 64 +map": lambda: ops.conv3d(fresh(), w2, kernel_size=2, stride=2),
        "full k3s2 64 +map": lambda: ops.full_conv3d(
            fresh(), w3, kernel_size=3, stride=2, padding=1
        ),
        "transposed k2s2 +map": lambda: ops.conv_transpose3d(
            SparseTensor.trusted(coarse.coords, coarse.feats, 2), w2, kernel_size=2, stride=2
        ),
        "subm3 f32 fwd+bwd +map": subm_train,
    }
    print(f"{'layer':<24} {'device ops':>10} {'syncs':>6} {'GPU ms':>8} {'wall ms':>8}")
    profs = {}
    for name, fn in layers.items():
        n_ops, syncs, gpu, wall, prof = _count(fn)
        profs[name] = prof
        print(f"{name:<24} {n_ops:>10.1f} {syncs:>6.1f} {gpu:>8.3f} {wall:>8.3f}", flush=True)
    for name, prof in profs.items():
        print(f"\n=== {name} ({CALLS} calls)")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))


if __name__ == "__main__":
    main()

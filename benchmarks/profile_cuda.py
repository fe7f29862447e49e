"""Where the time of one fresh layer goes on CUDA (map built): launches, host syncs, GPU time.

For each layer (a new input every call, so every map is built) it prints the
device operations per call (kernels, copies and fills, as CUPTI sees them),
the host synchronisations per call (``torch.cuda.set_sync_debug_mode``
warnings), the summed GPU time and the wall time per call, then
torch.profiler's top ops.

Then it profiles one training step of bench_cuda.py's four-level MinkUNet
(200k voxels, f32, maps built) and sums the GPU time by what the kernels do
(conv forward / input gradient, weight gradient, map building, batch norm,
ReLU, concatenation, the rest), with the launch count of each.

Run: ``python benchmarks/profile_cuda.py [--unet-only]`` on a CUDA machine
(PYTHONPATH as for bench_cuda.py).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lattice_conformance.scenes import batched, make_scene
from torch_lattice import SparseTensor, ops

CALLS = 5


def _profiled(fn: Callable[[], Any]) -> Any:
    """torch.profiler over CALLS calls of ``fn`` after three warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
    return prof


def _count(fn: Callable[[], Any]) -> tuple[float, float, float, float, Any]:
    """(device ops, host syncs, GPU ms, wall ms) per call, and the profiler."""
    prof = _profiled(fn)
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


CATEGORIES = (
    ("conv (forward + input gradient)", ("_conv_kernel",)),
    ("weight gradient", ("_wgrad_kernel",)),
    ("batch norm", ("batch_norm", "welford", "bn_")),
    ("relu / threshold", ("threshold", "clamp_min", "relu")),
    ("concatenation", ("cat", "CatArray")),
    ("sort / scan (maps)", ("sort", "radix", "scan", "cumsum", "Onesweep", "DeviceSegmented")),
    ("map kernels", ("_map", "_hash", "_insert", "_query", "_cand", "_emit", "_mark", "_slot")),
    ("reductions (sum)", ("reduce_kernel",)),
    ("copies / fills", ("copy", "fill", "Memcpy", "Memset")),
)


def profile_unet_step() -> None:
    """GPU time of one f32 MinkUNet training step at 200k voxels, by kind of kernel."""
    sys.path.insert(0, str(Path(__file__).parent))
    import bench_cuda

    coords = torch.from_numpy(batched(make_scene(200_000)[0])).cuda()
    torch.manual_seed(0)
    feats = torch.randn(coords.shape[0], bench_cuda.IN_CH, device="cuda")
    labels = torch.randint(0, bench_cuda.CLASSES, (coords.shape[0],), device="cuda")
    net = bench_cuda.OursUNet().cuda().train()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = net(SparseTensor.trusted(coords, feats))
        torch.nn.functional.cross_entropy(out, labels).backward()
        opt.step()

    breakdown(step, "MinkUNet f32 training step, 200k voxels")


def breakdown(step: Callable[[], Any], title: str) -> None:
    """Print ``step``'s wall time, GPU time by kind of kernel, and its top kernels."""
    prof = _profiled(step)
    sums: dict[str, list[float]] = {}
    kernels: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        cat = next((c for c, keys in CATEGORIES if any(k in e.name for k in keys)), "other")
        for table, key in ((sums, cat), (kernels, e.name[:90])):
            entry = table.setdefault(key, [0.0, 0.0])
            entry[0] += e.device_time / CALLS / 1e3
            entry[1] += 1 / CALLS
    start = time.perf_counter()
    for _ in range(CALLS):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / CALLS * 1e3
    total = sum(v[0] for v in sums.values())
    print(f"\n=== {title}: wall {wall:.2f} ms, GPU {total:.2f} ms")
    print(f"{'what':<34} {'GPU ms':>8} {'launches':>9}")
    for cat, (ms, n) in sorted(sums.items(), key=lambda kv: -kv[1][0]):
        print(f"{cat:<34} {ms:>8.2f} {n:>9.0f}")
    print(f"\n{'kernel':<90} {'GPU ms':>8} {'launches':>9}")
    for name, (ms, n) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:12]:
        print(f"{name:<90} {ms:>8.2f} {n:>9.0f}")


def main() -> None:
    if "--unet-only" not in sys.argv:
        profile_layers()
    profile_unet_step()


def profile_layers() -> None:
    """Launches, host reads, GPU and wall time of each fresh layer (map built) at 100k."""
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

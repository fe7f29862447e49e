"""What thread-count-independent CPU reductions cost: deterministic vs plain GEMMs, 1/2/16 threads.

torch_lattice's CPU convolutions cut every GEMM whose reduction axis K is
longer than ``_K_CHUNK`` (128) into fixed pieces summed in a fixed order
(``torch_lattice.ops.conv._fixed_mm``), because MKL's sgemm splits a long K
across threads and sums the parts in a thread-count-dependent order.  This
script measures that choice against the plain one-call GEMM it replaced, in
one process, at 1, 2 and 16 threads:

* ``deterministic``: the shipped code;
* ``baseline``: the same code with ``_K_CHUNK`` raised past every K, so each
  product is one ``torch.mm`` / ``@`` call (MKL free to split K).

Cases: the raw GEMM shapes a sparse conv issues (the output-major schedule's
``(rows, 27 * 64) @ (27 * 64, 64)`` block and a weight gradient's
``(64, rows) @ (rows, 64)``), and whole layers on a surface scene
(``lattice_conformance.scenes``) with their maps cached: subm 3x3x3 64->64
under the automatic schedule and forced output-major, a k2s2 64->64 conv,
each forward and forward + backward.  Printed per case and thread count:
the minimum wall time of each mode over interleaved runs, ``det / base``
from the wall minima, the wall medians and the CPU-time minima (above 1:
determinism costs that factor), the wall speed-up over one thread of each
mode, and whether each mode gave bitwise the same result as at one thread.

16 threads on a machine with fewer cores is oversubscribed; the script
prints the core count and the load average so a reader can tell.  On a
loaded machine the scheduler shares the cores per thread, so more threads
than cores can look faster in wall time than they are; the CPU-time ratio is
the figure that load does not move.

Run: ``.venv/bin/python benchmarks/bench_threads.py [--voxels 20000] [--repeat 7]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from lattice_conformance.scenes import batched, make_scene
from torch_lattice import SparseTensor, ops
from torch_lattice.ops import conv as conv_module

THREADS = (1, 2, 16)
MODES = ("deterministic", "baseline")


@contextmanager
def mode(name: str) -> Iterator[None]:
    """``baseline``: every GEMM is one call (``_K_CHUNK`` past any K); else the shipped code."""
    saved = conv_module._K_CHUNK
    if name == "baseline":
        conv_module._K_CHUNK = 1 << 62
    try:
        yield
    finally:
        conv_module._K_CHUNK = saved


@dataclass
class Timing:
    """One mode at one thread count: minimum and median wall time, minimum CPU time."""

    wall: float
    wall_median: float
    cpu: float
    out: list[torch.Tensor]


def interleaved_times(fn: Callable[[], list[torch.Tensor]], repeat: int) -> dict[str, Timing]:
    """Per mode: wall and CPU time of ``repeat`` runs, and the last run's tensors.

    The modes alternate run by run after one warm-up each, so a burst of load
    from other processes hits both alike; the minimum is the figure least
    disturbed by that load, the median shows how much it moved.  CPU time
    (all of the process's threads) is what the work costs whatever share of
    the machine the scheduler gives it: on a loaded machine each thread gets
    a share, so wall time rewards more threads than cores.
    """
    wall: dict[str, list[float]] = {name: [] for name in MODES}
    cpu: dict[str, list[float]] = {name: [] for name in MODES}
    out: dict[str, list[torch.Tensor]] = {}
    for name in MODES:
        with mode(name):
            out[name] = fn()
    for _ in range(repeat):
        for name in MODES:
            with mode(name):
                start, start_cpu = time.perf_counter(), time.process_time()
                out[name] = fn()
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    return {n: Timing(min(wall[n]), statistics.median(wall[n]), min(cpu[n]), out[n]) for n in MODES}


@dataclass
class Case:
    name: str
    run: Callable[[], list[torch.Tensor]]


def gemm_cases(rows: int) -> list[Case]:
    g = torch.Generator().manual_seed(0)
    block = torch.randn(4096, 27 * 64, generator=g)
    stacked = torch.randn(27 * 64, 64, generator=g)
    x_t = torch.randn(64, rows, generator=g)
    grad = torch.randn(rows, 64, generator=g)
    return [
        Case("gemm (4096x1728)@(1728x64)", lambda: [conv_module._fixed_mm(block, stacked)]),
        Case(f"gemm (64x{rows})@({rows}x64)", lambda: [conv_module._fixed_mm(x_t, grad)]),
    ]


def layer_cases(voxels: int) -> list[Case]:
    coords_np, _ = make_scene(voxels)
    coords = torch.from_numpy(batched(coords_np))
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(coords.shape[0], 64, generator=g)
    x = SparseTensor(coords, feats)
    w3 = torch.randn(64, 3, 3, 3, 64, generator=g) * 0.05
    w2 = torch.randn(64, 2, 2, 2, 64, generator=g) * 0.05
    ops.subm_conv3d(x, w3, kernel_size=3)  # build and cache the maps once
    ops.conv3d(x, w2, kernel_size=2, stride=2)

    def forward(fn: Callable[[SparseTensor], SparseTensor], schedule: str) -> list[torch.Tensor]:
        with conv_module.schedule(schedule):
            return [fn(x).feats]

    def backward(
        fn: Callable[[SparseTensor, torch.Tensor], SparseTensor], w: torch.Tensor, schedule: str
    ) -> list[torch.Tensor]:
        f = feats.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        with conv_module.schedule(schedule):
            out = fn(x.with_feats(f), wg)
            torch.autograd.backward(out.feats.square().sum())
        assert f.grad is not None and wg.grad is not None
        return [out.feats.detach(), f.grad, wg.grad]

    def subm(v: SparseTensor, w: torch.Tensor = w3) -> SparseTensor:
        return ops.subm_conv3d(v, w, kernel_size=3)

    def down(v: SparseTensor, w: torch.Tensor = w2) -> SparseTensor:
        return ops.conv3d(v, w, kernel_size=2, stride=2)

    n = coords.shape[0]
    return [
        Case(f"subm3 64->64 fwd, auto ({n} rows)", lambda: forward(subm, "auto")),
        Case("subm3 64->64 fwd, output-major", lambda: forward(subm, "output_major")),
        Case("subm3 64->64 fwd+bwd, auto", lambda: backward(subm, w3, "auto")),
        Case("subm3 64->64 fwd+bwd, output-major", lambda: backward(subm, w3, "output_major")),
        Case("conv k2s2 64->64 fwd", lambda: forward(down, "auto")),
        Case("conv k2s2 64->64 fwd+bwd", lambda: backward(down, w2, "auto")),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voxels", type=int, default=20_000, help="scene size for the layers")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per mode")
    args = parser.parse_args()
    before = torch.get_num_threads()
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPU cores, load average "
        f"{os.getloadavg()[0]:.1f}; threads {THREADS} "
        f"({'16 is oversubscribed' if (os.cpu_count() or 1) < 16 else '16 fit'})"
    )
    cases = gemm_cases(args.voxels) + layer_cases(args.voxels)
    header = (
        f"{'case':38s} {'thr':>3s} {'det ms':>8s} {'base ms':>8s} {'det/base':>8s} "
        f"{'(median)':>8s} {'(cpu)':>6s} {'det x1t':>7s} {'base x1t':>8s} {'det=1t':>6s} "
        f"{'base=1t':>7s}"
    )
    print(
        "ms: minimum wall time of the interleaved runs; det/base from the minima, the medians "
        "and the CPU times; x1t: wall speed-up over 1 thread; =1t: bitwise equal to 1 thread"
    )
    print(header)
    print("-" * len(header))
    try:
        for case in cases:
            first: dict[str, Timing] = {}
            for threads in THREADS:
                torch.set_num_threads(threads)
                row = interleaved_times(case.run, args.repeat)
                for name in MODES:
                    first.setdefault(name, row[name])
                det, base = row["deterministic"], row["baseline"]
                same = {
                    name: all(
                        torch.equal(a, b)
                        for a, b in zip(row[name].out, first[name].out, strict=True)
                    )
                    for name in MODES
                }
                print(
                    f"{case.name:38s} {threads:3d} {det.wall * 1e3:8.1f} {base.wall * 1e3:8.1f} "
                    f"{det.wall / base.wall:8.2f} {det.wall_median / base.wall_median:8.2f} "
                    f"{det.cpu / base.cpu:6.2f} {first['deterministic'].wall / det.wall:7.2f} "
                    f"{first['baseline'].wall / base.wall:8.2f} {same['deterministic']!s:>6s} "
                    f"{same['baseline']!s:>7s}",
                    flush=True,
                )
    finally:
        torch.set_num_threads(before)


if __name__ == "__main__":
    main()

"""torch_lattice sparse conv vs spconv 2.x on surface scenes, side by side in one process.

For each scene (about 100k and 200k voxels in a 512^3 grid, see lattice_conformance.scenes) and
each layer (subm 3x3x3 32->32 and 64->64, a k2 s2 64->64 conv) it times, on CPU:

* ``ours+map``: the layer on a fresh support, kernel-map building included;
* ``ours``: the layer with its map cached (later layers of a network);
* ``map``: the kernel-map build alone;
* ``spconv+map`` / ``spconv``: the same layer in spconv, which runs with
  ``torch.set_num_threads(1)`` (its multi-threaded CPU scatter races);
* ``spconv-map``: spconv's pair generation alone (``get_indice_pairs``, what
  its layer runs first on a fresh tensor);

Every timing of one layer runs interleaved with the others (round by round,
see :func:`interleaved`), because the machine may be shared; ratios are
medians of per-round ratios.

ours runs both with one thread (``ours@1``, the like-for-like comparison) and
with ``--threads`` threads (default: all the machine's cores).  Printed:
spconv / ours (above 1: ours is faster) and the effective rate
``2 * pairs * C_in * C_out / time`` as a share of the machine's dense f32 GEMM
rate, measured in the same process with ``torch.mm`` at the same thread count
(``(4096 x 64) @ (64 x 64)`` blocks, the shape a sparse conv's GEMMs have, and
a 2048^3 product for reference).

With CUDA available it also times the CUDA path (f32 and f16, cached map and
map included) and spconv's CUDA path when spconv has one.  Timings are medians
of ``--repeat`` runs after a warm-up; CUDA timings synchronise.

Run: ``.venv/bin/python benchmarks/bench_torch_conv.py [--repeat 5] [--sizes 100000 200000]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from lattice_conformance.scenes import batched, make_scene
from torch_lattice import SparseTensor, ops
from torch_lattice.kernel_map import conv_map, subm_map
from torch_lattice.sparse import Support

try:  # spconv is the outside peer; the benchmark still runs without it
    import spconv.pytorch as spconv
    from spconv.pytorch import ops as spconv_ops
except ImportError:  # pragma: no cover - depends on the machine
    spconv = None
    spconv_ops = None


@dataclass(frozen=True)
class Layer:
    name: str
    kind: str  # "subm" or "conv"
    c_in: int
    c_out: int
    kernel: int
    stride: int


LAYERS = (
    Layer("subm3 32->32", "subm", 32, 32, 3, 1),
    Layer("subm3 64->64", "subm", 64, 64, 3, 1),
    Layer("conv k2s2 64->64", "conv", 64, 64, 2, 2),
)


def median_time(fn: Callable[[], object], repeat: int, cuda: bool = False) -> float:
    """Median of ``repeat`` runs after one warm-up (synchronising on CUDA)."""
    fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gemm_rate(threads: int, repeat: int, device: str = "cpu") -> tuple[float, float]:
    """Dense f32 GEMM GFLOP/s: (4096x64)@(64x64) blocks and a 2048^3 product."""
    torch.set_num_threads(threads)
    cuda = device == "cuda"
    a = torch.randn(4096, 64, device=device)
    b = torch.randn(64, 64, device=device)
    blocks = 64 if not cuda else 1024
    big = torch.randn(4096 * blocks, 64, device=device)
    t_block = (
        median_time(lambda: big @ b, repeat, cuda)
        if cuda
        else min(median_time(lambda: a @ b, repeat * 20) for _ in range(3))
    )
    rows = big.shape[0] if cuda else 4096
    sq = torch.randn(2048, 2048, device=device)
    t_sq = median_time(lambda: sq @ sq, repeat, cuda)
    return 2 * rows * 64 * 64 / t_block / 1e9, 2 * 2048**3 / t_sq / 1e9


def _weights(layer: Layer, device: str, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    k = layer.kernel
    w = torch.randn(layer.c_out, k, k, k, layer.c_in, generator=g) * 0.05
    return w.to(device=device, dtype=dtype)


def _pairs(layer: Layer, coords: torch.Tensor) -> int:
    support = Support(coords, (1, 1, 1))
    k = (layer.kernel,) * 3
    if layer.kind == "subm":
        return subm_map(support, k, (1, 1, 1)).num_pairs
    s = (layer.stride,) * 3
    return conv_map(support, k, s, (0, 0, 0), (1, 1, 1))[1].num_pairs


def _ours(layer: Layer, x: SparseTensor, w: torch.Tensor) -> SparseTensor:
    if layer.kind == "subm":
        return ops.subm_conv3d(x, w, kernel_size=layer.kernel)
    return ops.conv3d(x, w, kernel_size=layer.kernel, stride=layer.stride)


def _fresh(layer: Layer, coords: torch.Tensor, feats: torch.Tensor, w: torch.Tensor) -> object:
    return _ours(layer, SparseTensor.trusted(coords, feats), w)


def _spconv_fresh(
    module: torch.nn.Module, feats: torch.Tensor, coords: torch.Tensor, shape: list[int]
) -> object:
    assert spconv is not None
    return module(spconv.SparseConvTensor(feats, coords, shape, 1))


def _map_only(layer: Layer, coords: torch.Tensor) -> object:
    support = Support(coords, (1, 1, 1))
    k = (layer.kernel,) * 3
    if layer.kind == "subm":
        return subm_map(support, k, (1, 1, 1))
    return conv_map(support, k, (layer.stride,) * 3, (0, 0, 0), (1, 1, 1))


def _spconv_map(module: Any, coords: torch.Tensor, shape: list[int]) -> object:
    """spconv's own pair generation for the module's geometry (what its layer runs first)."""
    assert spconv is not None
    return spconv_ops.get_indice_pairs(
        coords,
        1,
        shape,
        module.algo,
        list(module.kernel_size),
        list(module.stride),
        list(module.padding),
        list(module.dilation),
        list(module.output_padding),
        module.subm,
        False,
    )


def _spconv_layer(layer: Layer, w: torch.Tensor) -> torch.nn.Module:
    assert spconv is not None
    if layer.kind == "subm":
        module = spconv.SubMConv3d(
            layer.c_in, layer.c_out, layer.kernel, bias=False, indice_key="b"
        )
    else:
        module = spconv.SparseConv3d(
            layer.c_in, layer.c_out, layer.kernel, stride=layer.stride, bias=False, indice_key="b"
        )
    with torch.no_grad():
        module.weight.copy_(w.float().cpu())
    return module.to(w.device).to(w.dtype)


def bench_cpu(n: int, threads: int, repeat: int) -> None:
    coords_np, _ = make_scene(n)
    coords = torch.from_numpy(batched(coords_np))
    print(f"\nscene: {coords.shape[0]} voxels (CPU)")
    rates = {t: gemm_rate(t, repeat) for t in sorted({1, threads})}
    for t, (blk, sq) in rates.items():
        print(f"  dense f32 GEMM @{t} thread(s): {blk:.1f} GFLOP/s (4096x64x64), {sq:.1f} (2048^3)")
    for layer in LAYERS:
        w = _weights(layer, "cpu", torch.float32)
        feats = torch.randn(coords.shape[0], layer.c_in, generator=torch.Generator().manual_seed(1))
        pairs = _pairs(layer, coords)
        flops = 2 * pairs * layer.c_in * layer.c_out
        fns: dict[str, Callable[[], object]] = {}
        for t in sorted({1, threads}):
            cached = SparseTensor.trusted(coords, feats)
            fns[f"ours@{t}+map"] = _at(t, partial(_fresh, layer, coords, feats, w))
            fns[f"ours@{t}"] = _at(t, partial(_ours, layer, cached, w))
            fns[f"map@{t}"] = _at(t, partial(_map_only, layer, coords))
        if spconv is not None:
            module = _spconv_layer(layer, w)
            shape = [int(v) + 2 for v in coords[:, 1:].max(dim=0).values]
            first = spconv.SparseConvTensor(feats, coords, shape, 1)
            fns["spconv+map"] = _at(1, partial(_spconv_fresh, module, feats, coords, shape))
            fns["spconv-map"] = _at(1, partial(_spconv_map, module, coords, shape))
            # the warm-up call builds and caches the indice pairs under indice_key "b"
            fns["spconv"] = _at(1, partial(module, first))
        with torch.no_grad():
            times = interleaved(fns, repeat)
        row = {key: statistics.median(v) for key, v in times.items()}
        print(f"  {layer.name}: pairs {pairs} ({pairs / coords.shape[0]:.1f}/voxel)")
        for key, value in row.items():
            t = int(key.split("@")[1].split("+")[0]) if "@" in key else 1
            rate = flops / value / 1e9
            share = rate / rates[t][0] if key.startswith("ours") else float("nan")
            extra = (
                f"  eff {rate:6.1f} GFLOP/s = {share:5.1%} of GEMM@{t}"
                if key.startswith("ours")
                else ""
            )
            print(f"    {key:>14}: {value * 1e3:8.2f} ms{extra}")
        if spconv is not None:
            for t in sorted({1, threads}):
                fresh = _paired(times["spconv+map"], times[f"ours@{t}+map"])
                cached_ratio = _paired(times["spconv"], times[f"ours@{t}"])
                map_ratio = _paired(times["spconv-map"], times[f"map@{t}"])
                print(
                    f"    spconv+map / ours@{t}+map = {fresh:.2f}x   "
                    f"spconv / ours@{t} (cached) = {cached_ratio:.2f}x   "
                    f"spconv-map / map@{t} = {map_ratio:.2f}x"
                )


def _at(threads: int, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with ``torch.set_num_threads(threads)``."""

    def run() -> object:
        torch.set_num_threads(threads)
        return fn()

    return run


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Times of every ``fn`` over ``repeat`` rounds, each round running all of them in turn.

    Every function is warmed once first.  Within a round the functions run one
    after another, starting one further along each round, so that a change in
    the machine's load (it is shared) falls on all of them alike; ratios are
    then taken round by round (:func:`_paired`).
    """
    for fn in fns.values():
        fn()
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeat):
        for i in range(len(names)):
            name = names[(i + r) % len(names)]
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def _paired(peer: list[float], ours: list[float]) -> float:
    """Median over rounds of peer / ours (above 1: ours is faster)."""
    return statistics.median(p / o for p, o in zip(peer, ours, strict=True))


def bench_cuda(n: int, repeat: int) -> None:
    coords_np, _ = make_scene(n)
    coords = torch.from_numpy(batched(coords_np)).cuda()
    print(f"\nscene: {coords.shape[0]} voxels (CUDA: {torch.cuda.get_device_name()})")
    blk, sq = gemm_rate(1, repeat, "cuda")
    print(f"  dense f32 GEMM: {blk:.0f} GFLOP/s (N x 64 x 64), {sq:.0f} (2048^3)")
    for layer in LAYERS:
        pairs = _pairs(layer, coords)
        flops = 2 * pairs * layer.c_in * layer.c_out
        print(f"  {layer.name}: pairs {pairs}")
        for dtype in (torch.float32, torch.float16):
            w = _weights(layer, "cuda", dtype)
            feats = torch.randn(coords.shape[0], layer.c_in, device="cuda").to(dtype)
            cached = SparseTensor.trusted(coords, feats)
            with torch.no_grad():
                t_map = median_time(partial(_fresh, layer, coords, feats, w), repeat, True)
                t_cached = median_time(partial(_ours, layer, cached, w), repeat, True)
            name = str(dtype).replace("torch.", "")
            print(
                f"    ours {name}: +map {t_map * 1e3:7.3f} ms, cached {t_cached * 1e3:7.3f} ms "
                f"(eff {flops / t_cached / 1e9:8.0f} GFLOP/s)"
            )
            if spconv is not None:
                try:
                    module = _spconv_layer(layer, w)
                    shape = [int(v) + 2 for v in coords[:, 1:].max(dim=0).values]
                    with torch.no_grad():
                        first = spconv.SparseConvTensor(feats, coords, shape, 1)
                        module(first)
                        t_sp = median_time(partial(module, first), repeat, True)
                    print(
                        f"    spconv {name} cached {t_sp * 1e3:7.3f} ms: "
                        f"spconv / ours {t_sp / t_cached:.2f}x"
                    )
                except Exception as err:  # spconv CPU-only builds fail here
                    print(f"    spconv {name}: unavailable on CUDA ({type(err).__name__})")
                    PEER_FAILURES.append(f"spconv {name} on CUDA: {type(err).__name__}: {err}")


PEER_FAILURES: list[str] = []
"""Peer layers that could not run (a CPU-only spconv on CUDA): a dry run counts them as failures."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU section")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run every section once on a 4000-voxel scene; exit 1 if any section fails",
    )
    args = parser.parse_args()
    if args.dry_run:
        args.sizes, args.repeat = [4000], 1
    print(f"torch {torch.__version__}, spconv {'yes' if spconv is not None else 'not installed'}")
    failures: list[str] = []
    for n in args.sizes:
        sections = (
            [] if args.no_cpu else [(f"cpu {n}", partial(bench_cpu, n, args.threads, args.repeat))]
        )
        if torch.cuda.is_available():
            sections.append((f"cuda {n}", partial(bench_cuda, n, args.repeat)))
        for name, run in sections:
            try:
                run()
            except Exception as err:  # one failing section must not hide the others
                failures.append(f"{name}: {type(err).__name__}: {err}")
                print(f"FAILED section {name}: {type(err).__name__}: {err}", file=sys.stderr)
    if args.dry_run:
        failures += PEER_FAILURES
    if failures:
        print(f"{len(failures)} section(s) failed:", *failures, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""mlx_lattice sparse conv vs spconv 2.x (CPU, one thread) on surface scenes, in one process.

For each scene (about 100k and 200k voxels in a 512^3 grid, see lattice_conformance.scenes)
and each layer (subm 3x3x3 32->32 and 64->64, a k2 s2 32->64 conv) it times:

* ``mlx+map``: the layer on a fresh support, kernel-map building included;
* ``mlx``: the layer with its map already cached (later layers of a network);
* ``map``: the kernel-map build alone, and its share of ``mlx+map``;
* ``spconv+map`` / ``spconv``: the same layer in spconv on CPU with
  ``torch.set_num_threads(1)`` (its multi-threaded CPU path races), when
  spconv is installed;

and prints the ratio spconv / mlx (above 1: mlx is faster) and the effective
rate 2 * pairs * C_in * C_out / time against MLX's own dense f32 matmul rate
(a dense ``(N, C_in) @ (C_in, C_out)`` over the scene's N rows, i.e. a per-point
linear layer on the same cloud) measured just before each layer in the same
process (``mm%``: the layer's effective rate as a share of it).

Note: MLX's Linux CPU wheel links the reference (netlib) BLAS, so its dense
matmul runs at a few GFLOP/s; spconv's CPU GEMM is much faster in absolute
terms.  The mm% column is what isolates the sparse machinery's overhead.
Timings are the best of ``--repeat`` runs after a warm-up; results are
forced with ``mx.eval`` / by reading the torch result.

Run: ``.venv/bin/python benchmarks/bench_mlx_conv.py [--repeat 3] [--sizes 100000 200000]``
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from lattice_conformance.scenes import batched, make_scene
from mlx_lattice import SparseTensor, ops
from mlx_lattice.coords import SupportCache
from mlx_lattice.kernel_map import conv_support, subm_map


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
    Layer("conv k2s2 32->64", "conv", 32, 64, 2, 2),
)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of ``repeat`` runs after a warm-up.

    The minimum, not the median: on a shared machine the other tenants only
    ever add time, so the fastest run is the least disturbed one.
    """
    fn()  # warm-up (allocations, lazy imports)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def mlx_matmul_rate(c_in: int, c_out: int, rows: int, repeat: int) -> float:
    """GFLOP/s of MLX's dense f32 ``(rows, C_in) @ (C_in, C_out)`` on the default device."""
    a = mx.random.normal((rows, c_in))
    w = mx.random.normal((c_in, c_out))
    mx.eval(a, w)
    t = best_time(lambda: mx.eval(a @ w), repeat)
    return 2.0 * rows * c_in * c_out / t / 1e9


def run_mlx(coords: np.ndarray, layer: Layer, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    c = mx.array(coords)
    f = mx.array(rng.standard_normal((len(coords), layer.c_in)).astype(np.float32))
    w = mx.array(
        (rng.standard_normal((layer.c_out, *(layer.kernel,) * 3, layer.c_in)) * 0.05).astype(
            np.float32
        )
    )
    mx.eval(c, f, w)
    k, s = layer.kernel, layer.stride

    def layer_on(x: SparseTensor) -> SparseTensor:
        if layer.kind == "subm":
            return ops.subm_conv3d(x, w, kernel_size=k)
        return ops.conv3d(x, w, kernel_size=k, stride=s)

    def fresh() -> None:  # a new support: nothing cached, map built inside the layer
        y = layer_on(SparseTensor.trusted(c, f))
        mx.eval(y.feats, y.coords)

    def build_map() -> int:
        cache = SupportCache()
        if layer.kind == "subm":
            kmap = subm_map(cache, c, (1, 1, 1), (k, k, k), (1, 1, 1))
        else:
            kmap = conv_support(cache, c, (1, 1, 1), (k,) * 3, (s,) * 3, (0,) * 3, (1,) * 3).kmap
        mx.eval(kmap.in_idx, kmap.out_idx)
        return kmap.num_pairs

    cached_input = SparseTensor.trusted(c, f)
    mx.eval(layer_on(cached_input).feats)  # builds and caches the map

    def cached() -> None:
        mx.eval(layer_on(cached_input).feats)

    return {
        "pairs": float(build_map()),
        "mlx+map": best_time(fresh, repeat),
        "mlx": best_time(cached, repeat),
        "map": best_time(build_map, repeat),
    }


def run_spconv(coords: np.ndarray, layer: Layer, repeat: int) -> dict[str, float] | None:
    try:
        import spconv.pytorch as spconv
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    feats = torch.from_numpy(rng.standard_normal((len(coords), layer.c_in)).astype(np.float32))
    idx = torch.from_numpy(coords)
    shape = [int(v) + 4 for v in coords[:, 1:].max(axis=0)]
    key = "bench"
    if layer.kind == "subm":
        conv = spconv.SubMConv3d(layer.c_in, layer.c_out, layer.kernel, bias=False, indice_key=key)
    else:
        conv = spconv.SparseConv3d(
            layer.c_in, layer.c_out, layer.kernel, stride=layer.stride, bias=False, indice_key=key
        )
    conv.eval()

    def fresh() -> object:
        with torch.no_grad():
            x = spconv.SparseConvTensor(feats, idx, shape, 1)
            return conv(x).features.sum().item()

    with torch.no_grad():
        first = conv(spconv.SparseConvTensor(feats, idx, shape, 1))
    indice_dict = first.indice_dict

    def cached() -> object:
        with torch.no_grad():
            x = spconv.SparseConvTensor(feats, idx, shape, 1, indice_dict=indice_dict)
            if layer.kind == "conv":
                # spconv reuses a strided conv's pairs only for its inverse; the forward
                # layer always rebuilds them, so "cached" equals "with map" here.
                x = spconv.SparseConvTensor(feats, idx, shape, 1)
            return conv(x).features.sum().item()

    return {"spconv+map": best_time(fresh, repeat), "spconv": best_time(cached, repeat)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run every layer once on a 4000-voxel scene; exit 1 if any layer fails",
    )
    args = parser.parse_args()
    if args.dry_run:
        args.sizes, args.repeat = [4000], 1
    failures: list[str] = []

    print(f"mlx {importlib.metadata.version('mlx')} on {mx.default_device()}")
    head = (
        f"{'scene':>8} {'layer':<17} {'pairs':>9} {'mlx+map':>9} {'mlx':>9} {'map':>8} "
        f"{'map%':>5} {'GF/s':>6} {'mmGF/s':>6} {'mm%':>5} {'spconv+map':>10} {'spconv':>8} "
        f"{'ratio+map':>9} {'ratio':>6}"
    )
    print(head)
    print("-" * len(head))
    for size in args.sizes:
        coords = batched(make_scene(size, grid=512, seed=0)[0])
        for layer in LAYERS:
            try:
                ref = mlx_matmul_rate(layer.c_in, layer.c_out, len(coords), args.repeat)
                m = run_mlx(coords, layer, args.repeat)
                sp = run_spconv(coords, layer, args.repeat)
            except Exception as err:  # one failing layer must not hide the others
                failures.append(f"{layer.name} at {len(coords)}: {type(err).__name__}: {err}")
                print(f"FAILED {layer.name}: {type(err).__name__}: {err}", file=sys.stderr)
                continue
            if args.dry_run and not sp and spconv_missing_is_failure():
                failures.append(f"{layer.name}: the spconv peer did not run")
            gflops = 2.0 * m["pairs"] * layer.c_in * layer.c_out / 1e9
            rate = gflops / m["mlx+map"]
            sp_cols = (
                f"{sp['spconv+map']:10.3f} {sp['spconv']:8.3f} "
                f"{sp['spconv+map'] / m['mlx+map']:9.2f} {sp['spconv'] / m['mlx']:6.2f}"
                if sp
                else f"{'n/a':>10} {'n/a':>8} {'':>9} {'':>6}"
            )
            print(
                f"{len(coords):>8} {layer.name:<17} {int(m['pairs']):>9} {m['mlx+map']:9.3f} "
                f"{m['mlx']:9.3f} {m['map']:8.3f} {100 * m['map'] / m['mlx+map']:5.1f} "
                f"{rate:6.2f} {ref:6.2f} {100 * rate / ref:5.0f} {sp_cols}",
                flush=True,
            )
    print(
        "times in seconds (best of --repeat); ratio = spconv time / mlx time; GF/s and mm% use "
        "mlx+map;\nmmGF/s = MLX dense f32 (N x C_in) @ (C_in x C_out) on the scene's N rows, "
        "measured just before the layer"
    )
    if failures:
        print(f"{len(failures)} section(s) failed:", *failures, sep="\n  ", file=sys.stderr)
        return 1
    return 0


def spconv_missing_is_failure() -> bool:
    """A dry run fails when spconv is installed but its layer did not run."""
    try:
        import spconv  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())

"""mlx_lattice on MLX's CUDA backend beside spconv (CUDA), f16, in one process.

For the layers of a sparse U-Net (subm 3x3x3 at C = 32, 64, 128; k2 s2 and
k3 s2 p1 convs; a k2 s2 transposed conv; the inverse conv that reuses the
k2 s2 conv's map; max, avg and sum pools) and for the four-level MinkUNet
forward (widths 32-64-128-256 down, 256-128-96-96 up, two subm blocks per
stage, ReLU, no batch norm), on the project's surface scene and on a
LiDAR-like street scan it never saw (``lidar_scene.py``), it prints:

* ``mlx`` / ``mlx+map``: mlx_lattice's time with the map cached on the input
  support, and with it built inside the call (a fresh support each call: what
  a deployed model pays for every new scan);
* ``spconv`` / ``spconv+map``: spconv 2.x with its indice pairs reused, and
  rebuilt (its pools keep no pairs for a new tensor: built only);
* the ratios mlx / spconv (below 1: mlx_lattice is faster);
* per scene, what the subm map costs the output-stationary conv tiles: the
  real pairs a row, and the work 64-row tiles do for them in row order and
  with rows sorted by tap mask (:func:`subm_tile_work`, counted on the
  generic path's map built on the CPU, so the FLOPs and gathers behind the
  subm rows are known).

How it keeps from flattering us: both libraries are timed in the same rounds
(``bench_harness.paired_stable_time``, by the wall clock since MLX runs on
its own CUDA stream; every call waits for its library's work), and rounds go
on until each library's last three round medians agree within 2%: spconv
tunes its algorithms on its first calls, MLX compiles its kernels on first
use. ``--processes N`` runs the whole benchmark N times and prints the median
of every number with its spread; ``RESULT`` lines carry the raw values.

Run on a CUDA machine with ``mlx[cuda13]``, torch and spconv installed:
``python benchmarks/bench_mlx_cuda.py [--scenes surface lidar] [--sizes 100000 300000]``.
``--dry-run`` runs the MLX side only, on the CPU, on a small scene (no spconv
needed): it checks that the script runs, and measures nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
from bench_harness import (
    LAYERS,
    POOLS,
    Layer,
    Pool,
    aggregate,
    paired_stable_time,
    without_option,
)
from lattice_conformance.scenes import batched, make_scene
from lidar_scene import lidar_coords
from mlx_lattice import SparseTensor, cuda, ops
from mlx_lattice.coords import SupportCache
from mlx_lattice.kernel_map import subm_map

START = time.perf_counter()
MAX_ROUNDS = int(os.environ.get("BENCH_MAX_ROUNDS", "20"))
"""Rounds after which a library that has not settled is reported anyway (marked unstable)."""


def _weight(rng: np.random.Generator, c_out: int, k: int, c_in: int) -> np.ndarray:
    """He-scaled ``(C_out, k, k, k, C_in)`` f32 weights: the layout of both libraries."""
    w: np.ndarray = (
        rng.standard_normal((c_out, k, k, k, c_in)) * (2.0 / (c_in * k**3)) ** 0.5
    ).astype(np.float32)
    return w


def _mlx_sync(*arrays: mx.array) -> None:
    mx.eval(*arrays)
    mx.synchronize()


def _emit(scene: str, name: str, times: dict[str, float]) -> None:
    for key, seconds in times.items():
        print(f"RESULT {scene} {name} {key} {seconds * 1e3:.4f}", flush=True)


def _print_row(name: str, times: dict[str, float], rounds: int, unstable: list[str]) -> None:
    def ms(key: str) -> str:
        return f"{times[key] * 1e3:9.3f}" if key in times else f"{'':>9}"

    def ratio(a: str, b: str) -> str:
        return f"{times[a] / times[b]:7.2f}x" if a in times and b in times else f"{'':>8}"

    note = f"  rounds {rounds}" + (f", unstable: {', '.join(unstable)}" if unstable else "")
    print(
        f"  {name:<26}{ms('mlx')}{ms('mlx+map')}{ms('spconv')}{ms('spconv+map')}"
        f"{ratio('mlx', 'spconv')}{ratio('mlx+map', 'spconv+map')}{note}",
        flush=True,
    )


# ----------------------------------------------------------------------- layers


def _mlx_layer(layer: Layer, x: SparseTensor, w: mx.array, coarse: SparseTensor | None) -> Any:
    k, s, p = layer.kernel, layer.stride, layer.padding
    if layer.kind == "subm":
        return ops.subm_conv3d(x, w, kernel_size=k)
    if layer.kind == "conv":  # spconv's SparseConv3d: every o with c = o*s - p + k (indexed)
        return ops.full_conv3d(x, w, kernel_size=k, stride=s, padding=p)
    assert coarse is not None  # the transposed layers run on a k2s2 conv's output
    if layer.kind == "transpose":
        return ops.conv_transpose3d(coarse, w, kernel_size=k, stride=s)
    return ops.conv_transpose3d(coarse, w, kernel_size=k, stride=s, coordinates=x)


def _mlx_down(x: SparseTensor, w: mx.array) -> SparseTensor:
    """The k2s2 conv whose output the transposed layers read (and whose map the inverse reuses)."""
    return ops.conv3d(x, w, kernel_size=2, stride=2)


def _mlx_fns(
    layer: Layer, coords: np.ndarray, feats: np.ndarray, w: np.ndarray
) -> dict[str, Callable[[], None]]:
    c = mx.array(coords)
    f = mx.array(feats).astype(mx.float16)
    wm = mx.array(w).astype(mx.float16)
    wd = mx.array(_weight(np.random.default_rng(1), 64, 2, layer.c_in)).astype(mx.float16)
    x = SparseTensor.trusted(c, f)
    coarse = _mlx_down(x, wd) if layer.kind in ("transpose", "inverse") else None
    _mlx_sync(wm, wd, *(() if coarse is None else (coarse.feats, coarse.coords)))

    def cached() -> None:
        y = _mlx_layer(layer, x, wm, coarse)
        _mlx_sync(y.feats, y.coords)

    def fresh() -> None:
        xf = SparseTensor.trusted(c, f)
        if layer.kind == "transpose":  # a fresh coarse support: the transposed map is built
            assert coarse is not None
            cf: SparseTensor | None = SparseTensor.trusted(coarse.coords, coarse.feats, 2)
        elif layer.kind == "inverse":  # the down conv's map is built, the inverse reuses it
            assert coarse is not None
            cf = _mlx_down(xf, wd).with_feats(coarse.feats)
        else:
            cf = None
        y = _mlx_layer(layer, xf, wm, cf)
        _mlx_sync(y.feats, y.coords)

    fns = {"mlx": cached, "mlx+map": fresh}
    if layer.kind == "inverse":  # its own share: the down conv with its map, timed alike

        def down() -> None:
            y = _mlx_down(SparseTensor.trusted(c, f), wd)
            _mlx_sync(y.feats, y.coords)

        fns["mlx down+map"] = down
    return fns


def _spconv_fns(
    layer: Layer, coords: np.ndarray, feats: np.ndarray, w: np.ndarray
) -> dict[str, Callable[[], None]]:
    import spconv.pytorch as spconv
    import torch

    dev = torch.device("cuda")
    idx = torch.from_numpy(coords).to(dev)
    f = torch.from_numpy(feats).to(dev).half()
    shape = [int(v) + 4 for v in coords[:, 1:].max(axis=0)]
    k, s, p = layer.kernel, layer.stride, layer.padding
    if layer.kind == "subm":
        m = spconv.SubMConv3d(layer.c_in, layer.c_out, k, bias=False, indice_key="k")
    elif layer.kind == "conv":
        m = spconv.SparseConv3d(layer.c_in, layer.c_out, k, s, p, bias=False, indice_key="k")
    elif layer.kind == "transpose":
        m = spconv.SparseConvTranspose3d(layer.c_in, layer.c_out, k, s, bias=False)
    else:
        m = spconv.SparseInverseConv3d(layer.c_in, layer.c_out, k, indice_key="down", bias=False)
    with torch.no_grad():  # spconv >= 2.2 layout (C_out, k0, k1, k2, C_in), like ours
        m.weight.copy_(torch.from_numpy(w).reshape(m.weight.shape))
    net = m.to(dev).half()
    wd = torch.from_numpy(_weight(np.random.default_rng(1), 64, 2, layer.c_in))
    down = spconv.SparseConv3d(layer.c_in, 64, 2, 2, bias=False, indice_key="down")
    with torch.no_grad():
        down.weight.copy_(wd.reshape(down.weight.shape))
    down = down.to(dev).half()

    def timed(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                fn()
            torch.cuda.synchronize()

        return run

    def tensor() -> Any:
        return spconv.SparseConvTensor(f, idx, shape, 1)

    if layer.kind in ("subm", "conv"):
        first = tensor()
        timed(lambda: net(first))()  # builds the pairs once, cached under indice_key "k"
        return {"spconv": timed(lambda: net(first)), "spconv+map": timed(lambda: net(tensor()))}
    with torch.no_grad():
        coarse = down(tensor())
    fns = {"spconv": timed(lambda: net(coarse))}
    if layer.kind == "transpose":  # a fresh coarse tensor: its transposed pairs are built

        def fresh() -> Any:
            t = spconv.SparseConvTensor(coarse.features, coarse.indices, coarse.spatial_shape, 1)
            return net(t)

        fns["spconv+map"] = timed(fresh)
    else:  # the inverse reuses the down conv's pairs: its own share is the difference
        fns["spconv+map"] = timed(lambda: net(down(tensor())))
        fns["spconv down+map"] = timed(lambda: down(tensor()))
    return fns


def bench_layer(
    layer: Layer, coords: np.ndarray, peers: bool, repeat: int
) -> tuple[dict[str, float], int, list[str]]:
    rng = np.random.default_rng(0)
    feats = rng.standard_normal((len(coords), layer.c_in)).astype(np.float32)
    w = _weight(rng, layer.c_out, layer.kernel, layer.c_in)
    fns = _mlx_fns(layer, coords, feats, w)
    if peers:
        fns.update(_spconv_fns(layer, coords, feats, w))
    times, rounds, unstable = paired_stable_time(fns, repeat, max_rounds=MAX_ROUNDS, wall=True)
    for lib in ("mlx", "spconv"):  # the inverse layer's share only, not its paired down conv
        down = times.pop(f"{lib} down+map", None)
        if down is not None:
            times[f"{lib}+map"] -= down
    return times, rounds, unstable


# ------------------------------------------------------------------------ pools


def bench_pool(
    pool: Pool, coords: np.ndarray, peers: bool, repeat: int
) -> tuple[dict[str, float], int, list[str]]:
    """One pool (f16, 64 channels): cached and with its map built, spconv's where it has one."""
    feats = np.random.default_rng(2).standard_normal((len(coords), 64)).astype(np.float32)
    c = mx.array(coords)
    f = mx.array(feats).astype(mx.float16)
    op = getattr(ops, pool.op)

    def mlx(x: SparseTensor) -> None:
        y = op(x, mode=pool.mode, kernel_size=pool.kernel, stride=pool.stride, padding=pool.padding)
        _mlx_sync(y.feats, y.coords)

    cached_x = SparseTensor.trusted(c, f)
    fns: dict[str, Callable[[], None]] = {
        "mlx": lambda: mlx(cached_x),
        "mlx+map": lambda: mlx(SparseTensor.trusted(c, f)),
    }
    if peers and pool.peer is not None:
        import spconv.pytorch as spconv
        import torch

        module = getattr(spconv, pool.peer)(pool.kernel, pool.stride, pool.padding).cuda()
        idx = torch.from_numpy(coords).cuda()
        tf = torch.from_numpy(feats).cuda().half()
        shape = [int(v) + 4 for v in coords[:, 1:].max(axis=0)]

        def peer() -> None:  # spconv keeps no pool pairs for a new tensor: always built
            with torch.no_grad():
                module(spconv.SparseConvTensor(tf, idx, shape, 1))
            torch.cuda.synchronize()

        fns["spconv+map"] = peer
    return paired_stable_time(fns, repeat, max_rounds=MAX_ROUNDS, wall=True)


# ----------------------------------------------------------------------- MinkUNet

DOWN = (32, 64, 128, 256)
UP = (256, 128, 96, 96)
IN_CH = 4


def unet_plan() -> list[tuple[str, int, int, int]]:
    """(kind, C_in, C_out, K) of every conv of the four-level MinkUNet, in call order."""
    plan = [("subm", IN_CH, 32, 3), ("subm", 32, 32, 3)]
    prev = 32
    for c in DOWN:
        plan += [("down", prev, c, 2), ("subm", c, c, 3), ("subm", c, c, 3)]
        prev = c
    for c, skip in zip(UP, [32, *DOWN[:-1]][::-1], strict=True):
        plan += [("up", prev, c, 2), ("subm", c + skip, c, 3), ("subm", c, c, 3)]
        prev = c
    return plan


def mlx_unet(weights: list[mx.array]) -> Callable[[SparseTensor], mx.array]:
    """The MinkUNet forward on mlx_lattice (decoder convs onto the skip's support)."""
    plan = unet_plan()

    def forward(x: SparseTensor) -> mx.array:
        i = 0
        stack: list[SparseTensor] = []

        def block(x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
            nonlocal i
            kind, w = plan[i][0], weights[i]
            if kind == "subm":
                y = ops.subm_conv3d(x, w, kernel_size=3)
            elif kind == "down":
                y = ops.conv3d(x, w, kernel_size=2, stride=2)
            else:
                y = ops.conv_transpose3d(x, w, kernel_size=2, stride=2, coordinates=target)
            i += 1
            return y.with_feats(mx.maximum(y.feats, 0))

        x = block(block(x))
        for _ in DOWN:
            stack.append(x)
            x = block(block(block(x)))
        for _ in UP:
            skip = stack.pop()
            x = block(x, skip)
            x = x.with_feats(mx.concatenate([x.feats, skip.feats], axis=1))
            x = block(block(x))
        return x.feats

    return forward


def spconv_unet(ws: list[np.ndarray]) -> Callable[[Any], Any]:
    """The same network on spconv (inverse convs reuse the down convs' pairs)."""
    import spconv.pytorch as spconv
    import torch

    layers = []
    level, levels = 0, []
    for (kind, ci, co, k), w in zip(unet_plan(), ws, strict=True):
        if kind == "subm":
            m = spconv.SubMConv3d(ci, co, k, bias=False, indice_key=f"s{level}")
        elif kind == "down":
            levels.append(level)
            m = spconv.SparseConv3d(ci, co, k, 2, bias=False, indice_key=f"d{level}")
            level += 1
        else:
            level = levels.pop()
            m = spconv.SparseInverseConv3d(ci, co, k, indice_key=f"d{level}", bias=False)
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(w).reshape(m.weight.shape))
        layers.append(m.cuda().half())

    def forward(x: Any) -> Any:
        it = iter(layers)

        def block(x: Any) -> Any:
            y = next(it)(x)
            return y.replace_feature(torch.relu(y.features))

        stack = []
        x = block(block(x))
        for _ in DOWN:
            stack.append(x)
            x = block(block(block(x)))
        for _ in UP:
            skip = stack.pop()
            x = block(x)
            x = x.replace_feature(torch.cat([x.features, skip.features], dim=1))
            x = block(block(x))
        return x.features

    return forward


def bench_unet(
    coords: np.ndarray, peers: bool, repeat: int
) -> tuple[dict[str, float], int, list[str], dict[str, float]]:
    """Forward times (cached, maps built), and the peak memory of a built forward and agreement."""
    rng = np.random.default_rng(5)
    ws = [_weight(rng, co, k, ci) for _, ci, co, k in unet_plan()]
    feats = rng.standard_normal((len(coords), IN_CH)).astype(np.float32)
    c = mx.array(coords)
    f = mx.array(feats).astype(mx.float16)
    net = mlx_unet([mx.array(w).astype(mx.float16) for w in ws])
    cached_x = SparseTensor.trusted(c, f)
    fns: dict[str, Callable[[], None]] = {
        "mlx": lambda: _mlx_sync(net(cached_x)),
        "mlx+map": lambda: _mlx_sync(net(SparseTensor.trusted(c, f))),
    }
    extra: dict[str, float] = {}
    if peers:
        import spconv.pytorch as spconv
        import torch

        peer = spconv_unet(ws)
        idx = torch.from_numpy(coords).cuda()
        tf = torch.from_numpy(feats).cuda().half()
        shape = [int(v) + 4 for v in coords[:, 1:].max(axis=0)]

        def run_peer() -> None:
            with torch.no_grad():
                peer(spconv.SparseConvTensor(tf, idx, shape, 1))
            torch.cuda.synchronize()

        fns["spconv+map"] = run_peer
    times, rounds, unstable = paired_stable_time(fns, repeat, max_rounds=MAX_ROUNDS, wall=True)
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    got = net(SparseTensor.trusted(c, f))
    _mlx_sync(got)
    extra["mlx peak MiB"] = (mx.get_peak_memory() - base) / 2**20
    if peers:
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():  # agreement: the two networks compute the same function
            ref = peer(spconv.SparseConvTensor(tf, idx, shape, 1)).float().cpu().numpy()
        extra["spconv peak MiB"] = (torch.cuda.max_memory_allocated() - before) / 2**20
        out = np.asarray(got.astype(mx.float32))
        extra["rel_err"] = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    return times, rounds, unstable, extra


# ---------------------------------------------------------------------------- main


def scene_coords(kind: str, n: int) -> np.ndarray:
    """(rows, 4) int32 coordinates of a scene of about ``n`` voxels."""
    if kind == "lidar":
        return lidar_coords(n)
    pts, _ = make_scene(n, grid=512, seed=0)
    return batched(pts)


def subm_tile_work(coords: np.ndarray, tile: int = 64) -> tuple[float, float, float]:
    """(pairs per row, tile work / real pairs in row order, the same with rows sorted by mask).

    An output-stationary conv tile gathers and multiplies all its ``tile``
    rows for every 3x3x3 tap that reaches any of them; the ratio is that
    work over the real pairs (1 would be no waste). The pairs are the
    generic path's subm map, built on the CPU: a property of the
    coordinates, not of the CUDA kernels being timed.
    """
    with mx.stream(mx.cpu):
        kmap = subm_map(SupportCache(), mx.array(coords), (1, 1, 1), (3, 3, 3), (1, 1, 1))
        out_idx = np.asarray(kmap.out_idx)
    n, volume = len(coords), kmap.volume
    hit = np.zeros((volume, n), dtype=bool)
    hit[np.repeat(np.arange(volume), np.diff(kmap.starts)), out_idx] = True
    if kmap.identity_tap is not None:  # its pairs (every row onto itself) are not stored
        hit[kmap.identity_tap] = True
    mask = (hit.astype(np.int64) << np.arange(volume)[:, None]).sum(axis=0)
    real = int(hit.sum())

    def work(order: np.ndarray) -> float:
        pad = (-len(order)) % tile
        h = np.concatenate([hit[:, order], np.zeros((volume, pad), dtype=bool)], axis=1)
        return float(h.reshape(volume, -1, tile).any(axis=2).sum() * tile) / max(real, 1)

    return real / max(n, 1), work(np.arange(n)), work(np.argsort(mask, kind="stable"))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenes", nargs="+", default=["surface", "lidar"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--repeat", type=int, default=10, help="calls per timing round")
    parser.add_argument("--no-layers", action="store_true")
    parser.add_argument("--no-unet", action="store_true")
    parser.add_argument("--processes", type=int, default=1, help="run N processes, print medians")
    parser.add_argument("--no-peers", action="store_true", help="mlx_lattice only (no spconv)")
    parser.add_argument("--dry-run", action="store_true", help="MLX only, on the CPU, tiny scene")
    args = parser.parse_args()
    if args.processes > 1:
        raise SystemExit(aggregate(without_option(sys.argv, "--processes"), args.processes))
    if args.dry_run:
        mx.set_default_device(mx.cpu)
        args.sizes, args.repeat = [2_000], 1
    elif not cuda.available():
        raise SystemExit("bench_mlx_cuda needs MLX's CUDA backend (pip install 'mlx[cuda13]')")
    else:
        mx.set_default_device(mx.gpu)
    peers = not args.dry_run and not args.no_peers
    if not args.dry_run:
        import torch

        print(f"{torch.cuda.get_device_name()}; ", end="")
    version = getattr(mx, "__version__", "?")
    print(f"mlx {version} on {mx.default_device()}; f16; wall-clock rounds of {args.repeat}")
    for kind in args.scenes:
        for n in args.sizes:
            coords = scene_coords(kind, n)
            scene = f"{kind}-{n // 1000}k"
            print(f"\nscene {scene}: {len(coords)} voxels (ms; ratios mlx / spconv)")
            pairs, plain, by_mask = subm_tile_work(coords)
            print(
                f"  subm 3x3x3 map: {pairs:.1f} pairs a row; 64-row tiles do {plain:.2f}x the"
                f" real pairs' work in row order, {by_mask:.2f}x with rows sorted by tap mask"
            )
            print(
                f"  {'':<26}{'mlx':>9}{'mlx+map':>9}{'spconv':>9}{'sp+map':>9}"
                f"{'cached':>8}{'w/ map':>8}"
            )
            rows = [] if args.no_layers else list(LAYERS)
            for layer in rows:
                times, rounds, unstable = bench_layer(layer, coords, peers, args.repeat)
                _print_row(layer.name, times, rounds, unstable)
                _emit(scene, layer.name, times)
            for pool in [] if args.no_layers else POOLS:
                times, rounds, unstable = bench_pool(pool, coords, peers, args.repeat)
                _print_row(pool.name, times, rounds, unstable)
                _emit(scene, pool.name, times)
            if not args.no_unet:
                times, rounds, unstable, extra = bench_unet(coords, peers, args.repeat)
                _print_row("MinkUNet forward", times, rounds, unstable)
                _emit(scene, "MinkUNet forward", times)
                print("    " + ", ".join(f"{k} {v:.3g}" for k, v in extra.items()), flush=True)
                for key, value in extra.items():
                    print(f"RESULT {scene} MinkUNet forward {key} {value:.6g}", flush=True)
            print(f"  ({time.perf_counter() - START:.0f} s since start)", flush=True)


if __name__ == "__main__":
    main()

"""mlx_lattice on MLX's CUDA backend beside spconv (CUDA), f16, in one process.

Per layer (subm 3x3x3 at C = 32, 64, 128; a k2 s2 conv; a k2 s2 transposed
conv; the inverse conv that reuses the k2 s2 conv's map) on surface scenes
of about 100k and 200k voxels (lattice_conformance.scenes), and for the
four-level MinkUNet (widths 32-64-128-256 down, 256-128-96-96 up, two subm
blocks per stage, ReLU, no batch norm) forward, it prints:

* ``mlx`` / ``mlx+map``: mlx_lattice's time with the map cached on the input
  support, and with it built inside the call (a fresh support each time);
* ``generic``: the generic MLX path on the same GPU (``mlx_lattice.cuda``
  switched off), cached map, for reference;
* ``spconv`` / ``spconv+map``: spconv 2.x with its indice cache reused, and
  with it rebuilt;
* the ratios mlx / spconv (below 1: mlx is faster) for both.

Each time is the median of ``--repeat`` calls after warm-up calls, each call
synchronised (``mx.eval`` for MLX, ``torch.cuda.synchronize`` for spconv), so
launch overhead is included for both libraries.  FLOP counts use the real
pairs of each map (2 * pairs * C_in * C_out).

Run on a CUDA machine with ``mlx[cuda]``, torch and spconv installed:
``python benchmarks/bench_mlx_cuda.py [--sizes 100000 200000] [--repeat 20]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
from lattice_conformance.scenes import batched, make_scene
from mlx_lattice import SparseTensor, cuda, ops


@dataclass(frozen=True)
class Layer:
    name: str
    kind: str  # subm, down, transpose, inverse
    c_in: int
    c_out: int


LAYERS = (
    Layer("subm3 32->32", "subm", 32, 32),
    Layer("subm3 64->64", "subm", 64, 64),
    Layer("subm3 128->128", "subm", 128, 128),
    Layer("conv k2s2 64->64", "down", 64, 64),
    Layer("transposed k2s2 64->64", "transpose", 64, 64),
    Layer("inverse k2s2 64->64", "inverse", 64, 64),
)


def median_time(fn: Callable[[], object], repeat: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ------------------------------------------------------------------------ MLX side


def _mx_weight(rng: np.random.Generator, c_out: int, k: int, c_in: int) -> np.ndarray:
    w: np.ndarray = (
        rng.standard_normal((c_out, k, k, k, c_in)) * (2.0 / (c_in * k**3)) ** 0.5
    ).astype(np.float32)
    return w


def _mlx_layer(layer: Layer, x: SparseTensor, w: mx.array, fine: SparseTensor | None) -> Any:
    if layer.kind == "subm":
        return ops.subm_conv3d(x, w, kernel_size=3)
    if layer.kind == "down":
        return ops.conv3d(x, w, kernel_size=2, stride=2)
    if layer.kind == "transpose":
        return ops.conv_transpose3d(x, w, kernel_size=2, stride=2)
    return ops.conv_transpose3d(x, w, kernel_size=2, stride=2, coordinates=fine)


_DOWN_WEIGHTS: dict[tuple[int, int], mx.array] = {}


def _mlx_down(x: SparseTensor, c_out: int) -> SparseTensor:
    """The k2 s2 conv whose output the transposed layers read (weights made once)."""
    key = (c_out, x.num_channels)
    if key not in _DOWN_WEIGHTS:
        w = _mx_weight(np.random.default_rng(1), c_out, 2, x.num_channels)
        _DOWN_WEIGHTS[key] = mx.array(w).astype(x.dtype)
    return ops.conv3d(x, _DOWN_WEIGHTS[key], kernel_size=2, stride=2)


def bench_mlx_layer(
    layer: Layer, coords: np.ndarray, feats: np.ndarray, w: np.ndarray, repeat: int
) -> dict[str, float]:
    c = mx.array(coords)
    f = mx.array(feats).astype(mx.float16)
    wm = mx.array(w).astype(mx.float16)
    mx.eval(c, f, wm)
    out: dict[str, float] = {}
    for route, label in ((True, "mlx"), (False, "generic")):
        cuda.set_enabled(route)
        x = SparseTensor.trusted(c, f)
        src, fine = x, None
        if layer.kind in ("transpose", "inverse"):
            src, fine = _mlx_down(x, layer.c_in), x
            mx.eval(src.feats, src.coords)

        def cached(src: SparseTensor = src, fine: SparseTensor | None = fine) -> None:
            y = _mlx_layer(layer, src, wm, fine)
            mx.eval(y.feats, y.coords)

        out[label] = median_time(cached, repeat)
        if route:

            def fresh(src: SparseTensor = src) -> None:
                x2 = SparseTensor.trusted(c, f)
                s2, f2 = x2, None
                if layer.kind in ("transpose", "inverse"):
                    s2 = _mlx_down(x2, layer.c_in).with_feats(src.feats)
                    f2 = x2
                y = _mlx_layer(layer, s2, wm, f2)
                mx.eval(y.feats, y.coords)

            out["mlx+map"] = median_time(fresh, repeat)
            if layer.kind in ("transpose", "inverse"):  # count this layer only
                out["mlx+map"] -= median_time(
                    lambda: mx.eval(_mlx_down(SparseTensor.trusted(c, f), layer.c_in).feats),
                    repeat,
                )
    cuda.set_enabled(True)
    return out


# --------------------------------------------------------------------- spconv side


def bench_spconv_layer(
    layer: Layer, coords: np.ndarray, feats: np.ndarray, w: np.ndarray, repeat: int
) -> dict[str, float]:
    import spconv.pytorch as spconv
    import torch

    dev = torch.device("cuda")
    idx = torch.from_numpy(coords).to(dev)
    f = torch.from_numpy(feats).to(dev).half()
    shape = [int(v) + 4 for v in coords[:, 1:].max(axis=0)]
    kshape = tuple(w.shape)
    wt = torch.from_numpy(w).to(dev).half()

    def sync(fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                fn()
            torch.cuda.synchronize()

        return run

    def module(kind: str) -> Any:
        k = kshape[1]
        if kind == "subm":
            m = spconv.SubMConv3d(layer.c_in, layer.c_out, k, bias=False, indice_key="s")
        elif kind == "down":
            m = spconv.SparseConv3d(layer.c_in, layer.c_out, k, 2, bias=False, indice_key="d")
        elif kind == "transpose":
            m = spconv.SparseConvTranspose3d(layer.c_in, layer.c_out, k, 2, bias=False)
        else:
            m = spconv.SparseInverseConv3d(layer.c_in, layer.c_out, k, indice_key="d", bias=False)
        with torch.no_grad():
            m.weight.copy_(wt.reshape(m.weight.shape))
        return m.to(dev).half()

    net = module(layer.kind)
    if layer.kind in ("subm", "down"):
        first = spconv.SparseConvTensor(f, idx, shape, 1)
        with torch.no_grad():
            net(first)
        cached = median_time(sync(lambda: net(first)), repeat)
        fresh = median_time(sync(lambda: net(spconv.SparseConvTensor(f, idx, shape, 1))), repeat)
        return {"spconv": cached, "spconv+map": fresh}
    gen = torch.Generator(device="cpu").manual_seed(1)
    dw = torch.randn((layer.c_in, 2, 2, 2, layer.c_in), generator=gen).to(dev).half()
    down = spconv.SparseConv3d(layer.c_in, layer.c_in, 2, 2, bias=False, indice_key="d")
    with torch.no_grad():
        down.weight.copy_(dw.reshape(down.weight.shape))
    down = down.to(dev).half()
    with torch.no_grad():
        coarse = down(spconv.SparseConvTensor(f, idx, shape, 1))
        net(coarse)
    cached = median_time(sync(lambda: net(coarse)), repeat)

    def rebuilt() -> Any:
        return net(down(spconv.SparseConvTensor(f, idx, shape, 1)))

    t_down = median_time(sync(lambda: down(spconv.SparseConvTensor(f, idx, shape, 1))), repeat)
    return {"spconv": cached, "spconv+map": median_time(sync(rebuilt), repeat) - t_down}


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


def bench_unet(coords: np.ndarray, repeat: int) -> dict[str, float]:
    import spconv.pytorch as spconv
    import torch

    rng = np.random.default_rng(5)
    ws = [_mx_weight(rng, co, k, ci) for _, ci, co, k in unet_plan()]
    feats = rng.standard_normal((len(coords), IN_CH)).astype(np.float32)
    c = mx.array(coords)
    f = mx.array(feats).astype(mx.float16)
    net = mlx_unet([mx.array(w).astype(mx.float16) for w in ws])
    out: dict[str, float] = {}
    cached_x = SparseTensor.trusted(c, f)
    out["mlx"] = median_time(lambda: mx.eval(net(cached_x)), repeat)
    out["mlx+map"] = median_time(lambda: mx.eval(net(SparseTensor.trusted(c, f))), repeat)

    dev = torch.device("cuda")
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
        layers.append(m.to(dev).half())

    def peer(x: Any) -> Any:
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

    idx = torch.from_numpy(coords).to(dev)
    tf = torch.from_numpy(feats).to(dev).half()
    shape = [int(v) + 4 for v in coords[:, 1:].max(axis=0)]

    def run_peer() -> None:
        with torch.no_grad():
            peer(spconv.SparseConvTensor(tf, idx, shape, 1))
        torch.cuda.synchronize()

    out["spconv+map"] = median_time(run_peer, repeat)
    with torch.no_grad():  # agreement check: the two networks compute the same function
        ref = peer(spconv.SparseConvTensor(tf, idx, shape, 1)).float().cpu().numpy()
    got = np.asarray(net(SparseTensor.trusted(c, f)).astype(mx.float32))
    out["rel_err"] = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    return out


# ---------------------------------------------------------------------------- main


def _ratio(a: float, b: float) -> str:
    return f"{a / b:5.2f}x" if b > 0 else "  n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-unet", action="store_true")
    args = parser.parse_args()
    if not cuda.available():
        raise SystemExit("bench_mlx_cuda needs MLX's CUDA backend (pip install 'mlx[cuda]')")
    mx.set_default_device(mx.gpu)
    version = getattr(mx, "__version__", "?")
    print(f"mlx {version} on {mx.default_device()}; f16; median of {args.repeat} calls")
    for size in args.sizes:
        pts, _ = make_scene(size, grid=512, seed=0)
        coords = batched(pts)
        print(f"\nscene: {len(coords)} voxels")
        header = (
            f"{'layer':<24}{'mlx':>9}{'mlx+map':>9}{'generic':>9}{'spconv':>9}{'sp+map':>9}"
            f"{'cached':>8}{'w/ map':>8}"
        )
        print(header + "   (ms; ratios mlx / spconv)")
        for layer in LAYERS:
            rng = np.random.default_rng(0)
            feats = rng.standard_normal((len(coords), layer.c_in)).astype(np.float32)
            w = _mx_weight(rng, layer.c_out, 2 if layer.kind != "subm" else 3, layer.c_in)
            ours = bench_mlx_layer(layer, coords, feats, w, args.repeat)
            peer = bench_spconv_layer(layer, coords, feats, w, args.repeat)
            print(
                f"{layer.name:<24}{ours['mlx'] * 1e3:9.3f}{ours['mlx+map'] * 1e3:9.3f}"
                f"{ours['generic'] * 1e3:9.3f}{peer['spconv'] * 1e3:9.3f}"
                f"{peer['spconv+map'] * 1e3:9.3f}{_ratio(ours['mlx'], peer['spconv']):>8}"
                f"{_ratio(ours['mlx+map'], peer['spconv+map']):>8}",
                flush=True,
            )
        if not args.no_unet:
            u = bench_unet(coords, max(5, args.repeat // 2))
            print(
                f"{'MinkUNet-4 forward':<24}{u['mlx'] * 1e3:9.3f}{u['mlx+map'] * 1e3:9.3f}"
                f"{'':>9}{'':>9}{u['spconv+map'] * 1e3:9.3f}{'':>8}"
                f"{_ratio(u['mlx+map'], u['spconv+map']):>8}   (rel. diff {u['rel_err']:.1e})",
                flush=True,
            )


if __name__ == "__main__":
    main()

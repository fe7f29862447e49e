"""torch_lattice's Triton path on CUDA vs spconv 2.3.8 and spconv-triton, in one process.

Per layer (subm 3x3x3 at C = 32/64/128, conv k2s2 and k3s2, transposed k2s2,
inverse k2s2) and for a four-level MinkUNet (forward in f16, unfused and with
our conv blocks fused; training steps in f32 with TF32 off, with TF32 on, and
under f16 autocast, each library under the same setting), on surface scenes
of about 100k and 200k voxels (``lattice_conformance.scenes``), it prints each
library's time with the map cached (the later layers of a
network) and with the map built (a fresh input), and the ratio ours / peer
(below 1: ours is faster).  First it measures the device's two ceilings (copy
bandwidth, f16 matrix rate) and prints, per layer, the floor those give
(FLOPs of the real pairs over the matrix rate, fewest bytes over the
bandwidth).  Each library is timed in CUDA-event rounds until its last three round
medians agree within 2% (``bench_harness.stable_time``); the MinkUNet rows also give
kernels and host syncs per call and the training step's peak memory; ``--processes 3``
reruns everything in three processes and prints the medians.  Scenes: the surface
scenes and a ray-cast LiDAR street scan (``lidar_scene``), not our own data.

Run on a CUDA machine: ``python benchmarks/bench_cuda.py [--sizes 100000 200000]``
(with ``PYTHONPATH`` holding the packages' ``src`` folders when they are not
installed).  spconv (``spconv-cu126``) and ``spconv-triton`` are optional;
missing peers are reported as such.
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import sys
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import torch
from bench_harness import (
    LAYERS,
    POOLS,
    Layer,
    Pool,
    aggregate,
    count_flops,
    host_time,
    launches_and_syncs,
    paired_stable_time,
    peak_bytes,
    stable_time,
    without_option,
)
from lattice_conformance.scenes import batched, make_scene
from lidar_scene import lidar_coords
from torch_lattice import SparseTensor, nn, ops

PEERS: dict[str, ModuleType] = {}
for _name, _module in (("spconv", "spconv.pytorch"), ("spconv-triton", "spconv_triton.pytorch")):
    try:
        PEERS[_name] = __import__(_module, fromlist=["SparseConvTensor"])
    except Exception as err:  # pragma: no cover - depends on the machine
        print(f"{_name}: not available ({type(err).__name__}: {err})")


DEVICE, START = "cuda", time.perf_counter()
"""Where everything runs (``--dry-run``: ``cpu``, Triton interpreter, tiny scenes); the start."""


def cuda_time(fn: Callable[[], Any], repeat: int = 10) -> float:
    """Median seconds of ``fn``: CUDA-event rounds until the last 3 medians agree within 2%."""
    if DEVICE == "cpu":  # the dry run checks that everything runs, not how fast
        began = time.perf_counter()
        fn()
        return time.perf_counter() - began
    limit = int(os.environ.get("BENCH_MAX_ROUNDS", "30"))  # a short run caps the rounds
    seconds, rounds = stable_time(fn, repeat, max_rounds=limit)
    if rounds >= limit:
        print(f"    (not stable after {rounds} rounds: {seconds * 1e3:.3f} ms is the last median)")
    return seconds


FAILURES: list[str] = []
"""Sections of ours that raised; any makes the process exit non-zero."""


def failed(section: str, err: BaseException) -> None:
    """Report a failed section and remember it for the exit status."""
    FAILURES.append(section)
    print(f"  FAILED {section}: {type(err).__name__}: {err}"[:400], flush=True)


def ceilings() -> tuple[float, float]:
    """(copy bandwidth in B/s counting read + write, f16 matrix rate in FLOP/s) on this device."""
    if DEVICE == "cpu":
        return 1e11, 1e12
    a = torch.empty(1 << 30, dtype=torch.uint8, device=DEVICE)
    b = torch.empty_like(a)
    t = cuda_time(lambda: b.copy_(a), 10)
    m = torch.randn(8192, 8192, device=DEVICE, dtype=torch.float16)
    t_mm = cuda_time(lambda: m @ m, 10)
    return 2 * a.numel() / t, 2 * 8192**3 / t_mm


def _ours(layer: Layer, x: SparseTensor, w: torch.Tensor, coarse: SparseTensor | None) -> Any:
    k, s, p = layer.kernel, layer.stride, layer.padding
    if layer.kind == "subm":
        return ops.subm_conv3d(x, w, kernel_size=k)
    if layer.kind == "conv":  # spconv's SparseConv3d: every o with c = o*s - p + k
        return _indexed_conv(x, w, k, s, p)
    assert coarse is not None  # the transposed layers run on a k2s2 conv's output
    if layer.kind == "transpose":
        return ops.conv_transpose3d(coarse, w, kernel_size=k, stride=s)
    return ops.conv_transpose3d(coarse, w, kernel_size=k, stride=s, coordinates=x)


def _indexed_conv(x: SparseTensor, w: torch.Tensor, k: int, s: int, p: int) -> SparseTensor:
    full = getattr(ops, "full_conv3d", None)  # the indexed relation's name once conv3d is centred
    if full is not None:
        return full(x, w, kernel_size=k, stride=s, padding=p)
    return ops.conv3d(x, w, kernel_size=k, stride=s, padding=p)


def _peer_layer(lib: ModuleType, layer: Layer, w: torch.Tensor, key: str) -> torch.nn.Module:
    k, s, p = layer.kernel, layer.stride, layer.padding
    args = {"bias": False}
    if layer.kind == "subm":
        m = lib.SubMConv3d(layer.c_in, layer.c_out, k, indice_key=key, **args)
    elif layer.kind == "conv":
        m = lib.SparseConv3d(layer.c_in, layer.c_out, k, s, p, indice_key=key, **args)
    elif layer.kind == "transpose":
        m = lib.SparseConvTranspose3d(layer.c_in, layer.c_out, k, s, **args)
    else:
        m = lib.SparseInverseConv3d(layer.c_in, layer.c_out, k, indice_key="down", **args)
    with torch.no_grad():  # spconv >= 2.2 layout (C_out, k0, k1, k2, C_in), like ours
        m.weight.copy_(w.reshape(m.weight.shape).to(m.weight.dtype))
    return m.to(DEVICE).to(w.dtype)


def _coarse(x: SparseTensor) -> SparseTensor:
    """The k2s2 conv whose map the inverse layer reuses (its output, 64 channels)."""
    w = torch.randn(64, 2, 2, 2, x.num_channels, device=x.device, dtype=x.dtype) * 0.05
    return ops.conv3d(x, w, kernel_size=2, stride=2)


def _pairs(layer: Layer, x: SparseTensor, coarse: SparseTensor | None) -> tuple[int, int]:
    """(real pairs, output rows) of the layer, from its Triton slot map."""
    from torch_lattice.triton.maps import build

    k, s, p = (layer.kernel,) * 3, (layer.stride,) * 3, (layer.padding,) * 3
    one, zero = (1, 1, 1), (0, 0, 0)
    if layer.kind == "subm":
        out, smap = build("subm", x.support, k, one, zero, one)
    elif layer.kind == "conv":
        out, smap = build("indexed", x.support, k, s, p, one)
    elif layer.kind == "transpose":
        assert coarse is not None
        out, smap = build("transpose", coarse.support, k, s, zero, one)
    else:
        assert coarse is not None
        out, smap = build("transpose", coarse.support, k, s, zero, one, x.support)
    return int((smap.slots >= 0).sum()), out.num_rows


def bench_layers(
    coords: torch.Tensor, shape: list[int], bw: float, rate: float
) -> list[dict[str, Any]]:
    """One row per layer: pairs, floor, ours and each peer, cached and with the map built."""
    rows = []
    for layer in LAYERS:
        if DEVICE == "cpu" and layer.c_in > 32 and layer.kind == "subm":
            continue  # the dry run only checks that each kind runs
        row = _bench_layer(layer, coords, shape, bw, rate)
        _print_row(row)
        _emit(row)
        rows.append(row)
    rows.extend(bench_pools(coords, shape, bw))
    return rows


def _bench_layer(
    layer: Layer, coords: torch.Tensor, shape: list[int], bw: float, rate: float
) -> dict[str, Any]:
    g = torch.Generator(device=DEVICE).manual_seed(0)
    feats = torch.randn(coords.shape[0], layer.c_in, device=DEVICE, generator=g).half()
    kshape = (layer.c_out, layer.kernel, layer.kernel, layer.kernel, layer.c_in)
    w = (torch.randn(kshape, device=DEVICE, generator=g) * 0.05).half()
    x = SparseTensor.trusted(coords, feats)
    row: dict[str, Any] = {"layer": layer.name}
    with torch.no_grad():
        coarse = _coarse(x) if layer.kind in ("transpose", "inverse") else None
        src = coarse if coarse is not None else x
        pairs, n_out = _pairs(layer, x, coarse)
        flops = 2 * pairs * layer.c_in * layer.c_out
        nbytes = 2 * (src.num_rows * layer.c_in + n_out * layer.c_out + w.numel())
        row["pairs"] = pairs
        row["floor_ms"] = max(flops / rate, nbytes / bw) * 1e3
        row["ours"] = cuda_time(lambda: _ours(layer, x, w, coarse))

        def fresh() -> Any:
            xf = SparseTensor.trusted(coords, feats)
            cf = None if coarse is None else _coarse(xf).with_feats(coarse.feats)
            return _ours(layer, xf, w, cf)

        row["ours+map"] = cuda_time(fresh)
        if coarse is not None:  # count the inverse layer only, not its paired conv
            row["ours+map"] -= cuda_time(lambda: _coarse(SparseTensor.trusted(coords, feats)))
        row["eff_tflops"] = flops / row["ours"] / 1e12
        for name, lib in PEERS.items():
            try:
                _peer_row(row, name, lib, layer, w, feats, coords, shape, coarse)
            except Exception as err:  # a peer that cannot run this layer
                row[name] = row[name + "+map"] = float("nan")
                print(f"    {name} {layer.name}: {type(err).__name__}: {err}"[:300])
    return row


def _peer_row(
    row: dict[str, Any],
    name: str,
    lib: ModuleType,
    layer: Layer,
    w: torch.Tensor,
    feats: torch.Tensor,
    coords: torch.Tensor,
    shape: list[int],
    coarse: SparseTensor | None,
) -> None:
    module = _peer_layer(lib, layer, w, "k")
    if coarse is None:
        first = lib.SparseConvTensor(feats, coords, shape, 1)
        module(first)  # builds the map and caches it under indice_key "k"
        row[name] = cuda_time(lambda: module(first))
        row[name + "+map"] = cuda_time(
            lambda: module(lib.SparseConvTensor(feats, coords, shape, 1))
        )
        return
    down = lib.SparseConv3d(layer.c_in, 64, 2, 2, indice_key="down", bias=False).to(DEVICE).half()
    st = down(lib.SparseConvTensor(feats, coords, shape, 1)).replace_feature(coarse.feats)
    module(st)  # the inverse layer reuses the down conv's map (indice_key "down")
    row[name] = cuda_time(lambda: module(st))

    def fresh() -> Any:
        s2 = down(lib.SparseConvTensor(feats, coords, shape, 1))
        return module(s2.replace_feature(coarse.feats))

    t_down = cuda_time(lambda: down(lib.SparseConvTensor(feats, coords, shape, 1)))
    row[name + "+map"] = cuda_time(fresh) - t_down


def _print_row(row: dict[str, Any]) -> None:
    parts = [
        f"  {row['layer']:<20} pairs {row['pairs']:>9}  floor {row['floor_ms']:.3f} ms  "
        f"ours {row['ours'] * 1e3:.3f} / +map {row['ours+map'] * 1e3:.3f} ms "
        f"({row['eff_tflops']:.1f} TFLOP/s)"
    ]
    for name in PEERS:
        if name in row:
            parts.append(
                f"    {name}: {row[name] * 1e3:.3f} / +map {row[name + '+map'] * 1e3:.3f} ms"
                f" -> ours/peer {row['ours'] / row[name]:.2f}x cached, "
                f"{row['ours+map'] / row[name + '+map']:.2f}x with map"
            )
    print("\n".join(parts), flush=True)


# --------------------------------------------------------------------------- pools


def bench_pools(coords: torch.Tensor, shape: list[int], bw: float) -> list[dict[str, Any]]:
    """One row per pool (f16, 64 channels): ours and spconv's, cached and with the map built."""
    g = torch.Generator(device=DEVICE).manual_seed(1)
    feats = torch.randn(coords.shape[0], 64, device=DEVICE, generator=g).half()
    rows = []
    for pool in POOLS:
        row = _bench_pool(pool, coords, feats, shape, bw)
        _print_pool(row)
        rows.append(row)
    return rows


def _bench_pool(
    pool: Pool, coords: torch.Tensor, feats: torch.Tensor, shape: list[int], bw: float
) -> dict[str, Any]:
    def ours(x: SparseTensor) -> SparseTensor:
        fn = getattr(ops, pool.op)
        return fn(
            x, mode=pool.mode, kernel_size=pool.kernel, stride=pool.stride, padding=pool.padding
        )

    x = SparseTensor.trusted(coords, feats)
    with torch.no_grad():
        y = ours(x)
        row: dict[str, Any] = {"layer": pool.name, "rows": y.num_rows}
        row["floor_ms"] = 2 * 64 * (x.num_rows + y.num_rows) / bw * 1e3  # f16 in and out once
        row["ours"] = cuda_time(lambda: ours(x))
        row["ours+map"] = cuda_time(lambda: ours(SparseTensor.trusted(coords, feats)))
        for name, lib in PEERS.items():
            _peer_pool(row, name, lib, pool, feats, coords, shape)
    return row


def _peer_pool(
    row: dict[str, Any],
    name: str,
    lib: ModuleType,
    pool: Pool,
    feats: torch.Tensor,
    coords: torch.Tensor,
    shape: list[int],
) -> None:
    """The peer's pool of the same geometry (cached: its indice_key), NaN where it has none."""
    module_type = getattr(lib, pool.peer, None) if pool.peer else None
    if module_type is None:
        row[name] = row[name + "+map"] = float("nan")
        return
    try:
        module = module_type(pool.kernel, pool.stride, pool.padding, indice_key="pool").to(DEVICE)
        first = lib.SparseConvTensor(feats, coords, shape, 1)
        module(first)
        row[name] = cuda_time(lambda: module(first))
        row[name + "+map"] = cuda_time(
            lambda: module(lib.SparseConvTensor(feats, coords, shape, 1))
        )
    except Exception as err:  # a peer that cannot run this pool
        row[name] = row[name + "+map"] = float("nan")
        print(f"    {name} {row['layer']}: {type(err).__name__}: {err}"[:300])


def _print_pool(row: dict[str, Any]) -> None:
    parts = [
        f"  {row['layer']:<26} rows {row['rows']:>8}  floor {row['floor_ms']:.3f} ms  "
        f"ours {row['ours'] * 1e3:.3f} / +map {row['ours+map'] * 1e3:.3f} ms"
    ]
    for name in PEERS:
        if name in row:
            parts.append(
                f"    {name}: {row[name] * 1e3:.3f} / +map {row[name + '+map'] * 1e3:.3f} ms"
                f" -> ours/peer {row['ours'] / row[name]:.2f}x cached, "
                f"{row['ours+map'] / row[name + '+map']:.2f}x with map"
            )
    print("\n".join(parts), flush=True)


# --------------------------------------------------------------------------- MinkUNet

DOWN = (32, 64, 128, 256)
UP = (256, 128, 96, 96)
IN_CH = 4
CLASSES = 16


class OursUNet(torch.nn.Module):
    """The four-level MinkUNet on torch_lattice.nn: subm stem, k2s2 downs, inverse ups.

    Every conv -> BatchNorm -> ReLU block is a ``Sequential`` (``blocks``), so
    :func:`torch_lattice.triton.fuse_conv_bn_relu` can fuse it; the up
    convs take the skip's rows as their target, which a ``Sequential`` cannot
    pass, so those four blocks always run unfused.
    """

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList()
        self.plan: list[tuple[str, int, int]] = []

        def add(kind: str, c_in: int, c_out: int) -> None:
            conv: torch.nn.Module
            if kind == "subm":
                conv = nn.SubmConv3d(c_in, c_out, 3, bias=False)
            elif kind == "down":
                conv = nn.Conv3d(c_in, c_out, 2, 2, bias=False)
            else:
                conv = nn.TargetConvTranspose3d(c_in, c_out, 2, 2, bias=False)
            with torch.no_grad():  # He init, as the peers get the same weights copied in
                conv.weight.normal_(0.0, (2 / (c_in * conv.weight[0, ..., 0].numel())) ** 0.5)
            self.blocks.append(nn.Sequential(conv, nn.BatchNorm(c_out), nn.ReLU()))
            self.plan.append((kind, c_in, c_out))

        add("subm", IN_CH, 32)
        add("subm", 32, 32)
        prev = 32
        for c in DOWN:
            add("down", prev, c)
            add("subm", c, c)
            add("subm", c, c)
            prev = c
        skips = [32, *DOWN[:-1]][::-1]
        for c, skip in zip(UP, skips, strict=True):
            add("up", prev, c)
            add("subm", c + skip, c)
            add("subm", c, c)
            prev = c
        self.head = torch.nn.Linear(prev, CLASSES)

    def forward(self, x: SparseTensor) -> torch.Tensor:
        stack: list[SparseTensor] = []
        blocks = iter(self.blocks)

        def block(x: SparseTensor, target: SparseTensor | None = None) -> SparseTensor:
            seq = next(blocks)
            assert isinstance(seq, torch.nn.Sequential)
            if target is None:
                return seq(x)
            conv, bn, relu = seq
            return relu(bn(conv(x, target)))

        x = block(block(x))
        for _ in DOWN:
            stack.append(x)
            x = block(block(block(x)))
        for _ in UP:
            skip = stack.pop()
            x = block(x, skip)
            x = x.with_feats(torch.cat([x.feats, skip.feats], dim=1))
            x = block(block(x))
        return self.head(x.feats)


def peer_unet(lib: ModuleType, ours: OursUNet) -> torch.nn.Module:
    """The same network in spconv's API, with our network's weights copied in."""

    class PeerUNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList()
            level = 0
            levels: list[int] = []
            for (kind, c_in, c_out), seq in zip(ours.plan, ours.blocks, strict=True):
                if kind == "subm":
                    m = lib.SubMConv3d(c_in, c_out, 3, bias=False, indice_key=f"s{level}")
                elif kind == "down":
                    levels.append(level)
                    m = lib.SparseConv3d(c_in, c_out, 2, 2, bias=False, indice_key=f"d{level}")
                    level += 1
                else:
                    level = levels.pop()
                    m = lib.SparseInverseConv3d(c_in, c_out, 2, indice_key=f"d{level}", bias=False)
                assert isinstance(seq, torch.nn.Sequential)
                weight = seq[0].weight
                assert isinstance(weight, torch.Tensor)
                with torch.no_grad():
                    m.weight.copy_(weight.detach().reshape(m.weight.shape))
                self.convs.append(m)
            self.bn = torch.nn.ModuleList(torch.nn.BatchNorm1d(p[2]) for p in ours.plan)
            self.head = torch.nn.Linear(ours.head.in_features, CLASSES)
            self.head.load_state_dict(ours.head.state_dict())
            self.plan = ours.plan

        def forward(self, x: Any) -> torch.Tensor:
            stack: list[Any] = []
            i = 0

            def block(x: Any) -> Any:
                nonlocal i
                y = self.convs[i](x)
                y = y.replace_feature(torch.relu(self.bn[i](y.features)))
                i += 1
                return y

            x = block(block(x))
            for _ in DOWN:
                stack.append(x)
                x = block(block(block(x)))
            for _ in UP:
                skip = stack.pop()
                x = block(x)
                x = x.replace_feature(torch.cat([x.features, skip.features], dim=1))
                x = block(block(x))
            return self.head(x.features)

    return PeerUNet()


STEPS = ("f32", "tf32x3", "tf32", "amp")
"""Training-step settings: f32 with TF32 off (both libraries' default); ours with f32
products as three TF32 products (about f32's accuracy; the peers stay in plain f32);
TF32 on in both; f16 autocast in both."""


def _peer_tensor(lib: ModuleType, feats: torch.Tensor, *, coords: torch.Tensor, shape: Any) -> Any:
    """A peer library's sparse tensor of batch size 1 over ``coords``."""
    return lib.SparseConvTensor(feats, coords, shape, 1)


Nets = dict[str, tuple[torch.nn.Module, Callable[[torch.Tensor], Any]]]
"""Each library's network and the function that wraps features into its sparse tensor."""


def bench_unet(
    coords: torch.Tensor, shape: list[int], steps: tuple[str, ...], forward: bool = True
) -> dict[str, float]:
    """Forward (f16, eval, no grad) and training steps (SGD) of each library's MinkUNet.

    Ours also runs its forward with the conv blocks fused
    (:func:`torch_lattice.triton.fuse_conv_bn_relu`) and counts the FLOPs of
    its f32 step from the real pairs of every kernel launch.  Every library's
    forward, and every library's step of one setting, are timed in the same
    rounds (:func:`paired`), so the ratios compare calls made under the same
    machine state.
    """
    torch.manual_seed(0)
    feats = torch.randn(coords.shape[0], IN_CH, device=DEVICE)
    labels = torch.randint(0, CLASSES, (coords.shape[0],), device=DEVICE)
    ours = OursUNet().to(DEVICE)
    nets: Nets = {"ours": (ours, lambda f: SparseTensor.trusted(coords, f))}
    for name in UNET_PEERS:
        lib = PEERS[name]
        try:
            peer = peer_unet(lib, ours).to(DEVICE)
        except Exception as err:  # a peer that cannot build the network is reported, not run
            print(f"  {name} MinkUNet: {type(err).__name__}: {err}"[:300])
            continue
        nets[name] = (peer, functools.partial(_peer_tensor, lib, coords=coords, shape=shape))
    result: dict[str, float] = {}
    if forward:
        _bench_forwards(nets, feats.half(), result)
    _bench_steps(nets, feats, labels, steps, result)
    _print_unet(result, steps)
    return result


def _bench_forwards(nets: Nets, half: torch.Tensor, result: dict[str, float]) -> None:
    """f16 eval forwards, maps cached and maps built, every library (and ours fused) paired.

    Ours also runs the fused forward captured as one CUDA graph
    (:func:`torch_lattice.triton.capture_forward`, capacity the frame's rows):
    maps built every call, so it is timed with maps built only.
    """
    from torch_lattice.triton import capture_forward, fuse_conv_bn_relu

    for net, _ in nets.values():
        net.half().eval()
    ours, wrap_ours = nets["ours"]
    forwards = dict(nets)
    with torch.no_grad():
        try:
            fused = fuse_conv_bn_relu(copy.deepcopy(ours))
            cached_in = wrap_ours(half)
            ref = ours(cached_in).float()
            error = float((fused(cached_in).float() - ref).abs().max() / ref.abs().max())
            print(f"  ours fused forward: max error {error:.1e} relative to the unfused one")
            forwards["ours fused"] = (fused, wrap_ours)
        except Exception as err:
            failed("ours fused MinkUNet", err)
        inputs = {name: wrap(half) for name, (_, wrap) in forwards.items()}
        cached = {n: functools.partial(m, inputs[n]) for n, (m, _) in forwards.items()}
        fresh = {n: _fresh(m, w, half) for n, (m, w) in forwards.items()}
        for name, source in [("ours captured", "ours fused"), ("ours captured unfused", "ours")]:
            if source not in forwards:  # (the CPU dry run: the padded forward, no graph)
                continue
            try:
                graph = capture_forward(forwards[source][0], cached_in, int(half.shape[0]))
                logits = graph(cached_in)
                assert isinstance(logits, torch.Tensor)  # the head's per-row logits
                error = float((logits.float() - ref).abs().max() / ref.abs().max())
                print(f"  {name} forward: max error {error:.1e} relative to the unfused one")
                fresh[name] = _fresh(graph, wrap_ours, half)
            except Exception as err:
                failed(f"{name} MinkUNet", err)
        paired(result, "fwd", _runnable(cached), 20)
        paired(result, "fwd+map", _runnable(fresh), 20)
        for name, fn in fresh.items():
            if _key(name, "fwd+map") in result:
                _counts(result, _key(name, "fwd+map"), fn)
        if BREAKDOWN and "ours fused" in fresh:
            from profile_cuda import breakdown

            breakdown(fresh["ours fused"], f"ours, fused forward, maps built ({SCENE})")


def _bench_steps(
    nets: Nets,
    feats: torch.Tensor,
    labels: torch.Tensor,
    steps: tuple[str, ...],
    result: dict[str, float],
) -> None:
    """SGD steps in f32 master weights per setting, every library paired; ours' FLOPs.

    Ours also runs the step captured as CUDA graphs
    (:func:`torch_lattice.triton.capture_training_step`, capacity the batch's
    rows) on copies of its network, recorded per setting: one with every
    generated support at its candidate count, one with ``headroom=1.25``
    (:data:`CAPTURED_STEPS`).  A graph holds its memory between steps, so its
    peak is what the recording kept.
    """
    from torch_lattice.triton import set_f32_products

    for net, _ in nets.values():
        net.float().train()
    opts = {name: torch.optim.SGD(net.parameters(), lr=1e-3) for name, (net, _) in nets.items()}
    for setting in steps:
        _tf32(setting == "tf32")
        set_f32_products(setting if setting in ("tf32", "tf32x3") else "ieee")
        try:
            step_fns: dict[str, Callable[[], Any]] = {
                name: functools.partial(
                    _step, net, wrap, opts[name], feats, labels, setting == "amp"
                )
                for name, (net, wrap) in nets.items()
            }
            key = f"train {setting}"
            for name, headroom in CAPTURED_STEPS.items():
                captured = _captured_step(nets["ours"], feats, labels, setting, headroom, result)
                if captured is not None:
                    step_fns[name] = captured
            paired(result, key, _runnable(step_fns, key), 10)
            for name, one in step_fns.items():
                if _key(name, key) not in result:
                    continue
                _counts(result, _key(name, key), one)
                if DEVICE == "cuda" and name not in CAPTURED_STEPS:
                    mib = peak_bytes(one) / 2**20
                    result[f"{name} {key} peak MiB"] = mib
                    print(f"    {name} {key}: peak {mib:.0f} MiB above the model")
                    print(f"RESULT {SCENE} {name} {key} peakMiB {mib:.1f}")
            if BREAKDOWN and setting in ("f32", "amp") and _key("ours", key) in result:
                from profile_cuda import breakdown  # this folder, on the path as the script's

                breakdown(step_fns["ours"], f"ours, training step ({setting}, {SCENE})")
        finally:
            _tf32(False)
            set_f32_products("ieee")
    if DEVICE == "cuda":  # a dry run skips one more interpreted step
        ours, wrap = nets["ours"]
        step = functools.partial(_step, ours, wrap, opts["ours"], feats, labels, False)
        result["ours flops"] = count_flops(step)


CAPTURED_STEPS = {"ours captured": None, "ours captured h1.25": 1.25}
"""Our captured training steps, by ``headroom``: none (every generated support held at its
candidate count), and 1.25x the example's rows per generated support."""


def _captured_step(
    ours: tuple[torch.nn.Module, Callable[[torch.Tensor], Any]],
    feats: torch.Tensor,
    labels: torch.Tensor,
    setting: str,
    headroom: float | None,
    result: dict[str, float],
) -> Callable[[], Any] | None:
    """Our step captured (a copy of the network, its own SGD), or None where it failed."""
    from torch_lattice.triton import capture_training_step

    def masked_loss(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> Any:
        per_row = torch.nn.functional.cross_entropy(logits, target, reduction="none")
        return (per_row * mask).sum() / mask.sum().clamp(min=1)

    net, wrap = ours
    try:
        copy_ = copy.deepcopy(net)
        opt = torch.optim.SGD(copy_.parameters(), lr=1e-3)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            before = torch.cuda.memory_reserved()
            allocated = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        # As the eager step's autocast("cuda"), which the CPU dry run leaves off.
        autocast = torch.float16 if setting == "amp" and DEVICE == "cuda" else None
        rows = int(feats.shape[0])
        step = capture_training_step(
            copy_, masked_loss, opt, wrap(feats), labels, rows, autocast=autocast,
            headroom=headroom,
        )  # fmt: skip
        name = "ours captured" + ("" if headroom is None else f" h{headroom}")
        if DEVICE == "cuda":  # what the graphs keep between steps (their memory pool)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            mib = (torch.cuda.memory_reserved() - before) / 2**20
            # The most allocated at once while recording (warm-up steps, capture and the
            # check against eager): at least what the graphs need, so held memory above
            # it is fragmentation of the graphs' pool.
            peak = (torch.cuda.max_memory_allocated() - allocated) / 2**20
            result[f"{name} train {setting} held MiB"] = mib
            result[f"{name} train {setting} recording peak MiB"] = peak
            print(
                f"    {name} train {setting}: the graphs hold {mib:.0f} MiB "
                f"(at most {peak:.0f} MiB allocated at once while recording)"
            )
            print(f"RESULT {SCENE} {name} train {setting} heldMiB {mib:.1f}")
            print(f"RESULT {SCENE} {name} train {setting} recordingPeakMiB {peak:.1f}")
    except Exception as err:
        failed(f"ours captured train {setting} headroom {headroom}", err)
        return None
    return lambda: step(wrap(feats), labels)


def _key(name: str, what: str) -> str:
    """Result key of one library's measurement (``ours fused`` keeps its old ``... fused`` key)."""
    if name.startswith("ours "):  # "ours fused", "ours captured", "ours captured unfused"
        return f"ours {what} {name[len('ours ') :]}"
    return f"{name} {what}"


def _fresh(
    net: Callable[[Any], Any], wrap: Callable[[torch.Tensor], Any], feats: torch.Tensor
) -> Any:
    """A call of ``net`` on a new tensor over the same coordinates: every map is built."""
    return lambda: net(wrap(feats))


def _step(
    net: torch.nn.Module,
    wrap: Callable[[torch.Tensor], Any],
    opt: torch.optim.Optimizer,
    feats: torch.Tensor,
    labels: torch.Tensor,
    amp: bool,
) -> None:
    """One SGD step on a fresh input (maps built), under f16 autocast when ``amp``."""
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
        loss = torch.nn.functional.cross_entropy(net(wrap(feats)), labels)
    loss.backward()
    opt.step()


def _runnable(
    fns: Mapping[str, Callable[[], Any]], what: str = "forward"
) -> dict[str, Callable[[], Any]]:
    """The functions that run once without raising; each failure is reported (ours: fails)."""
    out = {}
    for name, fn in fns.items():
        try:
            fn()
            out[name] = fn
        except Exception as err:  # one setting a library cannot run: report it, go on
            if name.startswith("ours"):
                failed(f"{name} {what}", err)
            else:
                print(f"  {name} {what}: {type(err).__name__}: {err}"[:300])
    return out


def paired(
    result: dict[str, float], what: str, fns: dict[str, Callable[[], Any]], repeat: int
) -> None:
    """Time every library's ``what`` in the same rounds and record each (CPU dry run: once)."""
    if not fns:
        return
    if DEVICE == "cpu":  # the dry run checks that everything runs, not how fast
        for name, fn in fns.items():
            began = time.perf_counter()
            fn()
            _record(result, _key(name, what), time.perf_counter() - began)
        return
    limit = int(os.environ.get("BENCH_MAX_ROUNDS", "30"))
    times, rounds, unstable = paired_stable_time(fns, repeat, max_rounds=limit)
    if unstable:
        print(f"    ({what}: {', '.join(unstable)} not stable after {rounds} rounds)")
    for name, seconds in times.items():
        _record(result, _key(name, what), seconds)


def _print_unet(result: dict[str, float], steps: tuple[str, ...]) -> None:
    """One summary line per measurement: ours, each peer, and the ratios."""
    nan = float("nan")
    for key in ["fwd", "fwd+map", *(f"train {s}" for s in steps)]:
        mine = result.get(f"ours {key}", nan)
        line = f"  MinkUNet {key:<10} ours {mine * 1e3:8.2f} ms"
        if key.startswith("train"):
            line += f" (captured {result.get(f'ours {key} captured', nan) * 1e3:.2f}"
            line += f", h1.25 {result.get(f'ours {key} captured h1.25', nan) * 1e3:.2f})"
        if key.startswith("fwd"):
            fused = result.get(f"ours {key} fused", nan)
            line += f" (fused {fused * 1e3:.2f}"
            if key == "fwd+map":
                line += f", captured {result.get(f'ours {key} captured', nan) * 1e3:.2f}"
                line += f" / {result.get(f'ours {key} captured unfused', nan) * 1e3:.2f} unfused"
            line += ")"
        for name in UNET_PEERS:
            peer = result.get(f"{name} {key}", nan)
            line += f"   {name} {peer * 1e3:8.2f} ms (ours/peer {mine / peer:.2f}x"
            if key.startswith("fwd"):
                line += f", fused {result.get(f'ours {key} fused', nan) / peer:.2f}x"
            if key.startswith("train"):
                line += f", captured {result.get(f'ours {key} captured', nan) / peer:.2f}x"
                line += f", h1.25 {result.get(f'ours {key} captured h1.25', nan) / peer:.2f}x"
            if key == "fwd+map":
                line += f", captured {result.get(f'ours {key} captured', nan) / peer:.2f}x"
                unfused = result.get(f"ours {key} captured unfused", nan)
                line += f" / {unfused / peer:.2f}x unfused"
            line += ")"
        print(line, flush=True)
    flops = result.get("ours flops", nan)
    t = result.get("ours train f32", nan)
    print(f"  ours f32 step: {flops / 1e9:.0f} GFLOP of real pairs, {flops / t / 1e12:.1f} TFLOP/s")


BREAKDOWN = True
"""Print where the GPU time of our fused fresh-map forward and of our f32 and amp steps
goes (``--no-breakdown``: not)."""

UNET_PEERS: list[str] = []
"""Peers whose MinkUNet runs (``--unet-peers``; spconv-triton compiles for minutes)."""


def _record(result: dict[str, float], key: str, seconds: float) -> None:
    """Keep one timing and print it at once (a run cut short still shows what it measured)."""
    result[key] = seconds
    print(f"    {key}: {seconds * 1e3:.2f} ms", flush=True)
    print(f"RESULT {SCENE} {key} ms {seconds * 1e3:.4f}", flush=True)


def _counts(result: dict[str, float], key: str, fn: Callable[[], Any]) -> None:
    """Kernels and host syncs of one call (CUDA only: the profiler counts device kernels)."""
    if DEVICE != "cuda":
        return
    kernels, syncs = launches_and_syncs(fn)
    host = host_time(fn)
    result[f"{key} kernels"], result[f"{key} syncs"] = kernels, syncs
    result[f"{key} host"] = host
    print(f"    {key}: {kernels} kernels, {syncs} host syncs, host {host * 1e3:.2f} ms", flush=True)
    print(f"RESULT {SCENE} {key} kernels {kernels}\nRESULT {SCENE} {key} syncs {syncs}")
    print(f"RESULT {SCENE} {key} host ms {host * 1e3:.4f}")


def _emit(row: dict[str, Any]) -> None:
    """``RESULT`` lines of one table row (ms), for the multi-process medians."""
    for key, value in row.items():
        if key in PEERS or key in ("ours", "ours+map") or key.endswith("+map"):
            print(f"RESULT {SCENE} {row['layer']} {key} ms {value * 1e3:.4f}")


def _tf32(on: bool) -> None:
    """TF32 for torch's own matmuls and for spconv's kernels (read at each call)."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    if "spconv" in PEERS:
        import spconv.constants

        spconv.constants.SPCONV_ALLOW_TF32 = on


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 200_000])
    parser.add_argument("--unet-sizes", type=int, nargs="*", default=[200_000])
    parser.add_argument("--no-layers", action="store_true")
    parser.add_argument(
        "--steps", nargs="*", default=list(STEPS), help=f"training-step settings among {STEPS}"
    )
    parser.add_argument("--no-breakdown", action="store_true")
    parser.add_argument(
        "--no-forward", action="store_true", help="the MinkUNet's training steps only"
    )
    parser.add_argument(
        "--unet-peers", nargs="*", default=None, help="peers whose MinkUNet runs (default: all)"
    )
    parser.add_argument(
        "--peers", nargs="*", default=None, help="peers to run (default: every one importable)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="CPU, Triton interpreter, one small scene, no timing"
    )
    parser.add_argument(
        "--scenes",
        nargs="+",
        default=["surface", "lidar"],
        choices=["surface", "lidar"],
        help="surface: the project's scenes; lidar: a ray-cast 64-beam street scan (not ours)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="run the whole benchmark in this many processes and print the medians (>= 3)",
    )
    args = parser.parse_args()
    if args.processes > 1:
        raise SystemExit(aggregate(without_option(sys.argv, "--processes"), args.processes))
    for name in [p for p in PEERS if args.peers is not None and p not in args.peers]:
        del PEERS[name]
    global BREAKDOWN, DEVICE
    BREAKDOWN = not args.no_breakdown and not args.dry_run
    UNET_PEERS[:] = [p for p in PEERS if args.unet_peers is None or p in args.unet_peers]
    if args.dry_run:
        DEVICE = "cpu"
        # Layers on a few hundred voxels of each scene; the MinkUNet once, on two small
        # bars (dry_unet_coords), and only its f32 step unless --steps names others:
        # an interpreted step takes minutes.
        args.sizes = args.unet_sizes = [DRY_RUN_VOXELS]
        args.steps = args.steps if "--steps" in sys.argv else ["f32"]
        os.environ["TRITON_INTERPRET"] = "1"
    where = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (dry run)"
    print(f"torch {torch.__version__} on {where}; peers: {sorted(PEERS)}")
    with ops.schedule("triton"):  # the default on CUDA; forced so that a dry run uses it too
        run(args)
    if FAILURES:
        print(f"FAILED sections: {', '.join(FAILURES)}")
        raise SystemExit(1)


DRY_RUN_VOXELS = 300
"""Voxels of each dry-run scene's layers (the interpreter took ~50 s for one 3000-voxel subm)."""


def dry_unet_coords() -> torch.Tensor:
    """Two 32 x 2 x 2 bars (one batch item, 256 voxels): the fourth k2s2 level keeps 2 rows
    of each, so BatchNorm in training (which needs two rows a channel) runs at every level."""
    bar = torch.stack(
        torch.meshgrid(torch.arange(32), torch.arange(2), torch.arange(2), indexing="ij"), -1
    ).reshape(-1, 3)
    bars = torch.cat([bar, bar + torch.tensor([0, 20, 0])])
    return torch.cat([torch.zeros(bars.shape[0], 1, dtype=bars.dtype), bars], 1).to(
        device=DEVICE, dtype=torch.int32
    )


SCENE = "?"
"""The scene being measured, ``surface-N`` or ``lidar-N`` (in every RESULT line)."""


def scene_coords(kind: str, n: int) -> torch.Tensor:
    """(rows, 4) int32 coordinates of a scene of about ``n`` voxels on ``DEVICE``."""
    if kind == "lidar":
        return torch.from_numpy(lidar_coords(n)).to(DEVICE)
    coords_np, _ = make_scene(n)
    return torch.from_numpy(batched(coords_np)).to(DEVICE)


def run(args: argparse.Namespace) -> None:
    """The whole benchmark, scene by scene."""
    bw, rate = ceilings()
    print(f"ceilings: copy {bw / 1e12:.2f} TB/s, f16 matmul {rate / 1e12:.0f} TFLOP/s")
    global SCENE
    for kind in args.scenes:
        for n in args.sizes:
            coords = scene_coords(kind, n)
            SCENE = f"{kind}-{n // 1000}k" if n >= 1000 else f"{kind}-{n}"
            shape = [int(v) + 4 for v in coords[:, 1:].max(dim=0).values]
            print(f"\nscene {SCENE}: {coords.shape[0]} voxels, f16 layers", flush=True)
            if not args.no_layers:
                bench_layers(coords, shape, bw, rate)
            if n in args.unet_sizes:
                if DEVICE == "cpu":  # the dry run: once, on a small input (dry_unet_coords)
                    coords, args.unet_sizes = dry_unet_coords(), []
                    shape = [int(v) + 4 for v in coords[:, 1:].max(dim=0).values]
                bench_unet(coords, shape, tuple(args.steps), not args.no_forward)
            print(f"  ({time.perf_counter() - START:.0f} s since start)", flush=True)
    from torch_lattice.triton import kernels

    print("tile shapes chosen by the autotune:", flush=True)
    for key, cfg in sorted(kernels._TUNED.items(), key=str):
        print(f"  {key[:5]} -> {cfg}")


if __name__ == "__main__":
    main()

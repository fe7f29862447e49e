"""Neither runtime's kernel-map cache keeps a support or a map alive: no reference cycles.

Both runtimes name a target support by a weak reference in their cache keys
(and torch's transposed map twin points back weakly), so dropping every value
of an encoder/decoder pair frees their supports and maps by reference counting
alone.  The tests run with the cyclic garbage collector off: anything a cycle
kept alive would stay alive, and the weak references below would not die.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx
import mlx_lattice
import numpy as np
import pytest
import torch
import torch_lattice
from mlx_lattice.kernel_map import GeneratedSupport
from mlx_lattice.kernel_map import KernelMap as MxKernelMap
from torch_lattice.kernel_map import KernelMap as TorchKernelMap


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _fine_rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    coords = rng.integers(0, 12, size=(300, 4)).astype(np.int32)
    coords[:, 0] = 0
    coords = np.unique(coords, axis=0)
    return coords, rng.standard_normal((coords.shape[0], 4)).astype(np.float32)


def _mlx_side() -> tuple[Any, Callable[[Any], Any], Callable[[Any], object], Callable[..., Any]]:
    coords, feats = _fine_rows()
    x = mlx_lattice.SparseTensor(mx.array(coords), mx.array(feats), stride=1)

    def maps(value: Any) -> list[object]:
        out: list[object] = []
        for v in value.cache.relations.values():
            out.extend([v.kmap] if isinstance(v, GeneratedSupport) else [v])
        return [m for m in out if isinstance(m, MxKernelMap)]

    def weights(c_in: int, c_out: int) -> Any:
        return mx.ones((c_out, 2, 2, 2, c_in), dtype=mx.float32) / 10

    return x, maps, lambda value: value.cache, weights


def _torch_side() -> tuple[Any, Callable[[Any], Any], Callable[[Any], object], Callable[..., Any]]:
    coords, feats = _fine_rows()
    x = torch_lattice.SparseTensor(torch.from_numpy(coords), torch.from_numpy(feats), stride=1)

    def maps(value: Any) -> list[object]:
        out: list[object] = []
        for v in value.support.maps.values():
            out.extend(v if isinstance(v, tuple) else [v])
        return [m for m in out if isinstance(m, TorchKernelMap)]

    def weights(c_in: int, c_out: int) -> Any:
        return torch.ones(c_out, 2, 2, 2, c_in) / 10

    return x, maps, lambda value: value.support, weights


@pytest.mark.parametrize("side", [_mlx_side, _torch_side], ids=["mlx", "torch"])
def test_dropped_encoder_decoder_frees_supports_and_maps(
    side: Callable[[], tuple[Any, Any, Any, Any]], no_cycle_collector: None
) -> None:
    x, maps_of, support_of, weights = side()
    ops = mlx_lattice.ops if side is _mlx_side else torch_lattice.ops
    with torch.no_grad():
        down = ops.conv3d(x, weights(4, 8), kernel_size=2, stride=2)
        up = ops.conv_transpose3d(down, weights(8, 4), kernel_size=2, stride=2, coordinates=x)
        also = ops.conv3d(up, weights(4, 4), kernel_size=2, stride=2, coordinates=down)
        cached = len(maps_of(down))
        again = ops.conv_transpose3d(down, weights(8, 4), kernel_size=2, stride=2, coordinates=x)
        assert len(maps_of(down)) == cached  # a live weak key still hits its map
    assert support_of(up) is support_of(x)  # the decoder's output is on the encoder's input
    fine, coarse = weakref.ref(support_of(x)), weakref.ref(support_of(down))
    maps = [weakref.ref(m) for value in (x, down) for m in maps_of(value)]
    assert maps, "the ops cached no map"
    del x, down, up, also, again
    assert fine() is None, "the fine support outlived every value using it"
    assert coarse() is None, "the coarse support outlived every value using it"
    assert all(m() is None for m in maps), "a kernel map outlived its support"


@pytest.mark.parametrize("side", [_mlx_side, _torch_side], ids=["mlx", "torch"])
def test_a_dead_target_never_hits_a_new_one(
    side: Callable[[], tuple[Any, Any, Any, Any]], no_cycle_collector: None
) -> None:
    x, _, _, weights = side()
    ops = mlx_lattice.ops if side is _mlx_side else torch_lattice.ops
    rt = mlx_lattice if side is _mlx_side else torch_lattice
    with torch.no_grad():
        down = ops.conv3d(x, weights(4, 8), kernel_size=2, stride=2)
        first = ops.conv_transpose3d(down, weights(8, 4), kernel_size=2, stride=2, coordinates=x)
        rows = np.asarray(x.coords)[::2].copy()
        del first, x
        # A new target with other rows, possibly at the freed address: its map is its own.
        arr = mx.array if side is _mlx_side else torch.from_numpy
        target = rt.SparseTensor(arr(rows), arr(np.ones((rows.shape[0], 8), np.float32)), 1)
        again = ops.conv_transpose3d(
            down, weights(8, 4), kernel_size=2, stride=2, coordinates=target
        )
    assert again.num_rows == rows.shape[0]

"""The kernel-map cache never keeps a support or a map alive: no reference cycles.

Targets are named by weak references in cache keys, and a map's transposed
twin refers back to it weakly, so dropping the values of an encoder/decoder
pair frees their supports and maps by reference counting alone.  The tests run
with the cyclic garbage collector off: anything a cycle kept alive would stay.
The MLX runtime has the same test (test_map_cache_refs.py).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import torch
from torch_lattice import SparseTensor, ops


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _fine() -> SparseTensor:
    g = torch.Generator().manual_seed(2)
    coords = torch.randint(0, 12, (300, 4), generator=g, dtype=torch.int32)
    coords[:, 0] = 0
    coords = torch.unique(coords, dim=0)
    feats = torch.randn(coords.shape[0], 4, generator=g)
    return SparseTensor(coords, feats, stride=1)


def _weights(c_in: int, c_out: int, k: int) -> torch.Tensor:
    return torch.ones(c_out, k, k, k, c_in) / 10


def test_dropped_encoder_decoder_frees_supports_and_maps(no_cycle_collector: None) -> None:
    with torch.no_grad():
        x = _fine()
        down = ops.conv3d(x, _weights(4, 8, 2), kernel_size=2, stride=2)
        up = ops.conv_transpose3d(down, _weights(8, 4, 2), kernel_size=2, stride=2, coordinates=x)
        also = ops.conv3d(up, _weights(4, 4, 2), kernel_size=2, stride=2, coordinates=down)
    fine, coarse = weakref.ref(x.support), weakref.ref(down.support)
    maps = [weakref.ref(m) for s in (x.support, down.support) for m in _kmaps(s.maps)]
    assert maps, "the ops cached no map"
    del x, down, up, also
    assert fine() is None, "the fine support outlived every value using it"
    assert coarse() is None, "the coarse support outlived every value using it"
    assert all(m() is None for m in maps), "a kernel map outlived its support"


def _kmaps(maps: dict[tuple[object, ...], object]) -> list[object]:
    from torch_lattice.kernel_map import KernelMap

    found: list[object] = []
    for value in maps.values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, KernelMap):
                found.append(item)
    return found

"""The kernel-map cache never keeps a support alive: no reference cycles between supports.

A cached map names another support (a target) by a weak reference, as torch's
cache does, so dropping every value of a U-Net's encoder/decoder pair frees
their caches and maps by reference counting alone.  The tests run with the
cyclic garbage collector off: anything a cycle kept alive would stay alive.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import mlx.core as mx
import numpy as np
import pytest
from mlx_lattice import SparseTensor, ops


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _fine() -> SparseTensor:
    rng = np.random.default_rng(2)
    coords = np.unique(rng.integers(0, 12, size=(300, 4)), axis=0).astype(np.int32)
    coords[:, 0] = 0
    coords = np.unique(coords, axis=0)
    feats = rng.standard_normal((coords.shape[0], 4)).astype(np.float32)
    return SparseTensor(mx.array(coords), mx.array(feats), stride=1)


def _weights(c_in: int, c_out: int, k: int) -> mx.array:
    return mx.ones((c_out, k, k, k, c_in), dtype=mx.float32) / 10


def test_dropped_encoder_decoder_frees_its_caches(no_cycle_collector: None) -> None:
    x = _fine()
    down = ops.conv3d(x, _weights(4, 8, 2), kernel_size=2, stride=2)
    up = ops.conv_transpose3d(down, _weights(8, 4, 2), kernel_size=2, stride=2, coordinates=x)
    also = ops.conv3d(up, _weights(4, 4, 2), kernel_size=2, stride=2, coordinates=down)
    mx.eval(up.feats, also.feats)
    cached = len(down.cache.relations)
    again = ops.conv_transpose3d(down, _weights(8, 4, 2), kernel_size=2, stride=2, coordinates=x)
    assert len(down.cache.relations) == cached  # a live weak key still hits its map
    del again
    fine_cache, coarse_cache = weakref.ref(x.cache), weakref.ref(down.cache)
    assert up.cache is x.cache  # the decoder's output lives on the encoder's input support
    del x, down, up, also
    assert fine_cache() is None, "the fine support's cache outlived every value using it"
    assert coarse_cache() is None, "the coarse support's cache outlived every value using it"


def test_a_dead_target_never_hits_a_new_one(no_cycle_collector: None) -> None:
    x = _fine()
    down = ops.conv3d(x, _weights(4, 8, 2), kernel_size=2, stride=2)
    w = _weights(8, 4, 2)
    first = ops.conv_transpose3d(down, w, kernel_size=2, stride=2, coordinates=x)
    mx.eval(first.feats)
    del first
    x_rows = np.asarray(x.coords)
    del x
    # A new target with other rows, possibly at the freed address: its map is its own.
    shifted = SparseTensor(mx.array(x_rows[::2]), mx.ones((x_rows[::2].shape[0], 8)), stride=1)
    again = ops.conv_transpose3d(down, w, kernel_size=2, stride=2, coordinates=shifted)
    assert again.num_rows == shifted.num_rows

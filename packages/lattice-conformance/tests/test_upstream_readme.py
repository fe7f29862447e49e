"""mlx-lattice 0.6's README, run unchanged: its seven Python blocks, read from upstream's file.

The README is read where the shared data lives (``../shared/upstream``, or
``$LATTICE_UPSTREAM``); a missing file fails the test.  The blocks run in one
namespace, in order, as a reader pasting them would, on MLX's CPU device,
and each block's documented result is checked afterwards.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lattice import SparseTensor
from mlx_lattice.ops import QuantizedWeight

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_data import upstream_root


def _blocks() -> list[str]:
    path = upstream_root() / "README.upstream.md"
    assert path.is_file(), f"upstream README not found at {path} (set LATTICE_UPSTREAM)"
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 7, (
        f"expected the 7 Python blocks of mlx-lattice 0.6's README, got {len(blocks)}"
    )
    return blocks


@pytest.fixture(scope="module")
def readme() -> dict[str, object]:
    namespace: dict[str, object] = {}
    with mx.stream(mx.cpu):
        for number, block in enumerate(_blocks()):
            exec(compile(block, f"README.upstream.md block {number}", "exec"), namespace)
    return namespace


def test_sparse_tensor_block(readme: dict[str, object]) -> None:
    x = readme["x"]
    assert isinstance(x, SparseTensor)
    assert (x.num_rows, x.channels) == (4, 16)
    assert x.batch_counts().tolist() == [4]


def test_convolution_blocks(readme: dict[str, object]) -> None:
    x, y, z, target = readme["x"], readme["y"], readme["z"], readme["y_target"]
    assert isinstance(y, SparseTensor) and isinstance(z, SparseTensor)
    assert isinstance(x, SparseTensor) and isinstance(target, SparseTensor)
    assert y.channels == z.channels == target.channels == 32
    assert np.array_equal(np.asarray(z.coords), np.asarray(x.coords))  # support kept
    assert np.asarray(target.coords).tolist() == [[0, 1, 0, 0], [0, 3, 0, 0]]
    # (0, 3, 0, 0) sees only (0, 2, 1, 0) through the 3x3x3 window: one tap, not zero
    assert float(mx.abs(target.feats[1]).sum()) > 0


def test_module_and_pooling_blocks(readme: dict[str, object]) -> None:
    h, pooled = readme["h"], readme["pooled"]
    assert isinstance(h, SparseTensor) and isinstance(pooled, SparseTensor)
    assert h.channels == 32 and pooled.stride == (2, 2, 2)
    summary = readme["summary"]
    assert isinstance(summary, mx.array) and summary.shape == (1, 32)
    expected = np.asarray(pooled.feats).mean(axis=0)
    np.testing.assert_allclose(np.asarray(summary)[0], expected, rtol=1e-5, atol=1e-6)
    residual, merged = readme["residual"], readme["merged"]
    assert isinstance(residual, SparseTensor) and isinstance(merged, SparseTensor)
    np.testing.assert_allclose(
        np.asarray(residual.feats, np.float32), 2 * np.asarray(h.feats, np.float32), rtol=1e-3
    )
    assert merged.channels == 64 and merged.num_rows == h.num_rows


def test_point_voxel_block(readme: dict[str, object]) -> None:
    voxels, again = readme["voxels"], readme["point_feats_again"]
    assert isinstance(voxels, SparseTensor) and isinstance(again, mx.array)
    assert voxels.num_rows == 3 and voxels.channels == 8  # three separate 0.1 cells
    assert again.shape == (3, 8)


def test_quantized_block(readme: dict[str, object]) -> None:
    qy, qh, packed = readme["qy"], readme["qh"], readme["packed_weight"]
    assert isinstance(qy, SparseTensor) and isinstance(qh, SparseTensor)
    assert (qy.channels, qh.channels) == (32, 64)
    assert isinstance(packed, QuantizedWeight) and packed.bits == 4

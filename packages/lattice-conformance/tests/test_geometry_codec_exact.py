"""Cross-runtime exactness of the geometry codec's neural model, without --cross-check.

The shipped model is an integer network, so MLX and torch must return the
*same float32 bits* for every candidate logit, whatever order their kernels
sum in; a file coded with one runtime then decodes with the other.  These
tests compare the raw logits of both runtimes bit for bit on several thousand
contexts (every level of clouds with voxels on every face of the grid, a
shell, thin wires and a second batch of levels), and round-trip files across
runtimes with the neural methods and no cross-check.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from lattice_conformance.codec import NeuralModel, decode_voxels, encode_voxels, read_header
from lattice_conformance.codec.neural import level_crc
from lattice_conformance.codec.octree import build_octree, morton_decode
from torch_lattice.geometry import check_integer_network, load_geometry_model

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / "examples" / "geometry" / "model.lattice"
MODEL_ONLY = ("context", "neural", "hybrid")


def _vox(p: np.ndarray, levels: int) -> np.ndarray:
    v = np.floor(p * (1 << levels)).astype(np.int64)
    return np.unique(v[np.all((v >= 0) & (v < (1 << levels)), axis=1)], axis=0)


def _faces(levels: int, rng: np.random.Generator, per_face: int) -> np.ndarray:
    """Voxels on all six faces of the grid (some on its edges and corners) plus the centre."""
    hi = (1 << levels) - 1
    pts = rng.integers(0, hi + 1, (6 * per_face, 3))
    for f in range(6):
        pts[f * per_face : (f + 1) * per_face, f // 2] = 0 if f % 2 == 0 else hi
    corners = np.array([(a, b, c) for a in (0, hi) for b in (0, hi) for c in (0, hi)])
    return np.unique(np.r_[pts, corners, [[hi // 2] * 3]], axis=0)


def _shell_and_faces(levels: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 3))
    shell = _vox(0.5 + 0.3 * v / np.linalg.norm(v, axis=1, keepdims=True), levels)
    return np.unique(np.r_[shell, _faces(levels, rng, 40)], axis=0)


def _wires(levels: int, n: int, seed: int) -> np.ndarray:
    t = np.random.default_rng(seed).uniform(0, 2 * math.pi, n)
    r = 0.25 + 0.1 * np.cos(3 * t)
    knot = np.c_[0.5 + r * np.cos(2 * t), 0.5 + r * np.sin(2 * t), 0.5 + 0.1 * np.sin(3 * t)]
    return _vox(knot, levels)


@pytest.fixture(scope="module")
def models() -> dict[str, NeuralModel]:
    return {r: NeuralModel(MODEL, r) for r in ("torch", "mlx")}


def _sorted(coords: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort(coords.T[::-1])
    return coords[order], logits[order]


def test_shipped_model_is_a_proven_integer_network() -> None:
    model = load_geometry_model(MODEL / "weights.safetensors")  # runs the check itself
    assert check_integer_network(model) > 0
    # the check bites on this very model: half a grid step off one weight is refused
    w = model.head.weight.detach()
    step = float(w.abs().max()) / 64  # at most 127 steps up to the peak, so below 2 steps
    off = {k: v.clone() for k, v in model.state_dict().items()}
    off["head.weight"][0, 0] += step / 1024
    with pytest.raises(ValueError, match="head: a sum can reach"):
        load_geometry_model(off)


@pytest.mark.parametrize(("name", "levels"), [("faces", 8), ("shell_faces", 7), ("wires", 10)])
def test_runtimes_give_bit_identical_logits(
    models: dict[str, NeuralModel], name: str, levels: int
) -> None:
    rng = np.random.default_rng(3)
    cloud = {
        "faces": lambda: _faces(levels, rng, 300),
        "shell_faces": lambda: _shell_and_faces(levels, 30_000, 4),
        "wires": lambda: _wires(levels, 6_000, 5),
    }[name]()
    keys, _ = build_octree(cloud, levels)
    contexts = 0
    for lv in range(levels):
        rows = morton_decode(keys[lv], lv)
        ct, lt = _sorted(*models["torch"].candidate_logits(rows, lv, levels))
        cm, lm = _sorted(*models["mlx"].candidate_logits(rows, lv, levels))
        assert np.array_equal(ct, cm)
        assert lt.dtype == lm.dtype == np.float32
        assert np.array_equal(lt.view(np.uint32), lm.view(np.uint32)), f"level {lv}"
        qt = models["torch"].logit_levels(rows, lv, levels)
        assert level_crc(qt) == level_crc(models["mlx"].logit_levels(rows, lv, levels))
        contexts += len(lt)
    assert contexts >= 2_000  # several thousand candidate contexts per cloud


@pytest.mark.parametrize(("enc", "dec"), [("torch", "mlx"), ("mlx", "torch")])
def test_cross_runtime_round_trip_without_cross_check(
    models: dict[str, NeuralModel], enc: str, dec: str
) -> None:
    vox = _shell_and_faces(7, 12_000, 8)
    result = encode_voxels(vox, 7, models[enc], allow_lzma=False, methods_allowed=MODEL_ONLY)
    assert {"neural", "hybrid"} & set(result.methods), result.level_bits
    assert result.fixes == 0
    assert read_header(result.data).digest == models[enc].digest
    back, levels = decode_voxels(result.data, models[dec])
    assert levels == 7
    assert np.array_equal(np.unique(back, axis=0), np.unique(vox, axis=0))


@pytest.mark.slow
@pytest.mark.parametrize(("enc", "dec"), [("torch", "mlx"), ("mlx", "torch")])
@pytest.mark.parametrize("which", ["shell_faces_l9", "shell_faces_l10"])
def test_cross_runtime_round_trip_larger_clouds(
    models: dict[str, NeuralModel], enc: str, dec: str, which: str
) -> None:
    vox, levels = {
        "shell_faces_l9": (_shell_and_faces(9, 120_000, 9), 9),
        "shell_faces_l10": (_shell_and_faces(10, 60_000, 10), 10),
    }[which]
    result = encode_voxels(vox, levels, models[enc], allow_lzma=False, methods_allowed=MODEL_ONLY)
    assert {"neural", "hybrid"} & set(result.methods), result.level_bits
    back, _ = decode_voxels(result.data, models[dec])
    assert np.array_equal(np.unique(back, axis=0), np.unique(vox, axis=0))

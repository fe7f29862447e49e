"""Method 5: the mixing model with the neural model's logits as mixer inputs.

The integer network's quantised logits are bit-identical on MLX and torch,
so a file coded on one runtime decodes on the other; the mixing state is
shared with method 4, so the decoder must follow whichever of the two coded
each level (and learn method 4's state on levels another method won).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lattice_conformance.codec import (
    CodecFormatError,
    NeuralModel,
    decode_voxels,
    encode_voxels,
    read_header,
)
from lattice_conformance.codec import codec as codec_module
from lattice_conformance.codec.mixing import MIN_PARENTS, MixState, nn_stretch
from lattice_conformance.codec.octree import build_octree

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / "examples" / "geometry" / "model.lattice"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(np.unique(a, axis=0), np.unique(b, axis=0)))


def _shell(levels: int, n: int, seed: int) -> np.ndarray:
    """An ellipsoid shell with voxels on every face of the grid (the model's edges)."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    p = 0.5 + v * np.array([0.42, 0.3, 0.36])
    side = 1 << levels
    faces = rng.integers(0, side, (600, 3))
    faces[np.arange(600), rng.integers(0, 3, 600)] = rng.integers(0, 2, 600) * (side - 1)
    vox = np.concatenate([np.floor(p * side).astype(np.int64), faces])
    return np.unique(np.clip(vox, 0, side - 1), axis=0)


@pytest.fixture(scope="module")
def models() -> dict[str, NeuralModel]:
    return {r: NeuralModel(MODEL, r) for r in ("torch", "mlx")}


def test_nn_stretch_is_the_centre_of_each_logit_step() -> None:
    li = np.arange(-96, 96)
    x = nn_stretch(li)
    centre = 256 * (li + 0.5) / 8  # stretch is 256 * logit; floor(8 * logit) = li
    inside = np.abs(centre) <= 2047
    assert np.array_equal(x[inside], centre[inside].astype(np.int64))
    assert set(x[~inside].tolist()) == {-2047, 2047} and x.dtype == np.int64


@pytest.mark.parametrize(("enc", "dec"), [("torch", "mlx"), ("mlx", "torch")])
def test_method_5_round_trips_across_runtimes_within_the_estimate(
    models: dict[str, NeuralModel], enc: str, dec: str
) -> None:
    vox = _shell(6, 15_000, 3)
    res = encode_voxels(vox, 6, models[enc], allow_lzma=False, methods_allowed=("context", "mixnn"))
    assert "mixnn" in res.methods, res.methods
    head = read_header(res.data)
    assert head.version == 3 and head.digest == models[enc].digest
    back, levels = decode_voxels(res.data, models[dec])
    assert levels == 6 and _same(back, vox)
    # payload = file - header - per-level side info (CRC, fix count): within 0.5 %
    side = 5 * sum(m in ("neural", "hybrid", "mixnn") for m in res.methods)
    count_bytes = max(1, (len(vox).bit_length() + 6) // 7)
    payload = 8 * (len(res.data) - (4 + 3 + count_bytes + 6 + 32 + side))
    assert abs(payload - res.estimate_bits) <= 0.005 * res.estimate_bits


def test_method_5_needs_the_model_it_names(models: dict[str, NeuralModel]) -> None:
    vox = _shell(6, 8_000, 4)
    res = encode_voxels(vox, 6, models["torch"], allow_lzma=False)
    if "mixnn" not in res.methods:  # the per-level choice: force the method
        res = encode_voxels(
            vox, 6, models["torch"], allow_lzma=False, methods_allowed=("context", "mixnn")
        )
    assert "mixnn" in res.methods
    with pytest.raises(CodecFormatError, match="digest"):
        decode_voxels(res.data)
    # an older format (2) cannot hold method 5: the reader says so
    old = res.data[:4] + bytes([2]) + res.data[5:]
    with pytest.raises(CodecFormatError, match="method 5"):
        decode_voxels(old, models["torch"])


def test_format_2_files_without_method_5_still_decode() -> None:
    vox = _shell(6, 8_000, 5)
    res = encode_voxels(vox, 6, allow_lzma=False)
    assert "mixnn" not in res.methods and "mix" in res.methods
    assert _same(decode_voxels(res.data[:4] + bytes([2]) + res.data[5:])[0], vox)


@pytest.mark.parametrize("forbid", ["mix", "mixnn"])
def test_decoder_follows_methods_4_and_5_sharing_one_state(
    models: dict[str, NeuralModel], monkeypatch: pytest.MonkeyPatch, forbid: str
) -> None:
    """Level by level, methods 4 and 5 alternate (each made costly on every other level).

    The state after a level is the winning method's, so a decoder that kept
    the wrong one falls out of step at the next mixing level.
    """
    vox = _shell(6, 15_000, 6)
    keys, _ = build_octree(vox, 6)
    big = [lv for lv in range(6) if len(keys[lv]) >= MIN_PARENTS]
    odd = {len(keys[lv]) for lv in big[::2]}
    real = codec_module.code_level_mix

    def costly(
        coder: Any,
        rows: np.ndarray,
        nbr: np.ndarray,
        codes: Any,
        state: MixState,
        nn: np.ndarray | None = None,
    ) -> tuple[np.ndarray, float]:
        got, bits = real(coder, rows, nbr, codes, state, nn)
        # ``forbid`` on every other large level, the other method on the rest
        hit = ((nn is None) == (forbid == "mix")) == (len(rows) in odd)
        return got, bits + (1e9 if hit else 0.0)

    monkeypatch.setattr(codec_module, "code_level_mix", costly)
    res = encode_voxels(
        vox, 6, models["torch"], allow_lzma=False, methods_allowed=("context", "mix", "mixnn")
    )
    monkeypatch.undo()
    chosen = [res.methods[lv] for lv in big]
    assert "mix" in chosen and "mixnn" in chosen, chosen
    assert _same(decode_voxels(res.data, models["mlx"])[0], vox)


@pytest.mark.slow
@pytest.mark.parametrize(("enc", "dec"), [("torch", "mlx"), ("mlx", "torch")])
def test_level_10_file_with_every_method_round_trips_across_runtimes(
    models: dict[str, NeuralModel], enc: str, dec: str
) -> None:
    vox = _shell(10, 120_000, 7)
    res = encode_voxels(vox, 10, models[enc])
    assert res.mode == "octree" and "mixnn" in res.methods, res.methods
    back, levels = decode_voxels(res.data, models[dec])
    assert levels == 10 and _same(back, vox)

"""The mixing method of the geometry codec: lossless on edge clouds, decodable elsewhere, better.

The method is tested on its own (every level coded with it, decoded from the
range-coded words alone) so that the edge clouds exercise its decoder even
where the per-level choice would pick another method, and through the file
format (choice, separate-process decode, corrupt files).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lattice_conformance.codec import CodecFormatError, decode_voxels, encode_voxels
from lattice_conformance.codec import codec as codec_module
from lattice_conformance.codec.coder import Coder
from lattice_conformance.codec.mixing import MIN_PARENTS, MixState, code_level_mix
from lattice_conformance.codec.octree import (
    build_octree,
    expand_level,
    morton_decode,
    neighbours,
)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    ua, ub = np.unique(a, axis=0), np.unique(b, axis=0)
    return ua.shape == ub.shape and bool(np.array_equal(ua, ub))


def _faces(levels: int) -> np.ndarray:
    """Voxels on every face, edge and corner of the grid, plus the centre."""
    hi = (1 << levels) - 1
    vals = (0, 1, hi // 2, hi - 1, hi)
    return np.array([(a, b, c) for a in vals for b in vals for c in vals], np.int64)


def _slab_shell(levels: int, seed: int) -> np.ndarray:
    """A noisy sphere shell cut by two axis-aligned planes (curved and flat faces)."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(40_000, 3))
    p = 0.5 + 0.3 * v / np.linalg.norm(v, axis=1, keepdims=True)
    uv = rng.uniform(0.1, 0.9, (20_000, 2))
    p = np.r_[p, np.c_[uv, np.full(len(uv), 0.21)], np.c_[np.full(len(uv), 0.77), uv]]
    vox = np.floor(p * (1 << levels)).astype(np.int64)
    return np.unique(np.clip(vox, 0, (1 << levels) - 1), axis=0)


def _mix_only_round_trip(vox: np.ndarray, levels: int) -> np.ndarray:
    """Code every level with the mixing method, then decode from the words alone."""
    keys, codes = build_octree(vox, levels)
    coder, state = Coder(), MixState()
    for lv in range(levels):
        rows = morton_decode(keys[lv], lv)
        code_level_mix(coder, rows, neighbours(rows, lv), codes[lv], state)
        state.halve()
    words = np.frombuffer(coder.words(), dtype="<u4").astype(np.uint32)
    dec, dstate = Coder(words), MixState()
    parents = np.zeros(1 if len(vox) else 0, np.uint64)
    for lv in range(levels):
        rows = morton_decode(parents, lv)
        got, _ = code_level_mix(dec, rows, neighbours(rows, lv), None, dstate)
        assert np.array_equal(got, codes[lv].astype(np.int64)), f"level {lv}"
        dstate.halve()
        parents = expand_level(parents, got.astype(np.uint8))
    return morton_decode(parents, levels)


EDGE = {
    "empty": (np.zeros((0, 3), np.int64), 8),
    "one_voxel": (np.zeros((1, 3), np.int64), 8),
    "far_corner_l10": (np.full((1, 3), 1023, np.int64), 10),
    "level1_full": (np.array([(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1)]), 1),
    "faces_l8": (_faces(8), 8),
    "faces_l10": (_faces(10), 10),
    "full_block_l4": (np.stack(np.meshgrid(*[np.arange(16)] * 3), -1).reshape(-1, 3), 4),
}


@pytest.mark.parametrize("name", sorted(EDGE))
def test_mix_method_alone_round_trips_edge_clouds(name: str) -> None:
    vox, levels = EDGE[name]
    assert _same(_mix_only_round_trip(vox, levels), vox)


def test_mix_method_alone_round_trips_random_clouds() -> None:
    # every level is coded with the method here (MIN_PARENTS is the file's rule, not applied)
    for levels in (2, 6):
        vox = np.random.default_rng(levels).integers(0, 1 << levels, (400, 3))
        assert _same(_mix_only_round_trip(vox, levels), vox)


def test_decoder_learns_levels_that_another_method_won(monkeypatch: pytest.MonkeyPatch) -> None:
    """A level with >= MIN_PARENTS parents won by another method, before a mix level.

    The mixing state learns from every such level, so the decoder must run the
    method learn-only there; a decoder that skipped it would fall out of step
    at the next mix level.  The encoder's cost for the mix method is inflated
    at the first large level only, which forces exactly that file.
    """
    vox = _slab_shell(7, 3)
    keys, _ = build_octree(vox, 7)
    counts = [len(k) for k in keys]
    first = next(lv for lv, n in enumerate(counts) if n >= MIN_PARENTS)
    real = codec_module.code_level_mix

    def costly_at_first(
        coder: Any, rows: np.ndarray, nbr: np.ndarray, codes: Any, state: MixState
    ) -> tuple[np.ndarray, float]:
        got, bits = real(coder, rows, nbr, codes, state)
        return got, bits + (1e9 if len(rows) == counts[first] else 0.0)

    monkeypatch.setattr(codec_module, "code_level_mix", costly_at_first)
    result = encode_voxels(vox, 7, allow_lzma=False)
    assert result.methods[first] != "mix" and "mix" in result.methods[first + 1 :], result.methods
    monkeypatch.undo()
    assert _same(decode_voxels(result.data)[0], vox)


def test_mix_is_chosen_beats_phases_and_decodes_in_another_process(tmp_path: Path) -> None:
    vox = _slab_shell(7, 3)
    full = encode_voxels(vox, 7, allow_lzma=False)
    assert "mix" in full.methods, full.methods
    phases = encode_voxels(vox, 7, allow_lzma=False, methods_allowed=("context", "phases"))
    # The method is worth having: clearly below the parity-phase file.
    assert len(full.data) < 0.95 * len(phases.data)
    count_bytes = max(1, (len(vox).bit_length() + 6) // 7)
    payload_bits = 8 * (len(full.data) - (4 + 3 + count_bytes + 7))
    assert abs(payload_bits - full.estimate_bits) <= 0.005 * full.estimate_bits
    coded, out = tmp_path / "c.lgc", tmp_path / "back.npy"
    coded.write_bytes(full.data)
    script = (
        "import sys, numpy as np\n"
        "from lattice_conformance.codec import decode_voxels\n"
        "v, _ = decode_voxels(open(sys.argv[1], 'rb').read())\n"
        "np.save(sys.argv[2], v)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(coded), str(out)], check=True, timeout=300)
    assert _same(np.load(out), vox)


def test_corrupted_mix_file_is_refused() -> None:
    vox = _slab_shell(6, 4)
    data = encode_voxels(vox, 6, allow_lzma=False, methods_allowed=("context", "mix")).data
    assert _same(decode_voxels(data)[0], vox)
    count_bytes = max(1, (len(vox).bit_length() + 6) // 7)
    body = 4 + 3 + count_bytes + 6  # magic, version/mode/levels, voxel count, method bytes
    assert set(data[body - 6 : body]) <= {0, 4}
    for at in (body + 3, len(data) // 2, len(data) - 9):
        bad = bytearray(data)
        bad[at] ^= 0x5A
        with pytest.raises(CodecFormatError):
            decode_voxels(bytes(bad))
    with pytest.raises(CodecFormatError, match="unknown level method"):
        decode_voxels(data[: body - 1] + bytes([9]) + data[body:])
    with pytest.raises(CodecFormatError):
        decode_voxels(data[: len(data) // 2])

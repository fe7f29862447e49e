"""The geometry codec: lossless on edge clouds, across runtimes, never above LZMA / order-0."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lattice_conformance.cli import conformance_main
from lattice_conformance.codec import (
    CodecFormatError,
    NeuralModel,
    decode_voxels,
    encode_voxels,
    read_header,
)
from lattice_conformance.codec.baselines import baselines
from lattice_conformance.codec.cli import main as codec_main
from lattice_conformance.ply import read_ply, write_ply
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / "examples" / "geometry" / "model.lattice"


def _vox(p: np.ndarray, levels: int) -> np.ndarray:
    v = np.floor(p * (1 << levels)).astype(np.int64)
    return np.unique(v[np.all((v >= 0) & (v < (1 << levels)), axis=1)], axis=0)


def _shell(levels: int, n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 3))
    return _vox(0.5 + 0.3 * v / np.linalg.norm(v, axis=1, keepdims=True), levels)


def _plane(levels: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    uv = rng.uniform(0.05, 0.95, (n, 2))
    hole = np.linalg.norm(uv - 0.5, axis=1) < 0.15
    uv = uv[~hole]
    return _vox(np.c_[uv, 0.3 + 0.25 * uv[:, 0] + 0.1 * uv[:, 1]], levels)


def _wires(levels: int, n: int, seed: int) -> np.ndarray:
    t = np.random.default_rng(seed).uniform(0, 2 * math.pi, n)
    r = 0.25 + 0.1 * np.cos(3 * t)
    return _vox(
        np.c_[0.5 + r * np.cos(2 * t), 0.5 + r * np.sin(2 * t), 0.5 + 0.1 * np.sin(3 * t)], levels
    )


def _faces(levels: int) -> np.ndarray:
    """A voxel on every face, edge and corner of the grid, plus the centre."""
    hi = (1 << levels) - 1
    vals = (0, hi // 2, hi)
    return np.array([(a, b, c) for a in vals for b in vals for c in vals], np.int64)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    ua, ub = np.unique(a, axis=0), np.unique(b, axis=0)
    return ua.shape == ub.shape and bool(np.array_equal(ua, ub))


EDGE_CLOUDS = {
    "empty": (np.zeros((0, 3), np.int64), 8),
    "origin": (np.zeros((1, 3), np.int64), 8),
    "far_corner": (np.full((1, 3), 1023, np.int64), 10),
    "faces_l8": (_faces(8), 8),
    "faces_l10": (_faces(10), 10),
    "duplicates": (np.array([[3, 4, 5], [3, 4, 5], [0, 0, 1]]), 8),
}


@pytest.mark.slow
def test_context_round_trip_dense_level10() -> None:
    vox = _shell(10, 20_000, 0)
    assert _same(decode_voxels(encode_voxels(vox, 10).data)[0], vox)


@pytest.mark.parametrize("allow_lzma", [True, False])
@pytest.mark.parametrize("name", sorted(EDGE_CLOUDS))
def test_context_round_trip(name: str, allow_lzma: bool) -> None:
    vox, levels = EDGE_CLOUDS[name]
    result = encode_voxels(vox, levels, allow_lzma=allow_lzma)
    back, got_levels = decode_voxels(result.data)
    assert got_levels == levels
    assert _same(back, vox)
    head = read_header(result.data)
    assert head.voxels == len(np.unique(vox, axis=0)) and head.levels == levels
    if not allow_lzma:
        assert head.mode == "octree" and head.digest is None


def test_lzma_mode_round_trip_and_is_chosen_when_smaller() -> None:
    # A full 16^3 block: LZMA of its octree stream (all 0xFF) is tiny.
    g = np.arange(16)
    vox = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    result = encode_voxels(vox, 8)
    assert _same(decode_voxels(result.data)[0], vox)
    forced = encode_voxels(vox, 8, allow_lzma=False)
    assert len(result.data) <= len(forced.data)


def test_payload_within_half_a_percent_of_the_estimate() -> None:
    vox = _shell(7, 30_000, 3)
    result = encode_voxels(vox, 7, allow_lzma=False)
    header = 4 + 3 + 3 + 7  # magic, version/mode/levels, voxels varint, methods (no model)
    payload_bits = 8 * (len(result.data) - header)
    assert abs(payload_bits - result.estimate_bits) <= 0.005 * result.estimate_bits


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cloud", "levels"),
    [(_shell(8, 60_000, 11), 8), (_plane(8, 60_000, 12), 8), (_wires(8, 20_000, 13), 8)],
    ids=["shell", "plane_hole", "wires"],
)
def test_never_above_lzma_or_order0(cloud: np.ndarray, levels: int) -> None:
    result = encode_voxels(cloud, levels)
    base = baselines(cloud, levels)
    assert len(result.data) <= base["xz_bytes"]
    assert 8 * len(result.data) <= base["order0_bits"] + 8 * 64  # order-0 needs its table too
    assert _same(decode_voxels(result.data)[0], cloud)


MODEL_ONLY = ("context", "neural", "hybrid")  # the parity phases would win these small clouds


@pytest.fixture(scope="module")
def models() -> dict[str, NeuralModel]:
    return {r: NeuralModel(MODEL, r) for r in ("torch", "mlx")}


@pytest.mark.slow
@pytest.mark.parametrize(("enc", "dec"), [("torch", "mlx"), ("mlx", "torch"), ("torch", "torch")])
def test_neural_round_trip_across_runtimes(
    models: dict[str, NeuralModel], enc: str, dec: str
) -> None:
    vox = _shell(6, 6_000, 5)
    other = models["mlx" if enc == "torch" else "torch"]
    result = encode_voxels(
        vox, 6, models[enc], cross_check=other, allow_lzma=False, methods_allowed=MODEL_ONLY
    )
    assert {"neural", "hybrid"} & set(result.methods), result.level_bits
    head = read_header(result.data)
    assert head.digest == models[enc].digest
    assert _same(decode_voxels(result.data, models[dec])[0], vox)


@pytest.mark.slow
def test_neural_file_needs_the_right_model(models: dict[str, NeuralModel], tmp_path: Path) -> None:
    vox = _shell(6, 6_000, 6)
    data = encode_voxels(vox, 6, models["torch"], allow_lzma=False, methods_allowed=MODEL_ONLY).data
    with pytest.raises(CodecFormatError, match="pass the model artifact"):
        decode_voxels(data)
    fake = tmp_path / "other.lattice"
    fake.mkdir()
    (fake / "graph.mlir").write_bytes((MODEL / "graph.mlir").read_bytes() + b"\n")
    (fake / "weights.safetensors").write_bytes((MODEL / "weights.safetensors").read_bytes())
    with pytest.raises(CodecFormatError, match="needs the model with digest"):
        decode_voxels(data, NeuralModel(fake, "torch"))
    (fake / "weights.safetensors").write_bytes((MODEL / "weights.safetensors").read_bytes() + b" ")
    with pytest.raises(ValueError, match=r"cannot read .*weights\.safetensors"):
        NeuralModel(fake, "mlx")


def _altered_artifact(tmp_path: Path, name: str, change: dict[str, Any]) -> Path:
    """A copy of the shipped artifact whose weights have entries replaced by ``change``."""
    state = load_file(str(MODEL / "weights.safetensors"))
    state.update(change)
    out = tmp_path / name
    out.mkdir()
    (out / "graph.mlir").write_bytes((MODEL / "graph.mlir").read_bytes())
    save_file(state, str(out / "weights.safetensors"))
    return out


@pytest.mark.parametrize("runtime", ["torch", "mlx"])
def test_old_or_hostile_artifacts_get_one_clear_line(
    runtime: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both runtimes run the integer-network proof on the artifact before any coding."""
    state = load_file(str(MODEL / "weights.safetensors"))
    old = _altered_artifact(  # an artifact from before the level features: 1 parent feature
        tmp_path,
        "old.lattice",
        {
            "stem.weight": state["stem.weight"][..., :1].contiguous(),
            "ceiling_parents.weight": state["ceiling_parents.weight"][:, :1].contiguous(),
        },
    )
    ceiling = state["ceiling_parents.bias"].clone()
    ceiling[0] = 1e7
    hostile = _altered_artifact(tmp_path, "hostile.lattice", {"ceiling_parents.bias": ceiling})
    ply = tmp_path / "in.ply"
    write_ply(ply, _faces(6).astype(np.float32))
    for artifact, expected in (
        (old, "predate the level-conditioned"),
        (hostile, "ceiling_parents.bias"),
    ):
        with pytest.raises(ValueError, match=expected):
            NeuralModel(artifact, runtime)
        out = tmp_path / "x.lgc"
        argv = ["geometry-codec", "encode", "--input", str(ply), "--output", str(out)]
        argv += ["--levels", "6", "--model", str(artifact), "--runtime", runtime]
        assert conformance_main(argv) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
        profile = ["geometry-profile", "--input", str(ply), "--weights", str(artifact)]
        assert conformance_main([*profile, "--runtime", runtime]) == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _box(levels: int) -> np.ndarray:
    """The surface of an axis-aligned box: the faces the parity-phase model is for."""
    g = np.arange(3, (1 << levels) - 5)
    a, b = (m.ravel() for m in np.meshgrid(g, g, indexing="ij"))
    lo, hi = np.full_like(a, 3), np.full_like(a, (1 << levels) - 6)
    faces = [np.c_[lo, a, b], np.c_[hi, a, b], np.c_[a, lo, b], np.c_[a, hi, b]]
    return np.unique(np.concatenate([*faces, np.c_[a, b, lo], np.c_[a, b, hi]]), axis=0)


def test_phase_method_round_trip_on_axis_aligned_faces() -> None:
    vox = _box(6)
    result = encode_voxels(vox, 6, allow_lzma=False, methods_allowed=("context", "phases"))
    assert "phases" in result.methods and "context" in result.methods, result.methods
    assert _same(decode_voxels(result.data)[0], vox)
    only_ctx = encode_voxels(vox, 6, allow_lzma=False, methods_allowed=("context",))
    assert len(result.data) < len(only_ctx.data)


def test_never_more_than_a_few_bytes_above_context_only() -> None:
    # The choice counts the header, so adding methods never costs more than
    # the range coder's last word.
    for vox, levels in ((_wires(7, 3_000, 2), 7), (_faces(8), 8), (_plane(6, 4_000, 4), 6)):
        full = encode_voxels(vox, levels, allow_lzma=False)
        only_ctx = encode_voxels(vox, levels, allow_lzma=False, methods_allowed=("context",))
        assert len(full.data) <= len(only_ctx.data) + 4
    with pytest.raises(ValueError, match="left out"):
        encode_voxels(_faces(8), 8, methods_allowed=("phases",))
    with pytest.raises(ValueError, match="unknown methods"):
        encode_voxels(_faces(8), 8, methods_allowed=("context", "zip"))


def test_format_1_files_still_decode_but_cannot_hold_mixing() -> None:
    """Versions 2 and 3 only added methods 4 and 5: a version 1 file decodes; one claiming
    method 4 is refused."""
    vox = _faces(8)
    old = encode_voxels(vox, 8, allow_lzma=False, methods_allowed=("context", "phases"))
    assert old.data[4] == 3
    got, levels = decode_voxels(old.data[:4] + bytes([1]) + old.data[5:])
    assert levels == 8 and _same(got, vox)
    methods_at = 7 + 1  # magic, version/mode/levels, a one-byte voxel count (27 voxels)
    assert old.data[7] == len(vox)
    claimed = bytearray(old.data)
    claimed[4], claimed[methods_at + 7] = 1, 4
    with pytest.raises(CodecFormatError, match="format 1 file cannot use method 4"):
        decode_voxels(bytes(claimed))


def test_bad_files_are_refused() -> None:
    good = encode_voxels(_faces(8), 8, allow_lzma=False).data
    with pytest.raises(CodecFormatError, match="magic"):
        decode_voxels(b"XXXX" + good[4:])
    with pytest.raises(
        CodecFormatError, match=r"newer codec \(format 99\); this decoder reads up to 3"
    ):
        decode_voxels(good[:4] + bytes([99]) + good[5:])
    with pytest.raises(CodecFormatError, match="version 0 does not exist"):
        decode_voxels(good[:4] + bytes([0]) + good[5:])
    with pytest.raises(CodecFormatError, match="truncated"):
        decode_voxels(good[:6])
    with pytest.raises(ValueError, match="must lie in"):
        encode_voxels(np.array([[256, 0, 0]]), 8)


def test_cli_round_trip_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vox = _plane(7, 8_000, 9)
    ply = tmp_path / "in.ply"
    write_ply(ply, vox.astype(np.float32))
    coded, back, report = tmp_path / "c.lgc", tmp_path / "back.ply", tmp_path / "r.json"
    argv = [
        "encode",
        "--input",
        str(ply),
        "--output",
        str(coded),
        "--levels",
        "7",
        "--report",
        str(report),
    ]
    assert codec_main(argv) == 0
    assert "xz -9e" in capsys.readouterr().out and report.is_file()
    assert codec_main(["decode", "--input", str(coded), "--output", str(back)]) == 0
    assert _same(read_ply(back).astype(np.int64), vox)
    # Through the conformance command, which routes the log to stderr (as the console does).
    bad = ["geometry-codec", "decode", "--input", str(ply), "--output", str(tmp_path / "x.ply")]
    assert conformance_main(bad) == 2
    assert "magic" in capsys.readouterr().err
    assert not (tmp_path / "x.ply").exists()
    missing = ["encode", "--input", str(tmp_path / "nope.ply"), "--output", str(coded)]
    assert codec_main(missing) == 2

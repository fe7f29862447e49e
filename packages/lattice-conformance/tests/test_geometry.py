"""``conformance geometry-profile`` on the shipped Level-8 cloud and on tiny clouds."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from lattice_conformance.geometry import GeometryProfileError, ProfileResult, main, run_profile
from lattice_conformance.ply import write_ply

# Subcommands are called here without the command entry that sets up logging.
pytestmark = pytest.mark.usefixtures("command_logging")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "geometry"
WEIGHTS = EXAMPLE / "model.lattice" / "weights.safetensors"
LEVEL8 = EXAMPLE / "level8.ply"


def native_available() -> bool:
    from mlx_lattice.artifact import native_artifact_execution_available

    return native_artifact_execution_available()


needs_native = pytest.mark.skipif(not native_available(), reason="lattice_mlir is not built")


@pytest.fixture(scope="module")
def shipped() -> dict[str, ProfileResult]:
    if not native_available():
        pytest.skip("lattice_mlir is not built")
    return {
        runtime: run_profile(WEIGHTS, LEVEL8, levels=8, runtime=runtime, repeat=1, warmup=0)
        for runtime in ("mlx", "torch")
    }


def tiny_cloud(path: Path, seed: int = 0, count: int = 60, levels: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 1 << levels, (count, 3)).astype(np.float32)
    write_ply(path, points)
    return points


def direct_level_bits(points: np.ndarray, levels: int) -> tuple[list[float], list[int]]:
    """Per-level -log2 p from the eager model's logits and set membership, in float64."""
    import torch
    from torch_lattice.geometry import level_inputs, load_geometry_model
    from torch_lattice.occupancy import candidate_children, occupancy_hierarchy

    model = load_geometry_model(WEIGHTS)
    voxels = np.unique(points.astype(np.int32), axis=0)
    coords = torch.from_numpy(np.concatenate([np.zeros((len(voxels), 1), np.int32), voxels], 1))
    h = occupancy_hierarchy(coords, levels)
    bits = []
    for level in range(levels):
        parents, _ = level_inputs(h.levels[level], h.levels[level + 1], level=level, levels=levels)
        with torch.no_grad():
            logits = model.candidate_logits(parents)
        rows = logits.coords.tolist()
        value = {tuple(r): float(v) for r, v in zip(rows, logits.feats[:, 0], strict=True)}
        occupied = {tuple(r) for r in h.levels[level + 1].tolist()}
        total = 0.0
        for row in map(tuple, candidate_children(h.levels[level]).tolist()):
            p = 1.0 / (1.0 + math.exp(-value[row]))
            total -= math.log2(p if row in occupied else 1.0 - p)
        bits.append(total)
    return bits, h.counts()


def test_shipped_profile_beats_the_octree(shipped: dict[str, ProfileResult]) -> None:
    result = shipped["mlx"]
    assert result.levels == 8 and result.points == result.voxels > 10_000
    assert result.per_level[0].parents == 1  # the root
    assert result.octree_bits == 8 * sum(lv.parents for lv in result.per_level)
    assert result.total_bits == pytest.approx(sum(lv.bits for lv in result.per_level))
    assert 0 < result.bpp < result.octree_bpp
    assert len(result.timed_runs_s) == 1 and result.timed_median_s > 0


def test_torch_and_mlx_estimates_agree(shipped: dict[str, ProfileResult]) -> None:
    mlx_result, torch_result = shipped["mlx"], shipped["torch"]
    assert mlx_result.bpp == pytest.approx(torch_result.bpp, rel=1e-3)
    for a, b in zip(mlx_result.per_level, torch_result.per_level, strict=True):
        assert (a.parents, a.children) == (b.parents, b.children)
        assert a.bits == pytest.approx(b.bits, rel=1e-3, abs=1e-3)


@needs_native
@pytest.mark.parametrize("runtime", ["mlx", "torch"])
def test_bpp_equals_a_direct_computation(tmp_path: Path, runtime: str) -> None:
    points = tiny_cloud(tmp_path / "tiny.ply")
    result = run_profile(
        WEIGHTS, tmp_path / "tiny.ply", levels=4, runtime=runtime, repeat=1, warmup=0
    )
    bits, counts = direct_level_bits(points, 4)
    assert [lv.parents for lv in result.per_level] == counts[:-1]
    assert [lv.children for lv in result.per_level] == counts[1:]
    for level, expected in zip(result.per_level, bits, strict=True):
        assert level.bits == pytest.approx(expected, rel=1e-4)
    assert result.bpp == pytest.approx(sum(bits) / len(points), rel=1e-4)
    assert result.octree_bpp == 8 * sum(counts[:-1]) / len(points)


@needs_native
def test_bare_weights_are_exported_first(tmp_path: Path) -> None:
    tiny_cloud(tmp_path / "tiny.ply", seed=1)
    bare = tmp_path / "geometry.safetensors"
    shutil.copy(WEIGHTS, bare)
    exported = run_profile(bare, tmp_path / "tiny.ply", levels=4, repeat=1, warmup=0)
    shipped = run_profile(WEIGHTS.parent, tmp_path / "tiny.ply", levels=4, repeat=1, warmup=0)
    assert exported.total_bits == pytest.approx(shipped.total_bits, rel=1e-6)
    assert "export_s" in exported.setup_s


@needs_native
def test_float_clouds_are_rescaled_into_the_grid(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    write_ply(tmp_path / "f.ply", (rng.normal(size=(500, 3)) * 3.7 - 100).astype(np.float64))
    result = run_profile(WEIGHTS, tmp_path / "f.ply", levels=5, repeat=1, warmup=0)
    assert result.quantised_fit and 0 < result.voxels <= 500 and result.points == 500


@needs_native
def test_main_prints_and_writes_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny_cloud(tmp_path / "tiny.ply", seed=3)
    report = tmp_path / "r.json"
    args = ["--weights", str(WEIGHTS), "--input", str(tmp_path / "tiny.ply"), "--levels", "4"]
    assert main([*args, "--repeat", "2", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "neural bpp estimate" in out and "octree baseline" in out and "timed region" in out
    assert "xz -9e" in out and "order-0" in out and "draco" in out and "torch threads" in out
    data = json.loads(report.read_text())
    assert data["format"] == "lattice-geometry-profile" and data["version"] == 1
    assert data["runtime"] == "mlx" and data["levels"] == 4 and len(data["per_level"]) == 4
    assert len(data["timing"]["runs_s"]) == 2
    assert "PLY parsing" in data["timing"]["excluded"]
    assert data["neural_bits"] == pytest.approx(sum(lv["bits"] for lv in data["per_level"]))
    codec = data["codec"]
    assert codec["voxels"] == data["voxels"] and codec["bytes"] > 0 and data["torch_threads"] == 1
    assert codec["bits_per_voxel"] == pytest.approx(8 * codec["bytes"] / data["voxels"])
    assert codec["xz_bits_per_voxel"] > 0 and codec["decode_s"] >= 0


def test_bad_invocations_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny_cloud(tmp_path / "tiny.ply")
    ply = str(tmp_path / "tiny.ply")
    cases = [
        (["--weights", str(WEIGHTS), "--input", str(tmp_path / "none.ply")], "does not exist"),
        (["--weights", str(tmp_path / "w.safetensors"), "--input", ply], "do not exist"),
        (["--weights", str(tmp_path), "--input", ply], "without graph.mlir"),
        (["--weights", str(WEIGHTS), "--input", ply, "--levels", "0"], "levels"),
        (["--weights", str(WEIGHTS), "--input", ply, "--repeat", "0"], "repeat"),
        (["--weights", str(WEIGHTS), "--input", ply, "--warmup", "-1"], "warmup"),
    ]
    (tmp_path / "notply.ply").write_text("hello\n")
    cases.append((["--weights", str(WEIGHTS), "--input", str(tmp_path / "notply.ply")], "PLY"))
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err
    assert main(["--input", ply]) == 2  # argparse: --weights is required
    with pytest.raises(GeometryProfileError, match="runtime"):
        run_profile(WEIGHTS, ply, runtime="jax")


@needs_native
def test_gpu_request_without_a_gpu_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import mlx.core as mx

    if mx.is_available(mx.gpu):
        pytest.skip("this MLX has a GPU")
    tiny_cloud(tmp_path / "tiny.ply")
    argv = ["--weights", str(WEIGHTS), "--input", str(tmp_path / "tiny.ply"), "--device", "gpu"]
    assert main(argv) == 2
    assert "GPU" in capsys.readouterr().err
    mx.set_default_device(mx.cpu)

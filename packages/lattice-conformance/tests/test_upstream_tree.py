"""Replay of upstream's own fixture tree (mlx-lattice 0.6, ``../shared/upstream/fixtures``).

Upstream's numbers are an independent oracle: every case that uses only ops
shared with upstream must replay within its manifest tolerances on MLX and on
torch.  The tree is read where it lies (never copied into the repository); it
is migrated into a temporary directory first, as a user would.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from lattice_conformance.replay import main, replay_archive
from lattice_conformance.safe_extract import FixtureArchiveError
from lattice_conformance.upstream_tensors import read_tensors
from lattice_conformance.upstream_tree import is_upstream_tree
from safetensors.torch import load_file as load_torch
from safetensors.torch import save_file as save_torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_data import upstream_root

SHARED_OPS_CASES = (
    "sparse_classifier",
    "point_voxel",
    "quantized_classifier_int8",
    "transpose_convolution",
    "sparse_reindex",
)
"""The upstream cases that use only ops Lattice shares with upstream."""


def _upstream_fixtures() -> Path:
    return upstream_root() / "fixtures"


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Upstream's tree after ``lattice migrate`` (the command itself, in a subprocess)."""
    dst = tmp_path_factory.mktemp("upstream") / "fixtures"
    lattice = Path(sys.executable).with_name("lattice")
    subprocess.run([str(lattice), "migrate", str(_upstream_fixtures()), str(dst)], check=True)
    return dst


@pytest.mark.parametrize("runtime", ["mlx", "torch"])
def test_shared_op_cases_replay_within_upstream_tolerances(migrated: Path, runtime: str) -> None:
    result = replay_archive(migrated, runtime=runtime, coords="lattice-units")
    assert result.error is None, result.error
    cases = {c.name: c for c in result.cases}
    assert set(SHARED_OPS_CASES) <= set(cases)
    for name in SHARED_OPS_CASES:
        case = cases[name]
        assert case.passed, (name, case.reasons)
        for out in case.outputs:
            assert out.abs_error is not None and out.abs_error.max <= case.atol + 1e-12
            if out.coordinates is not None:
                assert out.coordinates.equal
    assert result.producer == {
        "tree_schema": "torch_lattice_e2e_fixtures/v1",
        "coords": "lattice-units",
    }


def test_lattice_unit_coordinates_need_the_flag_and_an_archive_of_the_tree_replays(
    migrated: Path, tmp_path: Path
) -> None:
    packed = tmp_path / "tree.tar.gz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(migrated, arcname="fixtures")
    assert is_upstream_tree(packed) and is_upstream_tree(migrated)
    plain = replay_archive(packed, runtime="mlx")
    reasons = {c.name: " ".join(c.reasons) for c in plain.cases}
    assert "--coords lattice-units" in reasons["pool_transpose"]  # stride-2 input at x = 1
    assert all(c.passed for c in plain.cases if c.name in SHARED_OPS_CASES)


def test_an_unmigrated_tree_is_refused_with_the_fix() -> None:
    result = replay_archive(_upstream_fixtures(), runtime="torch")
    assert result.cases and not any(c.passed for c in result.cases)
    assert all("lattice migrate" in " ".join(c.reasons) for c in result.cases)
    assert result.exit_code == 1


def test_cli_report_and_plot(
    migrated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, plot = tmp_path / "r.json", tmp_path / "e.png"
    code = main(
        [str(migrated), "--runtime", "torch", "--coords", "lattice-units",
         "--report", str(report), "--plot", str(plot)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "lattice units" in out and "sparse_reindex" in out
    payload = json.loads(report.read_text())
    assert payload["archive"]["producer"]["coords"] == "lattice-units"
    assert {c["name"] for c in payload["cases"] if c["passed"]} >= set(SHARED_OPS_CASES)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert code == (0 if payload["summary"]["all_passed"] else 1)


# ---------------------------------------------------------------------------
# What a case is checked against: the fixture's stored dtype, its active rows,
# tensors in any dtype upstream writes, a bounded manifest and archive sniffing.


def _tree_of(migrated: Path, tmp_path: Path, case: str) -> Path:
    """A copy of the migrated tree holding only ``case`` (so a test may edit its files)."""
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copytree(migrated / case, root / case)
    manifest = json.loads((migrated / "manifest.json").read_text())
    manifest["cases"] = [c for c in manifest["cases"] if c["name"] == case]
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def _edit_expected(
    root: Path, case: str, edit: Callable[[dict[str, torch.Tensor]], object]
) -> None:
    path = str(root / case / "expected.safetensors")
    tensors = load_torch(path)
    edit(tensors)
    save_torch(tensors, path)


def _only_case(root: Path) -> tuple[bool, str]:
    (case,) = replay_archive(root, runtime="mlx").cases
    return case.passed, " ".join(case.reasons)


@pytest.mark.parametrize(
    ("case", "key"), [("sparse_reindex", "output.features"), ("sparse_classifier", "output")]
)
@pytest.mark.parametrize(("dtype", "name"), [(torch.float16, "f16"), (torch.bfloat16, "bf16")])
def test_the_output_dtype_is_checked_against_the_fixtures(
    migrated: Path, tmp_path: Path, case: str, key: str, dtype: torch.dtype, name: str
) -> None:
    root = _tree_of(migrated, tmp_path, case)
    assert _only_case(root) == (True, "")

    def narrow(tensors: dict[str, torch.Tensor]) -> None:
        tensors[key] = tensors[key].to(dtype)

    _edit_expected(root, case, narrow)
    passed, reasons = _only_case(root)
    assert not passed
    assert f"dtype: expected {name}, got f32" in reasons  # bf16 is read, not "unreadable"
    assert "unreadable" not in reasons


def test_the_expected_active_rows_are_honoured(migrated: Path, tmp_path: Path) -> None:
    case = "sparse_reindex"
    root = _tree_of(migrated, tmp_path, case)

    def pad(tensors: dict[str, torch.Tensor]) -> None:  # capacity rows past `active`
        for key in ("output.coords", "output.features"):
            tensors[key] = torch.cat([tensors[key], tensors[key][:1] * 0 + 7])

    _edit_expected(root, case, pad)
    assert _only_case(root) == (True, "")  # rows past active are never read

    def fewer(tensors: dict[str, torch.Tensor]) -> None:
        tensors["output.active"] = torch.tensor([2], dtype=torch.int32)

    _edit_expected(root, case, fewer)
    passed, reasons = _only_case(root)
    assert not passed and "coordinates:" in reasons and "unexpected rows" in reasons

    def too_many(tensors: dict[str, torch.Tensor]) -> None:
        tensors["output.active"] = torch.tensor([9], dtype=torch.int32)

    _edit_expected(root, case, too_many)
    passed, reasons = _only_case(root)
    assert not passed and "output.active is [9]" in reasons and "between 0 and the 4" in reasons

    _edit_expected(root, case, lambda tensors: tensors.pop("output.active"))
    passed, reasons = _only_case(root)
    assert not passed and "lacks output.active" in reasons


def test_bf16_tensors_are_widened_exactly_on_the_bits(tmp_path: Path) -> None:
    special = [0.0, -0.0, 1.0, -2.5, 3.0e38, -3.0e38, 1.0e-40, float("inf"), float("-inf")]
    noise = torch.randn(991, generator=torch.Generator().manual_seed(3)).tolist()
    values = torch.tensor([*special, *noise]).to(torch.bfloat16)
    path = tmp_path / "t.safetensors"
    save_torch({"b": values.reshape(10, 100), "i": torch.arange(6, dtype=torch.int32)}, str(path))
    read = read_tensors(path)
    assert read.dtypes == {"b": "bf16", "i": "i32"}
    assert read.arrays["b"].dtype == np.float32 and read.arrays["b"].shape == (10, 100)
    want = values.float().reshape(10, 100).numpy()  # torch's own widening is the oracle
    np.testing.assert_array_equal(read.arrays["b"].view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(read.arrays["i"], np.arange(6))
    save_torch({"f8": torch.zeros(4, dtype=torch.float8_e4m3fn)}, str(path))
    with pytest.raises(FixtureArchiveError, match=r"entry 'f8' has dtype F8_E4M3"):
        read_tensors(path)
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    with pytest.raises(FixtureArchiveError, match="not a readable safetensors file"):
        read_tensors(path)


def test_an_oversized_manifest_is_refused_not_truncated(migrated: Path, tmp_path: Path) -> None:
    root = _tree_of(migrated, tmp_path, "sparse_reindex")
    manifest = root / "manifest.json"
    manifest.write_text(manifest.read_text() + " " * (1 << 20))
    assert is_upstream_tree(root)
    result = replay_archive(root, runtime="mlx")
    assert result.error is not None and "refused, not truncated" in result.error
    assert result.exit_code == 2


def test_sniffing_an_archive_is_bounded(migrated: Path, tmp_path: Path) -> None:
    """A gzip bomb in a tree archive is refused at its header, before or behind the manifest."""
    size = 64 << 20

    class Zeros(io.RawIOBase):
        def __init__(self) -> None:
            self.left = size

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            n = min(len(buffer), self.left)
            buffer[:n] = bytes(n)
            self.left -= n
            return n

    def pack(path: Path, bomb_first: bool) -> Path:
        with tarfile.open(path, "w:gz", compresslevel=1) as tar:
            if not bomb_first:
                tar.add(migrated / "manifest.json", arcname="fixtures/manifest.json")
            info = tarfile.TarInfo("fixtures/a.bin")
            info.size = size
            tar.addfile(info, io.BufferedReader(Zeros()))
            if bomb_first:
                tar.add(migrated / "manifest.json", arcname="fixtures/manifest.json")
        assert path.stat().st_size * 200 < size
        return path

    first = pack(tmp_path / "bomb.tar.gz", bomb_first=True)
    started = time.perf_counter()
    assert not is_upstream_tree(first)
    assert time.perf_counter() - started < 0.5  # the 64 MiB were not inflated to get here
    result = replay_archive(first, runtime="mlx")  # refused by the archive reader, no crash
    assert result.error is not None and result.exit_code == 2
    # Behind the manifest the archive is a tree; its headers are checked before extraction.
    behind = pack(tmp_path / "late.tar.gz", bomb_first=False)
    assert is_upstream_tree(behind)
    result = replay_archive(behind, runtime="mlx")
    assert result.error is not None and "over the caps" in result.error, result.error
    assert "a.bin" in result.error and result.exit_code == 2


def _edit_inputs(root: Path, case: str, edit: Callable[[dict[str, torch.Tensor]], None]) -> None:
    path = str(root / case / "inputs.safetensors")
    tensors = load_torch(path)
    edit(tensors)
    save_torch(tensors, path)


def test_inputs_must_hold_the_declared_dtype(migrated: Path, tmp_path: Path) -> None:
    case = "sparse_classifier"
    root = _tree_of(migrated, tmp_path, case)

    def to_half(tensors: dict[str, torch.Tensor]) -> None:
        tensors["x_features"] = tensors["x_features"].half()

    _edit_inputs(root, case, to_half)
    passed, reasons = _only_case(root)
    assert not passed
    assert "input 'x_features' is stored as f16 but the graph declares f32" in reasons


def test_lattice_unit_coordinates_that_leave_int32_are_refused(
    migrated: Path, tmp_path: Path
) -> None:
    case = "pool_transpose"  # a stride (2, 1, 1) source stored in lattice units
    root = _tree_of(migrated, tmp_path, case)

    def far(tensors: dict[str, torch.Tensor]) -> None:
        tensors["source_coords"][0, 1] = 2**31 - 1  # times 2 wrapped to -2 before

    _edit_inputs(root, case, far)
    (result,) = replay_archive(root, runtime="mlx", coords="lattice-units").cases
    reasons = " ".join(result.reasons)
    assert not result.passed
    assert (
        "input 'source_coords': coordinates times the stride (2, 1, 1) leave the int32" in reasons
    )

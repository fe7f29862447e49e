"""mlx-lattice 0.6 fixture case directories and CLI spellings, as its users have them.

A fixture case is an artifact plus ``inputs.safetensors`` and
``expected.safetensors``; after the one-time ``lattice migrate`` of its graph,
``load_lattice_program(case_dir)`` must load it as it lies (the two data
files are not weights) and reproduce upstream's expected output.  The data is
read from ``../shared/upstream`` (a missing directory fails).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from lattice_conformance.geometry import main as geometry_main
from lattice_tools.migrate import migrate_graph
from mlx_lattice.artifact import load_lattice_program
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_data import upstream_root

# Subcommands are called here without the command entry that sets up logging.
pytestmark = pytest.mark.usefixtures("command_logging")


def _case(tmp_path: Path, name: str) -> tuple[Path, dict[str, float]]:
    fixtures = upstream_root() / "fixtures"
    manifest = json.loads((fixtures / "manifest.json").read_text(encoding="utf-8"))
    case = {c["name"]: c for c in manifest["cases"]}[name]
    target = tmp_path / name
    shutil.copytree(fixtures / name, target)
    graph = target / "graph.mlir"
    graph.write_text(migrate_graph(graph.read_text(encoding="utf-8")).text, encoding="utf-8")
    return target, {"rtol": float(case["rtol"]), "atol": float(case["atol"])}


@pytest.mark.parametrize("name", ["sparse_classifier", "quantized_classifier_int8"])
def test_a_migrated_fixture_case_directory_loads_as_it_lies(tmp_path: Path, name: str) -> None:
    case_dir, tol = _case(tmp_path, name)
    assert (case_dir / "inputs.safetensors").is_file()
    assert (case_dir / "expected.safetensors").is_file()
    program = load_lattice_program(case_dir)
    inputs = {k: mx.array(v) for k, v in load_file(str(case_dir / "inputs.safetensors")).items()}
    out = program(**inputs)
    expected = load_file(str(case_dir / "expected.safetensors"))["output"]
    np.testing.assert_allclose(np.asarray(out), expected, rtol=tol["rtol"], atol=tol["atol"])


def test_other_weight_files_beside_the_bundle_are_still_refused(tmp_path: Path) -> None:
    case_dir, _ = _case(tmp_path, "sparse_classifier")
    shutil.copy(case_dir / "inputs.safetensors", case_dir / "extra.safetensors")
    with pytest.raises(Exception, match=r"extra\.safetensors.*weights\.safetensors"):
        load_lattice_program(case_dir)


def test_geometry_profile_takes_device_metal() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = geometry_main(
            [
                "--weights",
                "/nonexistent/w.safetensors",
                "--input",
                "/nonexistent/x.ply",
                "--device",
                "metal",
            ]
        )
    assert code == 2
    if mx.metal.is_available():  # Apple silicon: metal is accepted and the input is read next
        assert "metal" not in err.getvalue()
    else:
        assert "--device metal needs MLX's Metal backend" in err.getvalue()
        assert "use --device cpu" in err.getvalue()

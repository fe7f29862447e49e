"""Built wheels work without a checkout: ``lattice demo``, ``lattice view``, ``conformance replay``.

The six distributions (the native one included) are built into a wheel
directory, then installed into a brand-new virtual environment with
``--no-index``, so every project package must come from those wheels and
every other requirement from a local wheel cache: pip cannot reach for a
same-named package on an index (the name collision this release fixes).
The commands then run from a temporary directory outside the repository,
with ``PYTHONPATH`` cleared, and each imported package must live in the new
environment.

Cost is kept down for CI: the pure-Python wheels build without isolation,
the native build reuses the editable install's CMake build directory, the
dependency wheels are fetched once into ``.venv/.wheel-test-deps`` (pip's
cache makes later fetches cheap) with torch pinned to the version installed
here (the machine's local CPU wheel), installs skip byte-compilation, and
the demo runs on a small scene.  The test takes a few minutes; deselect it
locally with ``-m "not wheels"``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]
PACKAGES = REPO / "packages"
PURE = ("lattice-contract", "mlx-lattice", "torch-lattice", "lattice-conformance", "lattice-tools")
VERSION = tomllib.loads((PACKAGES / "lattice-contract" / "pyproject.toml").read_text())["project"][
    "version"
]

pytestmark = pytest.mark.wheels


def _run(
    cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600
) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout + done.stderr


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    pip = [sys.executable, "-m", "pip"]
    _run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
        + [str(PACKAGES / p) for p in PURE],
        cwd=REPO,
    )
    llvm = shutil.which("llvm-config-19")
    if llvm is None:
        pytest.fail("llvm-config-19 is missing: the native wheel needs Debian's llvm-19-dev")
    prefix = subprocess.run([llvm, "--prefix"], capture_output=True, text=True, check=True)
    env = dict(os.environ, CMAKE_PREFIX_PATH=prefix.stdout.strip())
    _run(
        [*pip, "wheel", "-q", "--no-deps", "-w", str(out), str(PACKAGES / "lattice-mlir")],
        cwd=REPO,
        env=env,
        timeout=900,
    )
    built = sorted(p.name for p in out.glob("*.whl"))
    assert len(built) == 6 and all(n.startswith("latticekit_") for n in built), built
    return out


@pytest.fixture(scope="module")
def fresh_venv(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    deps = REPO / ".venv" / ".wheel-test-deps"
    deps.mkdir(parents=True, exist_ok=True)
    constraints = tmp_path_factory.mktemp("constraints") / "c.txt"
    constraints.write_text(f"torch=={torch.__version__}\n")  # the local CPU wheel, never CUDA
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "-d",
            str(deps),
            "-c",
            str(constraints),
            "--find-links",
            str(wheels),
            f"latticekit-tools=={VERSION}",
        ],
        cwd=REPO,
    )
    for stale in deps.glob("latticekit_*.whl"):  # project wheels come from this build only
        stale.unlink()
    venv = tmp_path_factory.mktemp("venv") / "v"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent)
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-compile",
            "--find-links",
            str(wheels),
            "--find-links",
            str(deps),
            f"latticekit-tools=={VERSION}",
        ],
        cwd=venv.parent,
        env=_clean_env(venv),
        timeout=900,
    )
    return venv


def test_installed_packages_are_ours_and_come_from_the_venv(fresh_venv: Path) -> None:
    py = str(fresh_venv / "bin" / "python")
    env = _clean_env(fresh_venv)
    _run([py, "-m", "pip", "check"], cwd=fresh_venv, env=env)
    listed = _run([py, "-m", "pip", "list", "--format=freeze"], cwd=fresh_venv, env=env)
    names = {line.split("==")[0].lower() for line in listed.splitlines() if "==" in line}
    ours = ("contract", "mlir", "mlx", "torch", "conformance", "tools")
    assert {f"latticekit-{p}" for p in ours} <= names
    assert not names & {"mlx-lattice", "torch-lattice", "lattice-contract", "lattice-mlir"}
    code = (
        "import importlib\n"
        "for n in ('lattice_contract', 'lattice_mlir', 'mlx_lattice', 'torch_lattice',\n"
        "          'lattice_conformance', 'lattice_tools'):\n"
        "    m = importlib.import_module(n)\n"
        "    print(n, m.__version__, m.__file__)\n"
    )
    out = _run([py, "-c", code], cwd=fresh_venv, env=env)
    for line in out.splitlines():
        _name, version, where = line.split()
        assert version == VERSION, line
        assert where.startswith(str(fresh_venv)) and str(REPO) not in where, line
    assert (
        _run(
            [str(fresh_venv / "bin" / "lattice"), "--version"], cwd=fresh_venv, env=env
        ).splitlines()[0]
        == f"lattice {VERSION}"
    )


def test_demo_view_and_replay_run_from_the_wheels(
    fresh_venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    work = tmp_path_factory.mktemp("elsewhere")  # no checkout here
    env = _clean_env(fresh_venv)
    bin_ = fresh_venv / "bin"
    demo = _run(
        [
            str(bin_ / "lattice"),
            "demo",
            "--out",
            str(work / "demo"),
            "--voxels",
            "1500",
            "--no-fixtures",
        ],
        cwd=work,
        env=env,
    )
    assert "RESULT: PASS" in demo and (work / "demo" / "demo.png").stat().st_size > 50_000
    where = "from lattice_conformance import segmentation as s; "
    where += "print(s.fixture_path('minkunet', 'int8'))"
    archive = _run([str(bin_ / "python"), "-c", where], cwd=work, env=env).strip()
    assert archive.startswith(str(fresh_venv))
    replay = _run(
        [
            str(bin_ / "conformance"),
            "replay",
            archive,
            "--report",
            str(work / "r.json"),
            "--plot",
            str(work / "replay.png"),
        ],
        cwd=work,
        env=env,
    )
    assert "4/4 cases passed" in replay and (work / "replay.png").is_file()
    view = _run(
        [str(bin_ / "lattice"), "view", archive, "--html", str(work / "g.html")], cwd=work, env=env
    )
    assert "ops" in view and "dagre" in (work / "g.html").read_text()

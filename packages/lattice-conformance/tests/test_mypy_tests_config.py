"""``mypy-tests.ini``, the type check of test code that ``./dev test`` runs.

The configuration is lenient about annotations on purpose, so these tests pin
down what it must still catch in a test file (a misspelt keyword of a typed
builder method inside an unannotated test function, a stale
``# type: ignore``), and that its per-module sections only ever name
test-side modules that exist, never the shipped packages.
"""

from __future__ import annotations

import configparser
import textwrap
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "mypy-tests.ini"
SHIPPED = (
    "lattice_contract",
    "lattice_mlir",
    "mlx_lattice",
    "torch_lattice",
    "lattice_conformance",
)


def _module_sections() -> dict[str, list[str]]:
    parser = configparser.ConfigParser()
    parser.read(CONFIG, encoding="utf-8")
    return {
        section: [name.strip() for name in section.removeprefix("mypy-").split(",")]
        for section in parser.sections()
        if section.startswith("mypy-")
    }


def test_an_unannotated_test_body_is_checked_against_the_packages(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        textwrap.dedent(
            """\
            from lattice_contract.builder.module import MLIRModuleBuilder


            def test_conv():
                b = MLIRModuleBuilder()
                x = b.add_sparse_input("x", channels=4, dtype="f32")
                w = b.weight(
                    storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(4, 3, 3, 3, 4)
                )
                b.subm_conv3d(input=x, weight=w, kernel_sise=3)
                b.subm_conv3d(input=x, weight=w, kernel_size=3, stride=2)  # type: ignore[arg-type]
                b.subm_conv3d(input=x, weight=w, kernel_size=3)  # type: ignore[arg-type]
            """
        ),
        encoding="utf-8",
    )
    out, err, status = api.run(
        ["--config-file", str(CONFIG), "--cache-dir", str(tmp_path / "cache"), str(probe)]
    )
    errors = [line.removeprefix(f"{probe}:") for line in out.splitlines() if ": error:" in line]
    assert status == 1, out + err
    # Line 10: the misspelt keyword (and so the missing one); line 11 is a
    # deliberate, used ignore; line 12's ignore covers nothing and is reported.
    assert [line.split(":", 1)[0] for line in errors] == ["10", "10", "12"], out + err
    assert 'Missing named argument "kernel_size"' in errors[0], out + err
    assert 'Argument "kernel_sise"' in errors[1], out + err
    assert 'Unused "type: ignore"' in errors[2], out + err


def test_module_sections_name_only_existing_test_modules() -> None:
    sections = _module_sections()
    test_side = {
        path.stem
        for pattern in ("packages/*/tests/*.py", "examples/**/*.py", "benchmarks/*.py")
        for path in ROOT.glob(pattern)
    }
    for section, names in sections.items():
        for name in names:
            assert not name.startswith(SHIPPED), f"[{section}] relaxes shipped code: {name}"
            assert name in test_side, f"[{section}] names {name!r}, which is no test-side module"

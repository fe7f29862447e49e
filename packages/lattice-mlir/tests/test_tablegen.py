"""lattice_contract.codegen.tablegen: the generator of the C++ dialect's TableGen.

Checks that the generated text covers every schema element, that the module
runs with nothing but the contract's ``src/`` on the path (as the CMake build
runs it), that it only rewrites changed files, and that ``mlir-tblgen``
accepts the output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lattice_contract.codegen.tablegen as tablegen
import pytest
from lattice_contract import SCHEMA, SCHEMA_DIGEST
from lattice_contract.dialect import AttrKind

CONTRACT_SRC = Path(tablegen.__file__).resolve().parents[2]


def test_td_declares_every_op_enum_and_type() -> None:
    td = tablegen.render_td()
    for op in SCHEMA.ops.values():
        block = td.split(f'Lattice_Op<"{op.name}"', 1)[1].split("\n}\n", 1)[0]
        for operand in op.operands:
            assert f":${operand.name}" in block, (op.name, operand.name)
        for result in op.results:
            assert f":${result.name}" in block, (op.name, result.name)
        for attr in op.attributes:
            assert f":${attr.name}" in block, (op.name, attr.name)
            if not attr.spec.required:
                assert "OptionalAttr<" in block
        assert tablegen.assembly_format(op) in block
    for enum in SCHEMA.enums:
        assert f'"{enum.__mnemonic__}">' in td
        for member in enum:
            assert f'"{member.value}">' in td
    for t in SCHEMA.types:
        assert f'let mnemonic = "{t.mnemonic}";' in td


def test_assembly_formats_follow_structure() -> None:
    formats = {op.name: tablegen.assembly_format(op) for op in SCHEMA.ops.values()}
    symbol_ops = [
        op.name
        for op in SCHEMA.ops.values()
        if any(a.spec.kind is AttrKind.symbol for a in op.attributes)
    ]
    assert symbol_ops == ["weight"]
    assert formats["weight"].startswith("$sym_name attr-dict `:` qualified(type($result))")
    assert "`->` `(`" in formats["sparse.decompose"]
    generic = "operands attr-dict `:` functional-type(operands, results)"
    assert sum(f == generic for f in formats.values()) == len(formats) - 2


def test_header_carries_digest_and_primitives() -> None:
    header = tablegen.render_header()
    assert f'kSchemaDigest[] = "{SCHEMA_DIGEST}"' in header
    cpp = tablegen.render_cpp()
    for name, prim in SCHEMA.primitives.items():
        assert f'"{name}"' in cpp
        assert ", ".join(f'"{t}"' for t in prim.inputs) in cpp
    assert "conv3d_o_zyx_i" in cpp  # the rejected legacy layout carries its fix


def test_cli_runs_from_src_alone_and_is_idempotent(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(CONTRACT_SRC)}
    cmd = [
        sys.executable,
        "-I",
        "-c",
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from lattice_contract.codegen.tablegen import main; sys.exit(main(sys.argv[2:]))",
        str(CONTRACT_SRC),
        "--out-dir",
        str(tmp_path),
    ]
    subprocess.run(cmd, check=True, env=env, timeout=120)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["LatticeDialect.td", "LatticeSchema.cpp.inc", "LatticeSchema.h"]
    assert (tmp_path / "LatticeDialect.td").read_text() == tablegen.render_td()
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert tablegen.write_all(tmp_path) == []  # unchanged content: nothing rewritten
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps
    run = subprocess.run(
        [sys.executable, "-m", "lattice_contract.codegen.tablegen", "--print-digest"],
        env={**env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert run.stdout.strip() == SCHEMA_DIGEST


def _mlir_tblgen() -> str:
    for name in ("mlir-tblgen-19", "mlir-tblgen"):
        found = shutil.which(name) or shutil.which(name, path="/usr/lib/llvm-19/bin")
        if found:
            return found
    pytest.fail("mlir-tblgen-19 is required (Debian package mlir-19-tools)")


@pytest.mark.parametrize(
    "backend",
    ["-gen-op-decls", "-gen-attrdef-decls -attrdefs-dialect=lattice", "-gen-enum-decls"],
)
def test_mlir_tblgen_accepts_generated_td(tmp_path: Path, backend: str) -> None:
    tablegen.write_all(tmp_path)
    include = "/usr/lib/llvm-19/include"
    run = subprocess.run(
        [_mlir_tblgen(), *backend.split(), "-I", include, str(tmp_path / "LatticeDialect.td")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    if backend == "-gen-op-decls":
        classes = set(re.findall(r"^class (\w+Op) :", run.stdout, re.M))
        assert classes == {tablegen.op_cpp_name(op) for op in SCHEMA.ops.values()}

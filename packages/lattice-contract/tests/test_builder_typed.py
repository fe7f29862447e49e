"""The builder's typed op methods: generated from the schema, checked in, checked by mypy."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from lattice_contract import SCHEMA
from lattice_contract.builder import BuilderError, GeneratedOps, MLIRModuleBuilder
from lattice_contract.codegen.builder_methods import TARGET, render_methods
from lattice_contract.testing import flagged_lines


def test_regenerating_the_methods_gives_the_checked_in_text():
    assert TARGET.read_text(encoding="utf-8") == render_methods(), (
        "builder_methods.py is stale: run python -m lattice_contract.codegen.builder_methods"
    )


def test_every_op_has_a_typed_method_with_its_schema_keywords():
    for op in SCHEMA.ops.values():
        method = vars(GeneratedOps)[op.python_name]
        params = inspect.signature(method).parameters
        for name in [o.name for o in op.operands] + [a.name for a in op.attributes]:
            assert name in params, (op.name, name)
        annotation = str(inspect.signature(method).return_annotation)
        assert annotation.count("Value") == len(op.results), (op.name, annotation)


def test_a_misspelt_keyword_still_gets_the_builders_suggestion_at_run_time():
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(4, 3, 3, 3, 4))
    with pytest.raises(BuilderError, match=r"unexpected keyword 'kernel_sise' \(did you mean"):
        b.conv3d(input=x, weight=w, kernel_size=3, kernel_sise=3)  # type: ignore[arg-type]


def test_mypy_flags_a_misspelt_keyword(tmp_path: Path):
    flagged, report = flagged_lines(
        tmp_path,
        "from lattice_contract.builder.module import MLIRModuleBuilder\n"
        "b = MLIRModuleBuilder()\n"
        "x = b.add_sparse_input('x', channels=4, dtype='f32')\n"
        "w = b.weight(storage_key='w', layout='conv3d_o_xyz_i', dtype='f32',"
        " shape=(4, 3, 3, 3, 4))\n"
        "y = b.conv3d(input=x, weight=w, kernel_size=3, kernel_sise=3)\n"
        "z = b.conv3d(input=x, weight=w, kernel_size=3)\n"
        "coords, features, active = b.sparse_decompose(input=z)\n"
        "b.add_output('y', b.softmax(input=features))\n",
    )
    assert flagged == {5}, report  # only the misspelt line
    assert any("kernel_sise" in line for line in report.splitlines() if ": error:" in line), report

"""Both runtimes' ``artifact`` packages publish one API: the names the contract declares.

``lattice_contract.runtime.artifact_runtime.ARTIFACT_NAMES`` (and ``ARTIFACT_IO_NAMES``
for the ``io`` modules) lists what every runtime exports; each package adds
only its declared ``EXTRA_NAMES``.  The errors and plan records are the
contract's own classes on both, so one ``except`` clause serves both.
"""

from __future__ import annotations

from typing import Any

import mlx_lattice.artifact as mart
import mlx_lattice.artifact.io as mio
import mlx_lattice.artifact.runtime as mprogram
import mlx_lattice.artifact.validation as mverify
import pytest
import torch_lattice.artifact as tart
import torch_lattice.artifact.io as tio
import torch_lattice.artifact.runtime as tverify
from lattice_contract.runtime import (
    ARTIFACT_IO_NAMES,
    ARTIFACT_NAMES,
    ARTIFACT_PROGRAM_NAMES,
    ARTIFACT_VERIFY_NAMES,
)


@pytest.mark.parametrize("package", [mart, tart], ids=["mlx", "torch"])
def test_artifact_package_exports_the_declared_names(package: Any) -> None:
    extras = tuple(package.EXTRA_NAMES)
    assert sorted(package.__all__) == sorted((*ARTIFACT_NAMES, *extras))
    for name in (*ARTIFACT_NAMES, *extras):
        assert getattr(package, name) is not None, name


MODULES = {
    "mlx-io": (mio, ARTIFACT_IO_NAMES),
    "torch-io": (tio, ARTIFACT_IO_NAMES),
    "mlx-verify": (mverify, ARTIFACT_VERIFY_NAMES),
    "torch-verify": (tverify, ARTIFACT_VERIFY_NAMES),
    "mlx-program": (mprogram, ARTIFACT_PROGRAM_NAMES),
    "torch-program": (tverify, ARTIFACT_PROGRAM_NAMES),
}


@pytest.mark.parametrize("which", sorted(MODULES))
def test_submodules_export_the_declared_names(which: str) -> None:
    module, names = MODULES[which]
    exported = set(module.__all__)
    assert set(names) <= exported
    assert all(hasattr(module, name) for name in exported)


def test_errors_and_plan_records_are_one_class_on_both() -> None:
    shared = [
        name
        for name in ARTIFACT_NAMES
        if isinstance(getattr(mart, name), type)
        and getattr(mart, name).__module__.startswith("lattice_contract.")
    ]
    assert {"BundleError", "LatticeValidationError", "PlanError", "ProgramCallError"} <= set(shared)
    for name in shared:
        assert getattr(mart, name) is getattr(tart, name), name
    # Distinct classes by their types already (mypy calls the check always true);
    # asserted at run time too, and the ignore goes stale if the types ever merge.
    assert mart.LatticeArtifact is not tart.LatticeArtifact  # type: ignore[comparison-overlap]

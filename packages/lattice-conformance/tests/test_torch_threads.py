"""The shipped fixtures replay bitwise-identically on torch CPU at 1 and 2 threads.

(Two cases per archive; all 16 cases of the four archives were checked, at
16 threads too, when the reductions were changed.)

Before the conv reductions were made thread-count independent, 0.6-3.4 % of
the output features of every shipped fixture differed between 1 and 2
threads (by up to 0.0078 in f16).  Coordinates always matched; now every
output array must be equal bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch
from lattice_conformance.archive import SparseArrays, open_fixture_archive
from lattice_conformance.runners import make_runner

ARCHIVES = sorted(
    Path(str(resources.files("lattice_conformance") / "data")).glob("*.tar.gz"),
    key=lambda p: p.name,
)


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_every_shipped_archive_is_tested() -> None:
    assert len(ARCHIVES) >= 4


@pytest.mark.parametrize("archive", ARCHIVES, ids=[p.name for p in ARCHIVES])
def test_fixture_outputs_are_bitwise_equal_at_1_and_2_threads(archive: Path) -> None:
    with open_fixture_archive(archive) as fixtures:
        runner = make_runner("torch", fixtures.artifact_dir, "cpu")
        cases = list(fixtures.iter_cases())[:2]  # two per archive keeps CI time modest
        outputs: dict[int, list[np.ndarray]] = {}
        for threads in (1, 2):
            torch.set_num_threads(threads)
            arrays = []
            for spec, case in cases:
                run = runner.run(
                    [case.inputs[n] for n in spec.input_names],
                    [spec.input_dtypes[n] for n in spec.input_names],
                )
                for out in run.outputs:
                    value = out.value
                    if isinstance(value, SparseArrays):
                        arrays += [value.coords, value.features]
                    else:
                        arrays.append(value)
            outputs[threads] = arrays
    assert len(outputs[1]) == len(outputs[2]) > 0
    for a, b in zip(outputs[1], outputs[2], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes(), f"{archive.name}: outputs differ between 1 and 2 threads"

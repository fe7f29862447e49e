"""The shipped geometry-block fixture archive replays on MLX and torch with exact coordinates.

The archive is written by ``examples/geometry_block/build.py`` (a block of
normalised subm convs, a pool, and four decoders onto the input's rows:
target normalised transpose, generative transpose + reindex,
pool_transpose3d, trilinear_upsample3d, then cat).  Replay compares
coordinates exactly after canonical ordering and features within the
archive's tolerances; the graph must use the ops it was built to exercise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lattice_conformance.replay import replay_archive

ARCHIVE = (
    Path(__file__).resolve().parents[1] / "src" / "lattice_conformance" / "data"
) / "geometry-block.tar.gz"

OPS = {
    "lattice.normalized_subm_conv3d",
    "lattice.pool3d",
    "lattice.target_normalized_conv_transpose3d",
    "lattice.normalized_generative_conv_transpose3d",
    "lattice.sparse.reindex",
    "lattice.pool_transpose3d",
    "lattice.trilinear_upsample3d",
    "lattice.sparse.cat",
}


@pytest.mark.parametrize("runtime", ["mlx", "torch"])
def test_geometry_block_archive_replays(runtime: str) -> None:
    assert ARCHIVE.is_file(), f"{ARCHIVE} is missing; run examples/geometry_block/build.py"
    result = replay_archive(ARCHIVE, runtime=runtime, progress=False)
    assert result.error is None, result.error
    assert result.cases and all(case.passed for case in result.cases), [
        (case.name, case.reasons) for case in result.cases if not case.passed
    ]
    assert set(result.op_counts) >= OPS, sorted(OPS - set(result.op_counts))

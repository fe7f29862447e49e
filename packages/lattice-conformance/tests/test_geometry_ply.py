"""PLY point clouds: ASCII and binary round trips, foreign properties, refused files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from lattice_conformance.ply import Encoding, PlyFormatError, read_ply, write_ply
from plyfile import PlyData, PlyElement


@pytest.mark.parametrize("encoding", ["ascii", "binary_little_endian", "binary_big_endian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.int16])
def test_round_trip(tmp_path: Path, encoding: Encoding, dtype: type[np.generic]) -> None:
    rng = np.random.default_rng(0)
    points = (rng.random((37, 3)) * 100).astype(dtype)
    path = tmp_path / "cloud.ply"
    write_ply(path, points, encoding=encoding)
    header = path.read_bytes()[:60].decode("ascii", errors="replace")
    assert f"format {encoding} 1.0" in header
    back = read_ply(path)
    assert back.dtype == np.float64 and back.shape == (37, 3)
    assert np.array_equal(back, points.astype(np.float64))
    assert not list(tmp_path.glob(".*.tmp"))


def test_extra_properties_and_elements_are_ignored(tmp_path: Path) -> None:
    vertex = np.array(
        [(1.5, 2.0, -3.0, 255, 0.1), (4.0, 5.0, 6.25, 7, 0.2)],
        dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("red", "u1"), ("nx", "<f4")],
    )
    face = np.array([([0, 1, 1],)], dtype=[("vertex_indices", "i4", (3,))])
    PlyData([PlyElement.describe(vertex, "vertex"), PlyElement.describe(face, "face")]).write(
        str(tmp_path / "mesh.ply")
    )
    assert read_ply(tmp_path / "mesh.ply").tolist() == [[1.5, 2.0, -3.0], [4.0, 5.0, 6.25]]


def test_empty_cloud(tmp_path: Path) -> None:
    write_ply(tmp_path / "empty.ply", np.zeros((0, 3), dtype=np.float32))
    assert read_ply(tmp_path / "empty.ply").shape == (0, 3)


def test_refused_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_ply(tmp_path / "missing.ply")
    (tmp_path / "text.ply").write_text("not a ply file\n")
    with pytest.raises(PlyFormatError, match="not a readable PLY"):
        read_ply(tmp_path / "text.ply")
    truncated = tmp_path / "truncated.ply"
    write_ply(truncated, np.ones((50, 3), dtype=np.float32))
    truncated.write_bytes(truncated.read_bytes()[:-20])
    with pytest.raises(PlyFormatError, match="not a readable PLY"):
        read_ply(truncated)
    only_faces = np.array([([0, 1, 2],)], dtype=[("vertex_indices", "i4", (3,))])
    PlyData([PlyElement.describe(only_faces, "face")]).write(str(tmp_path / "faces.ply"))
    with pytest.raises(PlyFormatError, match="no 'vertex' element"):
        read_ply(tmp_path / "faces.ply")
    flat = np.array([(1.0, 2.0)], dtype=[("x", "<f4"), ("y", "<f4")])
    PlyData([PlyElement.describe(flat, "vertex")]).write(str(tmp_path / "flat.ply"))
    with pytest.raises(PlyFormatError, match="lacks z"):
        read_ply(tmp_path / "flat.ply")


def test_writer_refuses_bad_points_and_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\(P, 3\)"):
        write_ply(tmp_path / "a.ply", np.zeros((4, 2)))
    with pytest.raises(TypeError, match="integer or float"):
        write_ply(tmp_path / "a.ply", np.zeros((4, 3), dtype=bool))
    with pytest.raises(OSError):
        write_ply(tmp_path / "missing-dir" / "a.ply", np.zeros((4, 3)))
    assert list(tmp_path.iterdir()) == []

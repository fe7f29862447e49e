"""Point-cloud readers against files written independently of them.

PLY files are written here byte by byte with ``struct`` (ASCII, binary
little- and big-endian, with colours and a face element); this is the
project's one PLY reader (``lattice_conformance.ply`` reads positions through
it, and its tests feed it files that ``plyfile`` wrote); ``.npy`` files are written by
NumPy; SemanticKITTI scans by ``ndarray.tofile`` and read back by
``np.fromfile``, so neither side of a round trip is only our own code.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_lattice.data import (
    SemanticKITTIScans,
    VoxelizedDataset,
    read_npy,
    read_ply,
    read_point_cloud,
    read_semantic_kitti,
    semantic_kitti_paths,
    sparse_collate,
    write_semantic_kitti,
)

XYZ = np.array([[0.5, -1.25, 3.0], [2.0, 4.5, -0.75], [1e-3, 7.0, 1e3]], dtype=np.float32)
RGB = np.array([[255, 0, 10], [1, 128, 200], [7, 8, 9]], dtype=np.uint8)
LABEL = np.array([3, 65535, 0], dtype=np.uint16)


def _write_ply(path: Path, fmt: str) -> None:
    header = [
        "ply",
        f"format {fmt} 1.0",
        "comment written by the test",
        "element vertex 3",
        "property float x",
        "property float y",
        "property float z",
        "property uchar red",
        "property uchar green",
        "property uchar blue",
        "property ushort label",
        "element face 1",
        "property list uchar int vertex_indices",
        "end_header",
    ]
    out = ("\n".join(header) + "\n").encode()
    if fmt == "ascii":
        rows = [
            " ".join([*(repr(float(v)) for v in XYZ[i]), *map(str, RGB[i]), str(LABEL[i])])
            for i in range(3)
        ]
        out += ("\n".join([*rows, "3 0 1 2"]) + "\n").encode()
    else:
        end = "<" if fmt == "binary_little_endian" else ">"
        for i in range(3):
            out += struct.pack(f"{end}3f3BH", *XYZ[i].tolist(), *RGB[i].tolist(), int(LABEL[i]))
        out += struct.pack(f"{end}B3i", 3, 0, 1, 2)
    path.write_bytes(out)


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian", "binary_big_endian"])
def test_ply_vertex_properties(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "cloud.ply"
    _write_ply(path, fmt)
    props = read_ply(path)
    assert list(props) == ["x", "y", "z", "red", "green", "blue", "label"]
    got = torch.stack([props[a] for a in "xyz"], 1)
    assert got.dtype == torch.float32 and np.array_equal(got.numpy(), XYZ)
    assert props["red"].dtype == torch.uint8
    assert props["label"].tolist() == LABEL.tolist()  # unsigned 16-bit kept exact
    cloud = read_point_cloud(path)
    assert np.array_equal(cloud.points.numpy(), XYZ)
    assert cloud.labels is not None and cloud.labels.tolist() == LABEL.tolist()
    assert cloud.features is not None and cloud.features.tolist() == RGB.astype(float).tolist()


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian", "binary_big_endian"])
def test_ply_with_no_vertices_reads_as_empty_columns(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "empty.ply"
    header = f"ply\nformat {fmt} 1.0\nelement vertex 0\nproperty float x\nproperty float y\n"
    path.write_bytes((header + "property float z\nproperty uchar red\nend_header\n").encode())
    props = read_ply(path)
    assert {name: tuple(t.shape) for name, t in props.items()} == {
        "x": (0,),
        "y": (0,),
        "z": (0,),
        "red": (0,),
    }
    assert props["x"].dtype == torch.float32 and props["red"].dtype == torch.uint8
    assert read_point_cloud(path).points.shape == (0, 3)


def test_ply_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ply"
    bad.write_bytes(b"not a ply file")
    with pytest.raises(ValueError, match="not a PLY file"):
        read_ply(bad)
    _write_ply(bad, "binary_little_endian")
    bad.write_bytes(bad.read_bytes()[:-30])
    with pytest.raises(ValueError, match="truncated"):
        read_ply(bad)
    bad.write_bytes(b"ply\nformat ascii 1.0\nelement face 0\nend_header\n")
    with pytest.raises(ValueError, match="no 'vertex'"):
        read_ply(bad)


@pytest.mark.parametrize(
    "array",
    [
        np.random.default_rng(0).random((7, 4)).astype("<f4"),
        np.arange(12, dtype=">u2").reshape(3, 4) * 5000,
        np.asfortranarray(np.random.default_rng(1).random((3, 5))),
        np.arange(-6, 6, dtype="<i8").reshape(2, 2, 3),
        np.array([4000000000, 1], dtype="<u4"),
        np.zeros((0, 4), dtype="<i4"),  # an empty scan
        np.zeros((0,), dtype="u1"),
    ],
)
def test_npy_matches_numpy(tmp_path: Path, array: np.ndarray) -> None:
    np.save(tmp_path / "a.npy", array)
    got = read_npy(tmp_path / "a.npy")
    assert tuple(got.shape) == array.shape
    np.testing.assert_array_equal(got.numpy(), array)


def test_npy_refuses_pickles_and_truncation(tmp_path: Path) -> None:
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="not a plain numeric array"):
        read_npy(tmp_path / "o.npy")
    np.save(tmp_path / "t.npy", np.zeros((100, 3)))
    (tmp_path / "t.npy").write_bytes((tmp_path / "t.npy").read_bytes()[:-8])
    with pytest.raises(ValueError, match="truncated"):
        read_npy(tmp_path / "t.npy")
    np.save(tmp_path / "p.npy", np.ones((4, 5), dtype=np.float32))
    cloud = read_point_cloud(tmp_path / "p.npy")
    assert cloud.points.shape == (4, 3) and cloud.features is not None
    assert cloud.features.shape == (4, 2)


def _kitti_sample(root: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A tiny SemanticKITTI tree written with NumPy: sequence 08, frames 0 and 1."""
    rng = np.random.default_rng(5)
    scans = []
    for frame, count in ((0, 64), (1, 37)):
        scan = rng.normal(0, 10, (count, 4)).astype("<f4")
        scan[:, 3] = rng.random(count)
        semantic = rng.choice([0, 10, 40, 252], count).astype("<u4")
        instance = rng.integers(0, 70000, count).astype("<u4") % 65536
        velodyne, labels = semantic_kitti_paths(root, 8, frame)
        velodyne.parent.mkdir(parents=True, exist_ok=True)
        labels.parent.mkdir(parents=True, exist_ok=True)
        scan.tofile(velodyne)
        ((instance << 16) | semantic).astype("<u4").tofile(labels)
        scans.append((scan, semantic, instance))
    return scans[0]


def test_semantic_kitti_layout(tmp_path: Path) -> None:
    scan, semantic, instance = _kitti_sample(tmp_path)
    velodyne, labels = semantic_kitti_paths(tmp_path, "08", 0)
    assert velodyne == tmp_path / "sequences/08/velodyne/000000.bin"
    assert labels == tmp_path / "sequences/08/labels/000000.label"
    cloud, inst = read_semantic_kitti(velodyne, labels)
    np.testing.assert_array_equal(cloud.points.numpy(), scan[:, :3])
    assert cloud.features is not None
    np.testing.assert_array_equal(cloud.features.numpy()[:, 0], scan[:, 3])
    assert cloud.labels is not None and inst is not None
    assert cloud.labels.tolist() == semantic.tolist() and inst.tolist() == instance.tolist()
    learning = {0: -1, 10: 0, 40: 1, 252: 0}  # unlabelled, car, road, moving-car -> car
    scans = SemanticKITTIScans(tmp_path, ["08"], learning_map=learning)
    assert len(scans) == 2
    mapped = scans[0].labels
    assert mapped is not None
    assert mapped.tolist() == [learning[int(s)] for s in semantic]
    batch = sparse_collate([VoxelizedDataset(scans, 0.5)[i] for i in range(2)])
    assert batch.offsets["inverse"].tolist() == [0, 64, 101]
    with pytest.raises(ValueError, match="labels for"):
        read_semantic_kitti(velodyne, semantic_kitti_paths(tmp_path, 8, 1)[1])


def test_written_semantic_kitti_reads_back_with_numpy(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    points, remission = torch.randn(20, 3, generator=g), torch.rand(20, generator=g)
    labels = torch.randint(0, 260, (20,), generator=g)
    instances = torch.randint(0, 65536, (20,), generator=g)
    scan, label = write_semantic_kitti(tmp_path, 0, 7, points, remission, labels, instances)
    assert label is not None
    raw = np.fromfile(scan, dtype="<f4").reshape(-1, 4)
    np.testing.assert_array_equal(raw[:, :3], points.numpy())
    words = np.fromfile(label, dtype="<u4")
    assert (words & 0xFFFF).tolist() == labels.tolist()
    assert (words >> 16).tolist() == instances.tolist()
    assert read_point_cloud(scan).labels is not None


def _npy_with_header(path: Path, header: str) -> Path:
    """A version-1 .npy file whose header text is ``header`` (padded as NumPy pads it)."""
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + bytes(8))
    return path


@pytest.mark.parametrize(
    ("header", "words"),
    [
        # ast.literal_eval let these escape as RecursionError / MemoryError
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "-" * 3000 + "1,), }",
            "unreadable",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "-" * 9000 + "1,), }",
            "unreadable",
        ),
        # and accepted these, reading a truthy string or a bool as the order and a dimension
        ("{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,), }", "fortran_order must be"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (True, 2), }", "unreadable"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", "unreadable"),
        ("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "unreadable"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} " + " " * 20000, "limit"),
    ],
)
def test_hostile_npy_headers_are_refused(tmp_path: Path, header: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        read_npy(_npy_with_header(tmp_path / "h.npy", header))


def test_bad_values_are_refused_not_wrapped(tmp_path: Path) -> None:
    """Negative .npy dims, 17-bit labels and negative label ids get a ValueError."""
    np.save(tmp_path / "n.npy", np.zeros((2, 3), dtype=np.float32))
    raw = (tmp_path / "n.npy").read_bytes().replace(b"(2, 3)", b"(-2, 3)")
    (tmp_path / "n.npy").write_bytes(raw)
    with pytest.raises(ValueError, match="non-negative integers"):
        read_npy(tmp_path / "n.npy")
    points, remission = torch.zeros(2, 3), torch.zeros(2)
    with pytest.raises(ValueError, match=r"\[0, 65535\]"):
        write_semantic_kitti(tmp_path, 0, 0, points, remission, torch.tensor([1, 65536]))
    with pytest.raises(ValueError, match=r"instances must be .* \[0, 65535\]"):
        labels = torch.tensor([1, 2])
        write_semantic_kitti(tmp_path, 0, 0, points, remission, labels, torch.tensor([0, 1 << 16]))
    assert not (tmp_path / "sequences").exists() or not any(
        p.is_file() for p in (tmp_path / "sequences").rglob("*")
    )  # a refused frame writes nothing (the scan used to be written before the check)
    _kitti_sample(tmp_path)
    with pytest.raises(ValueError, match="cannot be negative"):
        SemanticKITTIScans(tmp_path, ["08"], learning_map={-1: 0, 10: 1})

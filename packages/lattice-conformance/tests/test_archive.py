"""Fixture archive format: round trip, determinism, and refusal of hostile archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy as stnp
from lattice_conformance.archive import (
    FORMAT_VERSION,
    ArchiveLimits,
    FixtureArchiveError,
    FixtureCase,
    SparseArrays,
    open_fixture_archive,
    write_fixture_archive,
)


@pytest.fixture()
def artifact_dir(tmp_path: Path) -> Path:
    # The archive layer stores the artifact byte for byte and never parses it.
    out = tmp_path / "model.lattice"
    out.mkdir()
    (out / "graph.mlir").write_text("module {}\n")
    (out / "weights.safetensors").write_bytes(stnp.save({"w": np.ones((2, 2), np.float16)}))
    (out / "notes.txt").write_text("not part of the artifact")
    return out


def _case(name: str = "c0", rows: int = 6, seed: int = 0) -> FixtureCase:
    rng = np.random.default_rng(seed)
    coords = np.unique(rng.integers(0, 8, size=(rows * 2, 4)).astype(np.int32), axis=0)[:rows]
    coords[:, 0] = 0
    coords = np.unique(coords, axis=0)
    feats = rng.standard_normal((len(coords), 3)).astype(np.float16)
    return FixtureCase(
        name=name,
        inputs={
            "x_coords": coords,
            "x_features": feats,
            "x_active": np.array([len(coords)], np.int32),
        },
        expected={
            "y": SparseArrays(coords * 2, feats[:, :2].astype(np.float32), (2, 2, 2)),
            "g": np.ones((1, 3), np.float32),
        },
        atol=1e-3,
        rtol=1e-2,
        description="toy",
    )


def test_round_trip(tmp_path: Path, artifact_dir: Path) -> None:
    cases = [_case("a", seed=1), _case("b", seed=2)]
    path = write_fixture_archive(tmp_path / "f.tar.gz", artifact_dir, cases, producer={"x": "y"})
    with open_fixture_archive(path) as archive:
        root = archive.root
        assert archive.format_version == FORMAT_VERSION
        assert archive.producer == {"x": "y"}
        assert [c.name for c in archive.cases] == ["a", "b"]
        assert (archive.artifact_dir / "graph.mlir").read_text() == "module {}\n"
        assert not (archive.artifact_dir / "notes.txt").exists()
        for (_, loaded), original in zip(archive.iter_cases(), cases, strict=True):
            assert list(loaded.inputs) == ["x_coords", "x_features", "x_active"]
            for key, value in original.inputs.items():
                np.testing.assert_array_equal(loaded.inputs[key], value)
                assert loaded.inputs[key].dtype == value.dtype
            y = loaded.expected["y"]
            assert isinstance(y, SparseArrays)
            orig_y = original.expected["y"]
            assert isinstance(orig_y, SparseArrays)
            np.testing.assert_array_equal(y.coords, orig_y.coords)
            np.testing.assert_array_equal(y.features, orig_y.features)
            assert y.stride == (2, 2, 2)
            np.testing.assert_array_equal(loaded.expected["g"], np.ones((1, 3), np.float32))
            assert (loaded.atol, loaded.rtol) == (1e-3, 1e-2)
    assert not root.exists(), "the temporary extraction directory must be removed"


def test_writer_is_deterministic(tmp_path: Path, artifact_dir: Path) -> None:
    a = write_fixture_archive(tmp_path / "a.tar.gz", artifact_dir, [_case()])
    b = write_fixture_archive(tmp_path / "b.tar.gz", artifact_dir, [_case()])
    assert a.read_bytes() == b.read_bytes()


def test_bf16_declared_as_f32_storage(tmp_path: Path, artifact_dir: Path) -> None:
    case = _case()
    bf16_like = (np.arange(6, dtype=np.float32) * 0.5).reshape(2, 3)
    inputs = dict(case.inputs, x_features=bf16_like)
    ok = FixtureCase(case.name, inputs, case.expected, 0.1, 0.1, dtypes={"x_features": "bf16"})
    path = write_fixture_archive(tmp_path / "f.tar.gz", artifact_dir, [ok])
    with open_fixture_archive(path) as archive:
        assert archive.cases[0].input_dtypes["x_features"] == "bf16"
        assert archive.load_case(0).dtypes == {"x_features": "bf16"}
    not_bf16 = dict(inputs, x_features=bf16_like + np.float32(1e-3))
    bad = FixtureCase(case.name, not_bf16, case.expected, 0.1, 0.1, dtypes={"x_features": "bf16"})
    with pytest.raises(FixtureArchiveError, match="bf16-representable"):
        write_fixture_archive(tmp_path / "g.tar.gz", artifact_dir, [bad])


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda c: FixtureCase("bad name!", c.inputs, c.expected, 0.1, 0.1), "case names"),
        (lambda c: FixtureCase(c.name, c.inputs, c.expected, -1.0, 0.1), "atol must be >= 0"),
        (lambda c: FixtureCase(c.name, c.inputs, c.expected, float("nan"), 0.1), "finite"),
        (
            lambda c: FixtureCase(
                c.name, dict(c.inputs, x_features=np.zeros((2, 2))), c.expected, 0.1, 0.1
            ),
            "float64 cannot be stored",
        ),
        (
            lambda c: FixtureCase(
                c.name,
                c.inputs,
                {"y": SparseArrays(np.zeros((3, 3), np.int32), np.zeros((3, 1), np.float32))},
                0.1,
                0.1,
            ),
            r"coords must be int32 \(N, 4\)",
        ),
        (
            lambda c: FixtureCase(
                c.name,
                c.inputs,
                {"y": SparseArrays(np.zeros((3, 4), np.int32), np.zeros((2, 1), np.float32))},
                0.1,
                0.1,
            ),
            "coordinate rows",
        ),
        (
            lambda c: FixtureCase(
                c.name,
                c.inputs,
                {"y": SparseArrays(np.zeros((0, 4), np.int32), np.zeros((0, 1)), (0, 1, 1))},
                0.1,
                0.1,
            ),
            "float64",
        ),
        (
            lambda c: FixtureCase(c.name, c.inputs, c.expected, 0.1, 0.1, dtypes={"zz": "bf16"}),
            "neither inputs nor output",
        ),
    ],
)
def test_writer_rejects_bad_cases(
    tmp_path: Path, artifact_dir: Path, mutate: object, match: str
) -> None:
    case = mutate(_case())  # type: ignore[operator]
    target = tmp_path / "f.tar.gz"
    with pytest.raises(FixtureArchiveError, match=match):
        write_fixture_archive(target, artifact_dir, [case])
    assert list(tmp_path.glob("*.tar.gz*")) == [], "nothing may be left behind"
    assert list(tmp_path.glob(".f.tar.gz*")) == []


def test_writer_rejects_duplicates_and_missing_artifact(tmp_path: Path, artifact_dir: Path) -> None:
    with pytest.raises(FixtureArchiveError, match="duplicate case names"):
        write_fixture_archive(tmp_path / "f.tar.gz", artifact_dir, [_case("a"), _case("a")])
    with pytest.raises(FixtureArchiveError, match=r"has no graph\.mlir"):
        write_fixture_archive(tmp_path / "f.tar.gz", tmp_path / "nowhere", [_case()])
    with pytest.raises(FixtureArchiveError, match="at least one case"):
        write_fixture_archive(tmp_path / "f.tar.gz", artifact_dir, [])


def test_failed_write_keeps_previous_archive(tmp_path: Path, artifact_dir: Path) -> None:
    target = write_fixture_archive(tmp_path / "f.tar.gz", artifact_dir, [_case()])
    before = target.read_bytes()
    with pytest.raises(FixtureArchiveError):
        write_fixture_archive(target, artifact_dir, [_case("a"), _case("a")])
    assert target.read_bytes() == before


# ---------------------------------------------------------------------------
# Hostile archives.


def _members_of(path: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    out = []
    with tarfile.open(path, "r:gz") as tar:
        for info in tar.getmembers():
            f = tar.extractfile(info)
            out.append((info, None if f is None else f.read()))
    return out


def _write_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, None if data is None else io.BytesIO(data))
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


def _extra(info_name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(info_name)
    info.type = kind
    info.linkname = link
    return info


@pytest.fixture()
def good_archive(tmp_path: Path, artifact_dir: Path) -> Path:
    return write_fixture_archive(tmp_path / "good.tar.gz", artifact_dir, [_case()])


@pytest.mark.parametrize(
    ("extra", "data", "reason"),
    [
        (_extra("../escaped.txt"), b"x", "parent_reference"),
        (_extra("cases/../../escaped.txt"), b"x", "parent_reference"),
        (_extra("/tmp/lattice-absolute-escape.txt"), b"x", "absolute_path"),
        (_extra("C:/evil.txt"), b"x", "absolute_path"),
        (_extra("cases\\evil.txt"), b"x", "bad_name"),
        (_extra("link", tarfile.SYMTYPE, "/etc/passwd"), None, "link"),
        (_extra("hard", tarfile.LNKTYPE, "manifest.json"), None, "link"),
        (_extra("dev", tarfile.CHRTYPE), None, "special_file"),
        (_extra("fifo", tarfile.FIFOTYPE), None, "special_file"),
        (_extra("manifest.json"), b"{}", "duplicate_member"),
        (_extra("MANIFEST.json"), b"{}", "duplicate_member"),
        (_extra("stray.bin"), b"x", "unlisted_member"),
    ],
)
def test_reader_rejects_hostile_members(
    tmp_path: Path, good_archive: Path, extra: tarfile.TarInfo, data: bytes | None, reason: str
) -> None:
    members = _members_of(good_archive)
    assert members[0][0].name == "manifest.json"
    # Hostile members right after the manifest (which must come first): the
    # reader must refuse before writing them.
    path = _write_tar(tmp_path / "bad.tar.gz", [members[0], (extra, data), *members[1:]])
    dest = tmp_path / "dest"
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(path, into=dest)
    assert info.value.reason == reason, str(info.value)
    assert not (tmp_path / "escaped.txt").exists()
    assert not Path("/tmp/lattice-absolute-escape.txt").exists()
    assert sorted(p.name for p in dest.iterdir()) == ["manifest.json"]


def test_reader_wants_the_manifest_first(tmp_path: Path, good_archive: Path) -> None:
    members = _members_of(good_archive)
    path = _write_tar(tmp_path / "late.tar.gz", [*members[1:], members[0]])
    dest = tmp_path / "dest"
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(path, into=dest)
    assert info.value.reason == "manifest_not_first"
    assert list(dest.iterdir()) == []


def test_reader_rejects_truncated_archive(tmp_path: Path, good_archive: Path) -> None:
    raw = good_archive.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 9, 10):
        path = tmp_path / f"cut{cut}.tar.gz"
        path.write_bytes(raw[:cut])
        with pytest.raises(FixtureArchiveError) as info:
            open_fixture_archive(path)
        assert info.value.reason == "truncated_or_corrupt", str(info.value)
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tarball at all")
    with pytest.raises(FixtureArchiveError, match="truncated or not a gzip"):
        open_fixture_archive(tmp_path / "junk.tar.gz")


def test_reader_rejects_modified_member(tmp_path: Path, good_archive: Path) -> None:
    members = _members_of(good_archive)
    damaged = [
        (info, data[:-4] if info.name.endswith("expected.safetensors") and data else data)
        for info, data in members
    ]
    path = _write_tar(tmp_path / "bad.tar.gz", damaged)
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(path)
    assert info.value.reason == "checksum_mismatch"


def test_reader_rejects_missing_member(tmp_path: Path, good_archive: Path) -> None:
    members = [(i, d) for i, d in _members_of(good_archive) if "graph.mlir" not in i.name]
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(_write_tar(tmp_path / "bad.tar.gz", members))
    assert info.value.reason == "missing_member"


def _with_manifest(tmp_path: Path, good: Path, edit: object) -> Path:
    members = []
    for info, data in _members_of(good):
        if info.name == "manifest.json" and data is not None:
            manifest = json.loads(data)
            edit(manifest)  # type: ignore[operator]
            data = json.dumps(manifest).encode()
        members.append((info, data))
    return _write_tar(tmp_path / "edited.tar.gz", members)


def test_reader_rejects_other_versions_and_formats(tmp_path: Path, good_archive: Path) -> None:
    path = _with_manifest(tmp_path, good_archive, lambda m: m.update(format_version=99))
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(path)
    assert info.value.reason == "unsupported_version"
    assert "format_version 99" in str(info.value)
    path = _with_manifest(tmp_path, good_archive, lambda m: m.update(format="zip"))
    with pytest.raises(FixtureArchiveError, match="not a lattice fixture archive"):
        open_fixture_archive(path)
    path = _with_manifest(tmp_path, good_archive, lambda m: m["cases"][0].update(atol=-1))
    with pytest.raises(FixtureArchiveError, match="atol must be"):
        open_fixture_archive(path)


def test_reader_enforces_size_caps(tmp_path: Path, good_archive: Path) -> None:
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(good_archive, limits=ArchiveLimits(max_member_bytes=64))
    assert info.value.reason == "member_too_large"
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(good_archive, limits=ArchiveLimits(max_total_bytes=600))
    assert info.value.reason == "archive_too_large"
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(good_archive, limits=ArchiveLimits(max_archive_bytes=100))
    assert info.value.reason == "archive_too_large"
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(good_archive, limits=ArchiveLimits(max_members=2))
    assert info.value.reason == "too_many_members"


def test_reader_rejects_file_under_file(tmp_path: Path, good_archive: Path) -> None:
    def listed(manifest: dict[str, Any]) -> None:
        for name, data in (("a", b"x"), ("a/b", b"y")):
            manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": 1}

    members = _members_of(_with_manifest(tmp_path, good_archive, listed))
    path = _write_tar(
        tmp_path / "bad.tar.gz",
        [members[0], (_extra("a"), b"x"), (_extra("a/b"), b"y"), *members[1:]],
    )
    with pytest.raises(FixtureArchiveError) as info:
        open_fixture_archive(path)
    assert info.value.reason == "conflicting_member"


def test_missing_archive_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FixtureArchiveError, match="cannot read fixture archive"):
        open_fixture_archive(tmp_path / "absent.tar.gz")

"""Hostile fixture archives: gzip bombs (bounded memory, measured), lying sizes,
tampered checksums, absurd tolerances and manifests, hostile array files.

Archives are assembled here member by member (tarfile + gzip), so no writer's
checks stand in the way; a gzip bomb is built from concatenated gzip members
(a valid gzip stream), so a gibibyte of zeros costs a megabyte to make.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy as stnp
from lattice_conformance.archive import (
    ArchiveLimits,
    FixtureArchiveError,
    FixtureCase,
    SparseArrays,
    open_fixture_archive,
    write_fixture_archive,
)

GIB = 1 << 30


@pytest.fixture()
def good(tmp_path: Path) -> list[tuple[str, bytes]]:
    """The members of a valid archive, manifest first."""
    art = tmp_path / "model.lattice"
    art.mkdir()
    (art / "graph.mlir").write_text("module {}\n")
    (art / "weights.safetensors").write_bytes(stnp.save({"w": np.ones((2, 2), np.float16)}))
    coords = np.array([[0, 0, 0, 0], [0, 1, 0, 0]], np.int32)
    feats = np.ones((2, 3), np.float32)
    case = FixtureCase(
        name="c0",
        inputs={"x_coords": coords, "x_features": feats, "x_active": np.array([2], np.int32)},
        expected={"y": SparseArrays(coords, feats)},
        atol=1e-3,
        rtol=1e-2,
    )
    path = write_fixture_archive(tmp_path / "good.tar.gz", art, [case])
    with tarfile.open(path, "r:gz") as tar:
        out = []
        for info in tar.getmembers():
            f = tar.extractfile(info)
            assert f is not None
            out.append((info.name, f.read()))
    assert out[0][0] == "manifest.json"
    return out


def _manifest(members: list[tuple[str, bytes]]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(members[0][1])
    return result


def _rebuild(
    members: list[tuple[str, bytes]], edit: Callable[[dict[str, Any]], None] | None = None
) -> list[tuple[str, bytes]]:
    """Members with the manifest's file table recomputed (so checksums agree) and edited."""
    manifest = _manifest(members)
    manifest["files"] = {
        name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        for name, data in members[1:]
    }
    if edit is not None:
        edit(manifest)
    return [("manifest.json", json.dumps(manifest).encode()), *members[1:]]


def _tar_gz(
    path: Path, members: list[tuple[str, bytes]], raw_manifest: bytes | None = None
) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            if name == "manifest.json" and raw_manifest is not None:
                data = raw_manifest
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


def _reason(path: Path, dest: Path | None = None, **limits: int) -> str:
    with (
        pytest.raises(FixtureArchiveError) as info,
        open_fixture_archive(path, into=dest, limits=ArchiveLimits(**limits)) as archive,
    ):
        for spec in archive.cases:
            archive.load_case(spec)
    return info.value.reason


# ---------------------------------------------------------------------------
# Gzip bombs, in a child process whose peak RSS is measured.

ZEROS_16M = gzip.compress(bytes(16 << 20), compresslevel=9)


def _bomb(path: Path, manifest: bytes, name: str, header_size: int, zeros: int) -> Path:
    """manifest, then a member whose header says ``header_size``, then ``zeros`` zero bytes."""
    with open(path, "wb") as out:
        head = io.BytesIO()
        with tarfile.open(fileobj=head, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
        # Keep the manifest's header and data blocks, not the end-of-archive blocks.
        pax = head.getvalue()[: 512 * (1 + (len(manifest) + 511) // 512)]
        if header_size:
            info = tarfile.TarInfo(name)
            info.size = header_size
            out.write(gzip.compress(pax + info.tobuf(format=tarfile.GNU_FORMAT)))
        else:  # the tar ends after the manifest; the zeros trail it
            out.write(gzip.compress(pax + bytes(1024)))
        for _ in range(zeros // (16 << 20)):
            out.write(ZEROS_16M)
    return path


MEASURE = textwrap.dedent(
    """
    import resource, sys
    from lattice_conformance.archive import FixtureArchiveError, open_fixture_archive
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        open_fixture_archive(sys.argv[1], into=sys.argv[2])
        reason = "accepted"
    except FixtureArchiveError as exc:
        reason = exc.reason
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(reason, before, after)
    """
)


def _measured(path: Path, dest: Path) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), str(dest)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    reason, before, after = done.stdout.split()
    print(f"peak RSS {int(after) // 1024} MiB (after imports: {int(before) // 1024} MiB)")
    return reason, int(after) - int(before)


def _bomb_manifest(good: list[tuple[str, bytes]], name: str, size: int) -> bytes:
    manifest = _manifest(good)
    manifest["files"] = {name: {"sha256": "0" * 64, "size": size}}
    return json.dumps(manifest).encode()


@pytest.mark.parametrize(
    ("label", "declared", "header", "zeros", "reason"),
    [
        ("1 GiB member declared honestly", GIB, GIB, GIB, "archive_too_large"),
        ("256 MiB member declared as 10 bytes", 10, GIB // 4, GIB // 4, "checksum_mismatch"),
        ("1 GiB member over the member cap", 10, GIB, GIB, "member_too_large"),
        ("1 GiB of zeros after the tar end", 10, 0, GIB, "trailing_data"),
    ],
)
def test_gzip_bombs_are_refused_in_bounded_memory(
    tmp_path: Path,
    good: list[tuple[str, bytes]],
    label: str,
    declared: int,
    header: int,
    zeros: int,
    reason: str,
) -> None:
    path = _bomb(
        tmp_path / "bomb.tar.gz",
        _bomb_manifest(good, "cases/x", declared),
        "cases/x",
        header,
        zeros,
    )
    assert path.stat().st_size < 2 << 20  # about a megabyte expanding to a gibibyte
    dest = tmp_path / "dest"
    got, grown_kib = _measured(path, dest)
    assert got == reason, label
    assert grown_kib < 64 << 10, f"{label}: peak RSS grew by {grown_kib} KiB"
    written = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    assert written < 1 << 20, f"{label}: {written} bytes were written before the refusal"
    print(f"{label}: refused ({got}), peak RSS +{grown_kib} KiB, {written} bytes written")


def test_total_size_is_refused_before_anything_but_the_manifest_is_written(
    tmp_path: Path, good: list[tuple[str, bytes]]
) -> None:
    path = _tar_gz(tmp_path / "a.tar.gz", good)
    dest = tmp_path / "dest"
    assert _reason(path, dest, max_total_bytes=len(good[0][1]) + 100) == "archive_too_large"
    assert [p.name for p in dest.iterdir()] == ["manifest.json"]


def test_an_oversized_manifest_is_refused(tmp_path: Path, good: list[tuple[str, bytes]]) -> None:
    path = _tar_gz(tmp_path / "a.tar.gz", good, raw_manifest=b" " * 5000 + good[0][1])
    assert _reason(path, max_manifest_bytes=4096) == "bad_manifest"


# ---------------------------------------------------------------------------
# Checksums, tolerances and manifests.


def test_a_tampered_member_of_the_same_size_fails_its_sha256(
    tmp_path: Path, good: list[tuple[str, bytes]]
) -> None:
    members = [
        (name, data[:-1] + bytes([data[-1] ^ 1]) if name.endswith("graph.mlir") else data)
        for name, data in good
    ]
    assert _reason(_tar_gz(tmp_path / "a.tar.gz", members)) == "checksum_mismatch"


def _case_edit(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(manifest: dict[str, Any]) -> None:
        manifest["cases"][0][key] = value

    return edit


@pytest.mark.parametrize(
    ("label", "raw_atol", "message"),
    [
        ("negative", "-1", "atol must be a finite number >= 0"),
        ("NaN", "NaN", "holds NaN, which is not a JSON number"),
        ("infinity", "Infinity", "holds Infinity"),
        ("overflowing float", "1e999", "holds 1e999, which is not a finite number"),
        ("401-digit integer", "9" * 401, "integer of 401 digits"),
        ("5001-digit integer", "9" * 5001, "integer of 5001 digits"),
        ("huge float literal", "0." + "1" * 400, "number literal of 402 characters"),
    ],
)
def test_absurd_tolerances_are_refused(
    tmp_path: Path, good: list[tuple[str, bytes]], label: str, raw_atol: str, message: str
) -> None:
    members = _rebuild(good, _case_edit("atol", 12345.5))
    raw = members[0][1].replace(b'"atol": 12345.5', b'"atol": ' + raw_atol.encode())
    assert raw != members[0][1]
    path = _tar_gz(tmp_path / "a.tar.gz", members, raw_manifest=raw)
    with pytest.raises(FixtureArchiveError, match=message) as info:
        open_fixture_archive(path)
    assert info.value.reason == "bad_manifest", label


def test_deep_json_is_refused_without_recursion(
    tmp_path: Path, good: list[tuple[str, bytes]]
) -> None:
    raw = good[0][1][:-2] + b', "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path = _tar_gz(tmp_path / "a.tar.gz", good, raw_manifest=raw)
    with pytest.raises(FixtureArchiveError, match="nests 100001 levels deep") as info:
        open_fixture_archive(path)
    assert info.value.reason == "bad_manifest"


def test_brackets_inside_strings_do_not_count_as_nesting(
    tmp_path: Path, good: list[tuple[str, bytes]]
) -> None:
    members = _rebuild(good, lambda m: m["producer"].update(note="[[[{{{" * 100 + '\\"]'))
    with open_fixture_archive(_tar_gz(tmp_path / "a.tar.gz", members)) as archive:
        assert archive.producer["note"].startswith("[[[{{{")


def test_a_negative_or_boolean_declared_size_is_refused(
    tmp_path: Path, good: list[tuple[str, bytes]]
) -> None:
    for bad in (-1, True):

        def edit(manifest: dict[str, Any], bad: Any = bad) -> None:
            manifest["files"]["artifact/graph.mlir"]["size"] = bad

        path = _tar_gz(tmp_path / "a.tar.gz", _rebuild(good, edit))
        assert _reason(path) == "bad_manifest"


def test_hostile_array_files_inside_an_archive_name_the_entry(
    tmp_path: Path, good: list[tuple[str, bytes]]
) -> None:
    header = json.dumps(
        {
            "x_coords": {"dtype": "I32", "shape": [2, 4], "data_offsets": [0, 32]},
            "x_features": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]},
            "x_active": {"dtype": "I32", "shape": [1], "data_offsets": [32, 36]},
        }
    ).encode()
    aliased = len(header).to_bytes(8, "little") + header + bytes(36)
    members = [(n, aliased if n.endswith("inputs.safetensors") else d) for n, d in good]
    path = _tar_gz(tmp_path / "a.tar.gz", _rebuild(members))
    with (
        pytest.raises(FixtureArchiveError, match=r"entry 'x_features'.*overlap") as info,
        open_fixture_archive(path) as archive,
    ):
        archive.load_case(0)
    assert info.value.reason == "bad_arrays"

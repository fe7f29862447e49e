"""Bundle rules and the atomic bundle writer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from lattice_contract.artifact import (
    BundleError,
    atomic_bundle_write,
    check_bundle_dir,
    flatten_bundle_weights,
)


def _bundle(root: Path, *extra: str) -> Path:
    root.mkdir()
    (root / "graph.mlir").write_text("module {}\n")
    (root / "weights.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    for name in extra:
        (root / name).write_text("{}")
    return root


def test_valid_bundle(tmp_path: Path) -> None:
    paths = check_bundle_dir(_bundle(tmp_path / "m.lattice"))
    assert paths.graph.name == "graph.mlir" and paths.weights.name == "weights.safetensors"


@pytest.mark.parametrize("name", ["manifest.json", "model.json", "graph.json", "meta.JSON"])
def test_legacy_json_manifest(tmp_path: Path, name: str) -> None:
    root = _bundle(tmp_path / "m.lattice", name)
    with pytest.raises(BundleError, match=rf"legacy JSON manifest\(s\) {name}.*re-exporting"):
        check_bundle_dir(root)


@pytest.mark.parametrize("name", ["extra.safetensors", "weights.npz", "model.pt", "w.bin"])
def test_other_weight_files(tmp_path: Path, name: str) -> None:
    root = _bundle(tmp_path / "m.lattice", name)
    with pytest.raises(BundleError, match=rf"weight file\(s\) {name}; .*weights.safetensors"):
        check_bundle_dir(root)


@pytest.mark.parametrize("missing", ["graph.mlir", "weights.safetensors"])
def test_missing_files(tmp_path: Path, missing: str) -> None:
    root = _bundle(tmp_path / "m.lattice")
    (root / missing).unlink()
    with pytest.raises(BundleError, match=rf"has no {missing}"):
        check_bundle_dir(root)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"does not exist"):
        check_bundle_dir(tmp_path / "absent")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BundleError, match=r"is not a directory"):
        check_bundle_dir(tmp_path / "file")


def _writer(graph: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        (tmp / "graph.mlir").write_text(graph)
        (tmp / "weights.safetensors").write_bytes(b"")

    return write


def test_atomic_write_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _writer("one"))
    assert (target / "graph.mlir").read_text() == "one"
    atomic_bundle_write(target, _writer("two"))
    assert (target / "graph.mlir").read_text() == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lattice"]


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"

    def fail(tmp: Path) -> None:
        (tmp / "graph.mlir").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_bundle_write(target, fail)
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_old_bundle(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    atomic_bundle_write(target, _writer("old"))

    def fail(tmp: Path) -> None:
        (tmp / "graph.mlir").write_text("new")
        raise ValueError("bad weights")

    with pytest.raises(ValueError, match="bad weights"):
        atomic_bundle_write(target, fail)
    assert (target / "graph.mlir").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.lattice"]


def test_refuses_to_clobber_other_directories(tmp_path: Path) -> None:
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_text("meow")
    with pytest.raises(BundleError, match=r"refusing to overwrite"):
        atomic_bundle_write(other, _writer("x"))
    assert (other / "cat.jpg").read_text() == "meow"
    (tmp_path / "file").write_text("x")
    with pytest.raises(BundleError, match=r"exists and is not a directory"):
        atomic_bundle_write(tmp_path / "file", _writer("x"))
    empty = tmp_path / "empty"
    empty.mkdir()
    atomic_bundle_write(empty, _writer("ok"))
    assert (empty / "graph.mlir").read_text() == "ok"


@dataclass(frozen=True)
class _Packed:
    weight: bytes
    scales: bytes
    biases: bytes


def _flatten(weights: Mapping[str, object] | None) -> dict[str, bytes]:
    return flatten_bundle_weights(
        weights, array_type=bytes, packed_type=_Packed, array_name="bytes", convert=bytes.upper
    )


def test_flatten_splits_packed_and_converts() -> None:
    flat = _flatten({"a": b"x", "q": _Packed(b"w", b"s", b"b")})
    assert flat == {"a": b"X", "q.weight": b"W", "q.scales": b"S", "q.biases": b"B"}
    assert _flatten(None) == {}
    no_convert = flatten_bundle_weights(
        {"a": b"x"}, array_type=bytes, packed_type=_Packed, array_name="bytes"
    )
    assert no_convert == {"a": b"x"}


def test_flatten_rejects_collisions_and_bad_entries() -> None:
    with pytest.raises(ValueError, match=r"'q.scales' is given twice"):
        _flatten({"q.scales": b"x", "q": _Packed(b"w", b"s", b"b")})
    with pytest.raises(TypeError, match=r"weight 'a' is a str; pass bytes values"):
        _flatten({"a": "text"})
    with pytest.raises(TypeError, match=r"non-empty strings, got ''"):
        _flatten({"": b"x"})
    with pytest.raises(TypeError, match=r"non-empty strings, got 3"):
        _flatten({3: b"x"})  # type: ignore[dict-item]

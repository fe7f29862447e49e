"""The shared safetensors reader policy, on hand-made hostile files.

Each file is written byte by byte here (8-byte length, JSON header, data), so
no writer's own checks stand between the test and the reader.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from lattice_contract.artifact import (
    MAX_HEADER_BYTES,
    BundleError,
    WeightFileError,
    check_safetensors_bytes,
    check_safetensors_file,
)


def raw_file(
    header: dict[str, Any] | bytes, data: bytes = b"", *, length: int | None = None
) -> bytes:
    """A safetensors file from a header (dict or raw bytes) and a data section."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


GOOD = raw_file(
    {
        "__metadata__": {"format": "pt"},
        "b": entry("F16", [2, 2], 16, 24),
        "a": entry("F32", [4], 0, 16),
        "empty": entry("I32", [0, 3], 24, 24),
    },
    bytes(24),
)


def test_a_valid_file_passes_with_its_layout(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes(GOOD)
    layout = check_safetensors_file(path)
    assert list(layout.entries) == ["a", "b", "empty"]  # offset order
    assert layout.entries["b"].shape == (2, 2)
    assert layout.metadata == {"format": "pt"}
    assert layout.data_start == len(GOOD) - 24
    assert check_safetensors_bytes(GOOD).entries == layout.entries


def test_header_padding_spaces_are_allowed() -> None:
    header = json.dumps({"a": entry("U8", [3], 0, 3)}).encode() + b"    "
    check_safetensors_bytes(raw_file(header, b"abc"))


HOSTILE: list[tuple[str, bytes, str | None, str]] = [
    (
        "overlapping offsets",
        raw_file({"a": entry("F32", [4], 0, 16), "b": entry("F32", [4], 8, 24)}, bytes(24)),
        "b",
        r"overlap the previous entry, which ends at 16",
    ),
    (
        "trailing bytes",
        raw_file({"a": entry("F32", [2], 0, 8)}, bytes(12)),
        None,
        r"4 trailing bytes after the last entry",
    ),
    (
        "dimension of 2^32 (mx.load truncated it)",
        raw_file({"a": entry("F32", [2**32 + 4], 0, 16)}, bytes(16)),
        "a",
        r"needs 17179869200 bytes but data_offsets \[0, 16\] span 16",
    ),
    (
        "dimension at 2^63",
        raw_file({"a": entry("U8", [2**63, 0], 0, 0)}),
        "a",
        r"dimension 0 is 9223372036854775808, not below 2\^63",
    ),
    (
        "negative dimension",
        raw_file({"a": entry("F32", [-1, -4], 0, 16)}, bytes(16)),
        "a",
        r"dimension 0 is negative \(-1\)",
    ),
    (
        "huge header length",
        struct.pack("<Q", 2**63) + b"{}",
        None,
        rf"header length is {2**63} bytes, over the {MAX_HEADER_BYTES}-byte limit",
    ),
    (
        "header length past the end",
        raw_file(b"{}", length=4096),
        None,
        r"header length is 4096 bytes but only 2 follow",
    ),
    ("shorter than the length field", b"\x01\x02", None, r"fewer than the 8-byte header"),
    (
        "truncated data",
        raw_file({"a": entry("F32", [4], 0, 16), "b": entry("F32", [4], 16, 32)}, bytes(20)),
        "b",
        r"truncated: the entries need 32 data bytes, the file has 20",
    ),
    (
        "gap between entries",
        raw_file({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, bytes(12)),
        "b",
        r"starts at 8 but the previous data ends at 4",
    ),
    (
        "first entry not at 0",
        raw_file({"a": entry("F32", [1], 4, 8)}, bytes(8)),
        "a",
        r"starts at 4 but the previous data ends at 0",
    ),
    (
        "unknown dtype",
        raw_file({"a": entry("F128", [1], 0, 16)}, bytes(16)),
        "a",
        r"dtype 'F128' is not a safetensors dtype",
    ),
    (
        "shape and dtype disagree with the bytes",
        raw_file({"a": entry("F16", [4], 0, 16)}, bytes(16)),
        "a",
        r"shape \[4\] of F16 needs 8 bytes but data_offsets \[0, 16\] span 16",
    ),
    (
        "reversed offsets",
        raw_file({"a": entry("U8", [0], 8, 4)}, bytes(8)),
        "a",
        r"must satisfy 0 <= begin <= end",
    ),
    (
        "duplicate name",
        raw_file(
            b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
            b'"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}',
            b"xy",
        ),
        "a",
        r"appears twice in the header",
    ),
    (
        "extra entry key",
        raw_file({"a": {**entry("U8", [1], 0, 1), "strides": [1]}}, b"x"),
        "a",
        r"must hold exactly dtype, shape and data_offsets",
    ),
    (
        "boolean dimension",
        # A bool is an int to Python (and to mypy), but not a dimension to the format.
        raw_file({"a": entry("U8", [True], 0, 1)}, b"x"),
        "a",
        r"dimension 0 is True, not an integer",
    ),
    (
        "metadata that is not strings",
        raw_file({"__metadata__": {"n": 1}}),
        "__metadata__",
        r"must map strings to strings",
    ),
    ("not JSON", raw_file(b"{nope"), None, r"the header is not valid JSON"),
    ("JSON but not an object", raw_file(b"[1, 2]"), None, r"the header is not a JSON object"),
    ("not UTF-8", raw_file(b"{\xff}"), None, r"the header is not UTF-8"),
    ("deep JSON", raw_file(b"{" + b'"a":{' * 100_000 + b"}" * 100_001), None, r"not valid JSON"),
    (
        "integer of 5,000 digits",
        raw_file(b'{"a": {"dtype": "U8", "shape": [' + b"9" * 5000 + b'], "data_offsets": []}}'),
        None,
        r"not valid JSON",
    ),
    (
        "integer of 400 digits",
        raw_file(b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, ' + b"9" * 400 + b"]}}"),
        "a",
        r"needs 1 bytes but data_offsets",
    ),
]


@pytest.mark.parametrize(
    ("label", "data", "key", "message"), HOSTILE, ids=[case[0] for case in HOSTILE]
)
def test_hostile_files_are_refused_naming_the_entry(
    tmp_path: Path, label: str, data: bytes, key: str | None, message: str
) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes(data)
    with pytest.raises(WeightFileError, match=message) as caught:
        check_safetensors_file(path)
    assert caught.value.key == key
    if key is not None:
        assert f"entry {key!r}" in str(caught.value)
    assert isinstance(caught.value, BundleError)
    with pytest.raises(WeightFileError, match=message):
        check_safetensors_bytes(data)


def test_a_missing_file_is_a_weight_file_error(tmp_path: Path) -> None:
    with pytest.raises(WeightFileError, match="cannot read the file"):
        check_safetensors_file(tmp_path / "absent.safetensors")

"""One reader policy for ``weights.safetensors`` on every runtime (stdlib only).

The safetensors format is an 8-byte little-endian header length ``n``, ``n``
bytes of JSON, then the data section.  Readers differ in what they accept:
the ``safetensors`` package refuses overlapping or trailing data, while
``mx.load`` has accepted two entries aliasing one byte range, bytes nobody
reads after the last entry, a dimension of 2^32 or more (silently truncated)
and negative dimensions.  A weight file is hostile input (it travels inside
fixture archives and model bundles), so both runtimes run
:func:`check_safetensors_file` first and hand the file to their own reader
only when it passes.

The policy, each violation a :class:`WeightFileError` naming the entry:

* the header length fits the file and is at most :data:`MAX_HEADER_BYTES`
  (checked before anything of that size is read);
* the header is a UTF-8 JSON object with no duplicate names; every entry
  but ``__metadata__`` (a string-to-string map, or null as MLX writes it)
  has exactly ``dtype``, ``shape`` and ``data_offsets``;
* the dtype is one safetensors defines; every dimension is an integer in
  ``[0, 2^63)``; ``prod(shape) * itemsize == end - begin``;
* sorted by offset, the entries tile the data section exactly: the first
  starts at 0, each starts where the previous ends (no overlap, no gap) and
  the last ends at the end of the file (no trailing bytes, no truncation).

Values are not this module's business (it never reads the data section);
:func:`non_finite_error` is the one wording both runtimes use when a float
weight holds NaN or infinity, which they refuse on load.
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

from lattice_contract.artifact.bundle import BundleError
from lattice_contract.artifact.untrusted import NotRegularFileError, open_regular_file

__all__ = [
    "DTYPE_SIZES",
    "FLOAT_DTYPES",
    "MAX_HEADER_BYTES",
    "SafetensorsEntry",
    "SafetensorsLayout",
    "WeightFileError",
    "check_safetensors_bytes",
    "check_safetensors_file",
    "non_finite_error",
]

MAX_HEADER_BYTES: Final = 100 * 1000 * 1000
"""Largest JSON header accepted (the ``safetensors`` package's own limit)."""

MAX_DIM: Final = 1 << 63
"""Exclusive bound of one dimension (the format's u64 read as int64 by every reader)."""

DTYPE_SIZES: Final[dict[str, int]] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E5M2": 1,
    "F8_E4M3": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
"""Item size in bytes of every dtype the safetensors format defines."""

FLOAT_DTYPES: Final = frozenset({"F8_E5M2", "F8_E4M3", "F16", "BF16", "F32", "F64"})

_ENTRY_KEYS: Final = frozenset({"dtype", "shape", "data_offsets"})
_MAX_RANK: Final = 64


class WeightFileError(BundleError):
    """A weight file breaks the reader policy; ``key`` names the entry (None: the file)."""

    def __init__(self, where: str, key: str | None, message: str, *, header: bool = True) -> None:
        subject = f"{where} is not a readable safetensors file" if header else where
        entry = f"entry {key!r}: " if key is not None else ""
        super().__init__(f"{subject}: {entry}{message}")
        self.key = key


@dataclass(frozen=True)
class SafetensorsEntry:
    """One checked entry: dtype name, shape and byte range inside the data section."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class SafetensorsLayout:
    """A checked header: entries by name (in offset order), metadata and data start."""

    entries: dict[str, SafetensorsEntry]
    metadata: dict[str, str]
    data_start: int


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise _Duplicate(name)
        out[name] = value
    return out


class _Duplicate(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(where: str, name: str, raw: Any) -> SafetensorsEntry:
    def fail(message: str) -> WeightFileError:
        return WeightFileError(where, name, message)

    if not isinstance(raw, dict) or set(raw) != _ENTRY_KEYS:
        got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise fail(f"must hold exactly dtype, shape and data_offsets, got {got}")
    dtype = raw["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise fail(f"dtype {dtype!r} is not a safetensors dtype (one of {', '.join(DTYPE_SIZES)})")
    shape = raw["shape"]
    if not isinstance(shape, list) or len(shape) > _MAX_RANK:
        raise fail(f"shape must be a list of at most {_MAX_RANK} dimensions, got {shape!r:.80}")
    for axis, dim in enumerate(shape):
        if not _int(dim):
            raise fail(f"dimension {axis} is {dim!r:.40}, not an integer")
        if dim < 0:
            raise fail(f"dimension {axis} is negative ({dim})")
        if dim >= MAX_DIM:
            raise fail(f"dimension {axis} is {dim}, not below 2^63")
    offsets = raw["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_int(o) for o in offsets)):
        raise fail(f"data_offsets must be two integers [begin, end], got {offsets!r:.80}")
    begin, end = offsets
    if begin < 0 or end < begin:
        raise fail(f"data_offsets [{begin}, {end}] must satisfy 0 <= begin <= end")
    nbytes = math.prod(shape) * DTYPE_SIZES[dtype]
    if end - begin != nbytes:
        raise fail(
            f"shape {shape} of {dtype} needs {nbytes} bytes but data_offsets [{begin}, {end}] "
            f"span {end - begin}"
        )
    return SafetensorsEntry(name, dtype, tuple(shape), begin, end)


def _check_header(where: str, header: bytes, data_size: int) -> SafetensorsLayout:
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WeightFileError(where, None, f"the header is not UTF-8 ({exc})") from None
    if not text.startswith("{"):
        raise WeightFileError(where, None, "the header is not a JSON object")
    try:
        parsed = json.loads(text, object_pairs_hook=_no_duplicates)
    except _Duplicate as dup:
        raise WeightFileError(where, dup.name, "appears twice in the header") from None
    except (ValueError, RecursionError) as exc:
        # ValueError covers malformed JSON and integers past Python's digit limit.
        raise WeightFileError(
            where, None, f"the header is not valid JSON ({str(exc)[:120]})"
        ) from None
    if not isinstance(parsed, dict):
        raise WeightFileError(where, None, "the header is not a JSON object")
    metadata: dict[str, str] = {}
    entries: list[SafetensorsEntry] = []
    for name, raw in parsed.items():
        if name == "__metadata__":
            if raw is None:  # mx.save_safetensors writes null for "no metadata"
                continue
            if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
                raise WeightFileError(
                    where, name, "must map strings to strings (safetensors metadata)"
                )
            metadata = dict(raw)
            continue
        entries.append(_entry(where, name, raw))
    entries.sort(key=lambda e: (e.begin, e.end))
    position = 0
    for entry in entries:
        if entry.begin < position:
            raise WeightFileError(
                where,
                entry.name,
                f"data_offsets [{entry.begin}, {entry.end}] overlap the previous entry, which "
                f"ends at {position}; two weights would alias one byte range",
            )
        if entry.begin > position:
            raise WeightFileError(
                where,
                entry.name,
                f"starts at {entry.begin} but the previous data ends at {position}; "
                "the data section must be contiguous",
            )
        position = entry.end
    if position > data_size:
        last = entries[-1].name if entries else None
        raise WeightFileError(
            where,
            last,
            f"the file is truncated: the entries need {position} data bytes, the file has "
            f"{data_size}",
        )
    if position < data_size:
        raise WeightFileError(
            where,
            None,
            f"{data_size - position} trailing bytes after the last entry (data ends at "
            f"{position} of {data_size}); re-save the weights",
        )
    return SafetensorsLayout(entries={e.name: e for e in entries}, metadata=metadata, data_start=0)


def _read_prefix(where: str, handle: BinaryIO, total: int) -> tuple[bytes, int]:
    if total < 8:
        raise WeightFileError(
            where, None, f"the file has {total} bytes, fewer than the 8-byte header length"
        )
    (length,) = struct.unpack("<Q", handle.read(8))
    if length > MAX_HEADER_BYTES:
        raise WeightFileError(
            where,
            None,
            f"the header length is {length} bytes, over the {MAX_HEADER_BYTES}-byte limit; "
            "this is not a safetensors file (or a hostile one)",
        )
    if length > total - 8:
        raise WeightFileError(
            where,
            None,
            f"the header length is {length} bytes but only {total - 8} follow; the file is "
            "truncated",
        )
    header = handle.read(length)
    return header, 8 + length


def check_safetensors_file(path: str | os.PathLike[str]) -> SafetensorsLayout:
    """Check a safetensors file's header against the policy; never reads the data."""
    where = os.fspath(path)
    try:
        with open_regular_file(path, what="weight file") as handle:
            total = os.fstat(handle.fileno()).st_size
            header, start = _read_prefix(where, handle, total)
    except (OSError, NotRegularFileError) as exc:
        raise WeightFileError(where, None, f"cannot read the file ({exc})") from None
    layout = _check_header(where, header, total - start)
    return SafetensorsLayout(layout.entries, layout.metadata, start)


def check_safetensors_bytes(data: bytes, where: str = "safetensors data") -> SafetensorsLayout:
    """:func:`check_safetensors_file` for a file already in memory."""
    header, start = _read_prefix(where, io.BytesIO(data), len(data))
    layout = _check_header(where, header, len(data) - start)
    return SafetensorsLayout(layout.entries, layout.metadata, start)


def non_finite_error(where: str, key: str, count: int) -> WeightFileError:
    """The refusal both runtimes give for a float weight holding NaN or infinity.

    Both runtimes refuse such a file on load rather than report it: a NaN
    or infinite weight is a diverged or corrupted checkpoint, and every
    output it reaches would be NaN without saying why.
    """
    return WeightFileError(
        where,
        key,
        f"holds {count} NaN or infinite value(s); deployed weights must be finite: fix "
        "the checkpoint and re-export",
        header=False,
    )

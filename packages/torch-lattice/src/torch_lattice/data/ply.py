"""The project's one PLY reader: the ``vertex`` element's scalar properties, bounded and exact.

PLY files come from scanners, exporters and strangers, so the reader holds
them to the format and to the size they really have:

* the header is read line by line up to :data:`MAX_HEADER_BYTES` (a header
  of a gigabyte of spaces is refused, not parsed); the first line is exactly
  ``ply`` and the header ends at the line ``end_header`` (a comment holding
  those words does not end it);
* ``vertex`` is declared once, with at least one property, no property
  twice, and a count of at most :data:`MAX_COUNT_DIGITS` digits that the
  file's size can hold;
* ASCII rows are parsed a block at a time (memory stays proportional to the
  result, not to Python objects per value); each row holds exactly one value
  per property, and each value must fit its declared type: ``uchar 300``,
  ``-1`` for an unsigned type, ``1.9`` for an integer or ``inf`` for an
  ``int`` are refused naming the row and the property, where a cast would
  have wrapped, truncated or saturated them;
* only regular files are read (a FIFO or ``/dev/zero`` is refused).

Floats keep their width (float32 or float64); integers come back as
int8/int16/int32 or, for unsigned types, as the next wider signed type
holding their true value (``uchar`` stays uint8).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO, Final

import torch
from lattice_contract.artifact import open_regular_file

__all__ = ["MAX_COUNT_DIGITS", "MAX_HEADER_BYTES", "PLY_TYPES", "read_ply"]

PathLike = str | os.PathLike[str]

MAX_HEADER_BYTES: Final = 64 << 10
"""Largest PLY header read (real headers are a few hundred bytes)."""

MAX_COUNT_DIGITS: Final = 12
"""Most digits of an element count (a trillion rows; the file size bounds it further)."""

_ROWS_PER_BLOCK: Final = 16384
"""ASCII rows parsed at a time."""

PLY_TYPES: dict[str, tuple[torch.dtype, int, bool]] = {
    # name -> (storage dtype, bytes, unsigned)
    "char": (torch.int8, 1, False),
    "int8": (torch.int8, 1, False),
    "uchar": (torch.uint8, 1, True),
    "uint8": (torch.uint8, 1, True),
    "short": (torch.int16, 2, False),
    "int16": (torch.int16, 2, False),
    "ushort": (torch.int16, 2, True),
    "uint16": (torch.int16, 2, True),
    "int": (torch.int32, 4, False),
    "int32": (torch.int32, 4, False),
    "uint": (torch.int32, 4, True),
    "uint32": (torch.int32, 4, True),
    "float": (torch.float32, 4, False),
    "float32": (torch.float32, 4, False),
    "double": (torch.float64, 8, False),
    "float64": (torch.float64, 8, False),
}

_FLOAT32_MAX: Final = float(torch.finfo(torch.float32).max)

Field = tuple[str, str]  # (property name, PLY type name)
Element = tuple[str, int, list[list[str]]]


def _header_lines(source: Path, handle: BinaryIO) -> tuple[list[str], int]:
    """The header's lines (``ply`` to before ``end_header``) and the body's offset."""
    lines: list[str] = []
    used = 0
    while True:
        raw = handle.readline(MAX_HEADER_BYTES - used + 1)
        used += len(raw)
        if used > MAX_HEADER_BYTES:
            raise ValueError(
                f"{source}: the PLY header is longer than {MAX_HEADER_BYTES:,} bytes; real "
                "headers are a few hundred, so this is not a PLY file this reader accepts"
            )
        if not raw:
            raise ValueError(f"{source}: not a PLY file (no 'end_header' line)")
        line = raw.decode("ascii", errors="replace").rstrip("\r\n")
        if not lines and line.rstrip("\r") != "ply":
            raise ValueError(f"{source}: not a PLY file (the first line must be 'ply')")
        if line.strip() == "end_header":
            return lines, used
        lines.append(line)


def _parse_header(source: Path, lines: list[str]) -> tuple[str, list[Element]]:
    fmt = ""
    elements: list[Element] = []
    for line in lines[1:]:
        words = line.split()
        if not words or words[0] in ("comment", "obj_info"):
            continue
        if words[0] == "format" and len(words) >= 2 and not fmt:
            fmt = words[1]
        elif words[0] == "element" and len(words) == 3:
            count = words[2]
            if not count.isdigit() or len(count) > MAX_COUNT_DIGITS:
                shown = count if len(count) <= 24 else count[:20] + "..."
                raise ValueError(
                    f"{source}: element {words[1]!r} count {shown!r} is not a row count "
                    f"(at most {MAX_COUNT_DIGITS} digits)"
                )
            if words[1] == "vertex" and any(e[0] == "vertex" for e in elements):
                raise ValueError(f"{source}: the PLY header declares 'vertex' twice")
            elements.append((words[1], int(count), []))
        elif words[0] == "property" and elements:
            elements[-1][2].append(words[1:])
        else:
            raise ValueError(f"{source}: unreadable PLY header line {line[:80]!r}")
    if fmt not in ("ascii", "binary_little_endian", "binary_big_endian"):
        raise ValueError(f"{source}: unknown PLY format {fmt!r}")
    return fmt, elements


def _vertex_fields(source: Path, props: list[list[str]]) -> list[Field]:
    if not props:
        raise ValueError(f"{source}: the 'vertex' element declares no properties")
    fields: list[Field] = []
    for prop in props:
        if len(prop) != 2 or prop[0] not in PLY_TYPES:
            raise ValueError(
                f"{source}: vertex property {' '.join(prop)!r} is not a scalar PLY type"
            )
        if any(prop[1] == name for name, _ in fields):
            raise ValueError(f"{source}: vertex property {prop[1]!r} is declared twice")
        fields.append((prop[1], prop[0]))
    return fields


def read_ply(path: PathLike) -> dict[str, torch.Tensor]:
    """The vertex properties of a PLY file, by name (``x``, ``y``, ``z``, ``red``, ...).

    Raises ``ValueError`` naming the file and the problem (the row and the
    property for a value its type cannot hold); see the module docs.
    """
    source = Path(path)
    with open_regular_file(source, what="PLY file") as handle:
        size = os.fstat(handle.fileno()).st_size
        lines, body = _header_lines(source, handle)
        fmt, elements = _parse_header(source, lines)
        names = [e[0] for e in elements]
        if "vertex" not in names:
            raise ValueError(f"{source}: the PLY file has no 'vertex' element")
        before = elements[: names.index("vertex")]
        _, count, props = elements[names.index("vertex")]
        fields = _vertex_fields(source, props)
        if fmt == "ascii":
            if count * len(fields) * 2 > size - body + 1:  # a value and a separator each
                raise ValueError(
                    f"{source}: {count:,} ASCII vertices of {len(fields)} properties cannot "
                    f"fit in the {size - body:,} bytes after the header"
                )
            return _read_ascii(source, handle, before, count, fields)
        return _read_binary(source, handle, fmt, size - body, before, count, fields)


def _read_ascii(
    source: Path, handle: BinaryIO, before: list[Element], count: int, fields: list[Field]
) -> dict[str, torch.Tensor]:
    for _ in range(sum(e[1] for e in before)):  # rows of earlier elements, one per line
        if not _row(source, handle, _MAX_OTHER_ROW_BYTES):
            break
    table = torch.empty((count, len(fields)), dtype=torch.float64)
    done = 0
    while done < count:
        block = min(_ROWS_PER_BLOCK, count - done)
        values = []
        limit = 64 * len(fields) + 256
        for row in range(done, done + block):
            words = _row(source, handle, limit).split()
            if len(words) != len(fields):
                got = "no row" if not words else f"{len(words)} values"
                raise ValueError(
                    f"{source}: vertex row {row} has {got}; each row holds exactly "
                    f"{len(fields)} (one per property)"
                )
            values.extend(words)
        try:
            parsed = [float(w) for w in values]
        except ValueError as err:
            raise ValueError(f"{source}: malformed ASCII vertex value ({err})") from None
        table[done : done + block] = torch.tensor(parsed, dtype=torch.float64).view(block, -1)
        done += block
    out = {}
    for j, (name, kind) in enumerate(fields):
        dtype, _, unsigned = PLY_TYPES[kind]
        _check_range(source, table[:, j], name, kind)
        target = dtype if not unsigned or dtype == torch.uint8 else torch.int64
        out[name] = table[:, j].to(target)
    return out


_MAX_OTHER_ROW_BYTES: Final = 1 << 20
"""Longest row of an element before ``vertex`` (a face's index list)."""


def _row(source: Path, handle: BinaryIO, limit: int) -> bytes:
    """One ASCII row, at most ``limit`` bytes (a row without end is refused, not slurped)."""
    line = handle.readline(limit + 1)
    if len(line) > limit:
        raise ValueError(f"{source}: an ASCII row is longer than {limit:,} bytes")
    return line


def _check_range(source: Path, column: torch.Tensor, name: str, kind: str) -> None:
    """Refuse ASCII values the declared type cannot hold (a cast would change them)."""
    dtype, size, unsigned = PLY_TYPES[kind]
    if dtype == torch.float64:
        return  # every parsed value is a float64
    if dtype == torch.float32:
        bad = torch.isfinite(column) & (column.abs() > _FLOAT32_MAX)
        why = f"out of the range of {kind} (it would read as infinity)"
    else:
        bits = 8 * size
        low = 0 if unsigned else -(1 << (bits - 1))
        high = (1 << bits) - 1 if unsigned else (1 << (bits - 1)) - 1
        bad = ~torch.isfinite(column) | (column != column.floor())
        bad |= (column < low) | (column > high)
        why = f"not an integer in [{low}, {high}] ({kind})"
    rows = torch.nonzero(bad).flatten()
    if rows.numel():
        row = int(rows[0])
        raise ValueError(
            f"{source}: vertex row {row}, property {name!r}: value {float(column[row])!r} is "
            f"{why}; fix the file (a cast would have changed the value)"
        )


def _read_binary(
    source: Path,
    handle: BinaryIO,
    fmt: str,
    available: int,
    before: list[Element],
    count: int,
    fields: list[Field],
) -> dict[str, torch.Tensor]:
    little = fmt == "binary_little_endian"
    offset = 0
    for name, n, eprops in before:
        if any(p[0] == "list" for p in eprops):
            raise ValueError(
                f"{source}: element {name!r} with list properties precedes 'vertex'; "
                "this reader needs 'vertex' first"
            )
        offset += n * sum(PLY_TYPES[p[0]][1] for p in _check_scalars(source, name, eprops))
    width = sum(PLY_TYPES[kind][1] for _, kind in fields)
    if offset + count * width > available:
        raise ValueError(f"{source}: truncated PLY body ({count} vertices of {width} bytes)")
    handle.seek(offset, os.SEEK_CUR)
    data = handle.read(count * width)
    raw = (
        torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if data
        else torch.empty(0, dtype=torch.uint8)
    )
    records = raw.view(count, width)
    out = {}
    start = 0
    for name, kind in fields:
        dtype, size, unsigned = PLY_TYPES[kind]
        # A (0, width) slice has strides no dtype view accepts: an empty cloud
        # gets its empty columns directly.
        if count:
            cols = records[:, start : start + size]
            if little != (sys.byteorder == "little"):
                cols = cols.flip(1)
            # A fresh copy: a one-row slice counts as contiguous yet keeps the record's
            # stride, which a view as a wider dtype refuses (a RuntimeError, found by
            # fuzzing a one-vertex binary file).
            column = cols.reshape(-1).clone().view(dtype)
        else:
            column = torch.empty(0, dtype=dtype)
        if unsigned and size > 1:
            wide = torch.int32 if size == 2 else torch.int64
            column = column.to(wide) & ((1 << (8 * size)) - 1)
        out[name] = column
        start += size
    return out


def _check_scalars(source: Path, element: str, props: list[list[str]]) -> list[list[str]]:
    for prop in props:
        if len(prop) != 2 or prop[0] not in PLY_TYPES:
            raise ValueError(
                f"{source}: element {element!r} property {' '.join(prop)!r} is not a scalar "
                "PLY type"
            )
    return props

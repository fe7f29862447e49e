"""The coded file: a self-describing header, then one payload.

Layout (all integers little-endian)::

    magic      4 bytes  b"LGCC"
    version    u8       FORMAT_VERSION (3; versions 1 and 2, without methods 4/5 and 5, still
                        decode)
    mode       u8       0 = octree coded level by level, 1 = LZMA of the octree stream
    levels     u8       L (grid 2^L per axis)
    voxels     varint   number of voxels (checked after decoding)
  mode 0:
    methods    L bytes  per level: 0 context-adaptive, 1 neural, 2 neural + adaptive,
                        3 parity phases with backoff, 4 mixing (context models mixed),
                        5 mixing with the neural model's logits as mixer inputs
    digest     32 bytes SHA-256 of the model artifact (only when a level uses 1, 2 or 5)
    per level with method 1, 2 or 5:
      crc      u32      CRC-32 of the level's quantised logits (after the fixes below)
      fixes    varint n, then n x (varint index delta, i8 value): quantised logits
               the encoder's runtimes disagreed on, and the value both must use
    payload    range-coded words (constriction, 32-bit)
  mode 1:
    payload    raw LZMA2 (preset 9e) of the octree byte stream
"""

from __future__ import annotations

import io

__all__ = ["FORMAT_VERSION", "MAGIC", "CodecFormatError", "read_varint", "write_varint"]

MAGIC = b"LGCC"
FORMAT_VERSION = 3
"""The version this codec writes.  Version 2 added method 4 (mixing), version 3 method 5
(mixing with the neural model); version 1 files (methods 0-3) and version 2 files (0-4)
are still read, and are the same bytes otherwise."""
READ_VERSIONS = frozenset({1, 2, 3})
"""The versions this decoder reads."""
FIRST_VERSION = {4: 2, 5: 3}
"""The format version that introduced a method (older files cannot use it)."""

METHOD_CONTEXT, METHOD_NEURAL, METHOD_HYBRID, METHOD_PHASES, METHOD_MIX = 0, 1, 2, 3, 4
METHOD_MIXNN = 5
METHOD_NAMES = {
    METHOD_CONTEXT: "context",
    METHOD_NEURAL: "neural",
    METHOD_HYBRID: "hybrid",
    METHOD_PHASES: "phases",
    METHOD_MIX: "mix",
    METHOD_MIXNN: "mixnn",
}
MODEL_METHODS = frozenset({METHOD_NEURAL, METHOD_HYBRID, METHOD_MIXNN})  # need the model
MIX_METHODS = frozenset({METHOD_MIX, METHOD_MIXNN})  # share the mixing state
MODE_OCTREE, MODE_LZMA = 0, 1


class CodecFormatError(ValueError):
    """The bytes are not a geometry codec file this decoder can read (the message says why)."""


def write_varint(out: io.BytesIO, value: int) -> None:
    """Unsigned LEB128."""
    if value < 0:
        raise ValueError(f"varint must be >= 0, got {value}")
    while True:
        byte = value & 0x7F
        value >>= 7
        out.write(bytes([byte | (0x80 if value else 0)]))
        if not value:
            return


def read_varint(buf: io.BytesIO) -> int:
    """Unsigned LEB128; a truncated file raises :class:`CodecFormatError`."""
    shift = value = 0
    while True:
        b = buf.read(1)
        if not b:
            raise CodecFormatError("the file ends inside its header (truncated?)")
        value |= (b[0] & 0x7F) << shift
        shift += 7
        if not b[0] & 0x80:
            return value
        if shift > 63:
            raise CodecFormatError("a header integer is longer than 64 bits (corrupt file)")


def read_exact(buf: io.BytesIO, n: int, what: str) -> bytes:
    data = buf.read(n)
    if len(data) != n:
        raise CodecFormatError(f"the file ends inside its {what} (truncated?)")
    return data

"""Tensor files of upstream fixture trees: read every dtype they hold, rename entries.

Upstream's producer writes ``inputs.safetensors`` and ``expected.safetensors``
from torch, so an entry may be bfloat16, which ``safetensors.numpy`` cannot
load (NumPy has no bf16).  These files are hostile input like any weight
file: the header goes through the contract's reader policy
(:func:`lattice_contract.artifact.safetensors_header.check_safetensors_file`: bounded
header, entries tiling the data exactly, dimensions in range) before a byte
of data is read, and the data are then viewed in place with NumPy:

* bf16 is widened to f32 exactly, on the bits (the 16 bf16 bits are the high
  half of the f32 with the same value), vectorised;
* 8-bit floats are refused with the dtype named (no runtime consumes them);
* every other dtype is read as itself, little-endian as the format defines.

:func:`rename_entries` rewrites only the header of a file (the migrated
input names), so every entry keeps its dtype, shape and bytes, bf16
included, and ``__metadata__`` survives.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from lattice_contract.artifact import (
    SafetensorsLayout,
    WeightFileError,
    check_safetensors_file,
)

from lattice_conformance.safe_extract import FixtureArchiveError

__all__ = ["TensorFile", "UpstreamTensorError", "read_tensors", "rename_entries"]

Array = npt.NDArray[Any]

_NUMPY_DTYPES: Final[dict[str, str]] = {
    "BOOL": "?",
    "U8": "u1",
    "I8": "i1",
    "I16": "<i2",
    "U16": "<u2",
    "F16": "<f2",
    "I32": "<i4",
    "U32": "<u4",
    "F32": "<f4",
    "I64": "<i8",
    "U64": "<u8",
    "F64": "<f8",
}
"""safetensors dtype -> NumPy dtype of the stored bytes (BF16 is widened separately)."""

DTYPE_NAMES: Final[dict[str, str]] = {
    "F16": "f16",
    "BF16": "bf16",
    "F32": "f32",
    "F64": "f64",
    "I32": "i32",
    "I64": "i64",
}
"""safetensors dtype -> the dtype name the replay reports use (others: lower case)."""


class UpstreamTensorError(FixtureArchiveError):
    """A tensor file of a fixture tree is unreadable; the message names the file and entry."""

    def __init__(self, message: str) -> None:
        super().__init__("bad_arrays", message)


@dataclass(frozen=True)
class TensorFile:
    """One file's tensors by name, each entry's stored dtype name, and its metadata."""

    arrays: dict[str, Array]
    dtypes: dict[str, str]
    metadata: dict[str, str]


def _layout(path: Path) -> SafetensorsLayout:
    try:
        return check_safetensors_file(path)
    except WeightFileError as exc:
        raise UpstreamTensorError(str(exc)) from None


def read_tensors(path: str | os.PathLike[str]) -> TensorFile:
    """Every entry of a safetensors file as a NumPy array (bf16 widened to f32 exactly)."""
    source = Path(path)
    layout = _layout(source)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise UpstreamTensorError(f"cannot read {source}: {exc}") from None
    start = layout.data_start
    arrays: dict[str, Array] = {}
    dtypes: dict[str, str] = {}
    for name, entry in layout.entries.items():
        count = int(np.prod(entry.shape, dtype=np.int64))
        offset = start + entry.begin
        if entry.dtype == "BF16":
            bits = np.frombuffer(data, dtype="<u2", count=count, offset=offset)
            value = (bits.astype(np.uint32) << 16).view(np.float32)
        elif entry.dtype in _NUMPY_DTYPES:
            stored = _NUMPY_DTYPES[entry.dtype]
            value = np.frombuffer(data, dtype=stored, count=count, offset=offset)
        else:
            raise UpstreamTensorError(
                f"{source}: entry {name!r} has dtype {entry.dtype}, which no Lattice runtime "
                "reads; store it as F32, F16 or BF16"
            )
        # a native-order, writable copy: runtimes may hand it to torch.from_numpy
        arrays[name] = value.astype(value.dtype.newbyteorder("="), copy=True).reshape(entry.shape)
        dtypes[name] = DTYPE_NAMES.get(entry.dtype, entry.dtype.lower())
    return TensorFile(arrays, dtypes, dict(layout.metadata))


def rename_entries(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], renamed: dict[str, str]
) -> None:
    """Copy ``src`` to ``dst`` with entries renamed by ``renamed``; bytes and metadata kept.

    Every key of ``renamed`` must be an entry of ``src``, and no new name may
    collide with an entry kept under its own name.
    """
    source = Path(src)
    layout = _layout(source)
    missing = sorted(set(renamed) - set(layout.entries))
    if missing:
        raise UpstreamTensorError(
            f"{source} has no entr{'y' if len(missing) == 1 else 'ies'} "
            f"{', '.join(map(repr, missing))} for the renamed input(s), only "
            f"{', '.join(map(repr, layout.entries)) or 'none'}; the graph's lattice.input_names "
            "and the file disagree: fix the fixture"
        )
    new_names = [renamed.get(name, name) for name in layout.entries]
    clashes = sorted({n for n in new_names if new_names.count(n) > 1})
    if clashes:
        raise UpstreamTensorError(
            f"{source}: renaming the inputs would give two entries the name(s) "
            f"{', '.join(map(repr, clashes))}; remove the stale entries from the fixture"
        )
    header: dict[str, Any] = {}
    if layout.metadata:
        header["__metadata__"] = layout.metadata
    for name, entry in layout.entries.items():
        header[renamed.get(name, name)] = {
            "dtype": entry.dtype,
            "shape": list(entry.shape),
            "data_offsets": [entry.begin, entry.end],
        }
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # keep the data section 8-byte aligned, as writers do
    with open(source, "rb") as inp, open(dst, "xb") as out:
        out.write(len(text).to_bytes(8, "little"))
        out.write(text)
        inp.seek(layout.data_start)
        shutil.copyfileobj(inp, out, 1 << 20)

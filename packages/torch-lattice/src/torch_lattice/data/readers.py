"""Point-cloud file readers: PLY, ``.npy`` and the SemanticKITTI ``.bin`` + ``.label`` pair.

They return tensors directly, so ``torch_lattice`` needs neither NumPy nor
``plyfile`` (its dependencies are torch and safetensors).  Each format is
small enough to read from its definition:

* **PLY** (ASCII, binary little- and big-endian): the ``vertex`` element's
  scalar properties, each as one tensor.  Elements after ``vertex`` (faces)
  are ignored; a list-typed element *before* it is refused.
* **NPY** (format versions 1-3): one numeric array, C or Fortran order, no
  pickles and no structured dtypes.
* **SemanticKITTI**: ``sequences/<NN>/velodyne/<frame>.bin`` holds float32
  ``(x, y, z, remission)`` per point; ``sequences/<NN>/labels/<frame>.label``
  holds one uint32 per point, the semantic class in the low 16 bits and the
  instance id in the high 16.

All binary payloads are little-endian unless a format says otherwise, and
are byte-swapped on a big-endian host.  Every reader raises ``ValueError``
naming the file and the problem on a malformed file, never a bare struct or
index error.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple

import torch
from lattice_contract.artifact import atomic_write_file, open_regular_file

from torch_lattice.data.ply import read_ply

__all__ = [
    "PointCloud",
    "read_npy",
    "read_ply",
    "read_point_cloud",
    "read_semantic_kitti",
    "semantic_kitti_paths",
    "write_semantic_kitti",
]

PathLike = str | os.PathLike[str]

_NPY_KINDS: dict[str, torch.dtype] = {
    "f2": torch.float16,
    "f4": torch.float32,
    "f8": torch.float64,
    "i1": torch.int8,
    "i2": torch.int16,
    "i4": torch.int32,
    "i8": torch.int64,
    "u1": torch.uint8,
    "b1": torch.bool,
}
_NPY_UNSIGNED: dict[str, tuple[torch.dtype, int]] = {
    "u2": (torch.int16, 16),
    "u4": (torch.int32, 32),
}

_LABEL_NAMES = ("label", "class", "semantic", "scalar_label")


class PointCloud(NamedTuple):
    """One scan: float32 ``points (P, 3)``, optional ``features (P, C)``, int64 ``labels (P,)``."""

    points: torch.Tensor
    features: torch.Tensor | None = None
    labels: torch.Tensor | None = None


def _widen_unsigned(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Signed storage of an unsigned field read as its true value (int32/int64)."""
    wide = torch.int32 if bits == 16 else torch.int64
    return values.to(wide) & ((1 << bits) - 1)


def _columns(raw: torch.Tensor, width: int, little: bool) -> torch.Tensor:
    """``raw`` uint8 (N, width) with the byte order fixed to the host's."""
    if little != (sys.byteorder == "little"):
        raw = raw.flip(1)
    return raw.contiguous()


def _from_bytes(data: bytes, dtype: torch.dtype, little: bool = True) -> torch.Tensor:
    """A 1-D tensor of ``dtype`` over ``data`` (copied, so it owns writable memory)."""
    width = torch.empty((), dtype=dtype).element_size()
    if not data:  # torch.frombuffer refuses an empty buffer
        return torch.empty(0, dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    if width == 1:
        return raw.view(dtype).clone()
    return _columns(raw.view(-1, width), width, little).view(dtype).reshape(-1)


def _read_regular(path: Path, what: str) -> bytes:
    """The bytes of a regular file, exactly its size: a FIFO or ``/dev/zero`` is refused.

    A scan path that is a FIFO would block forever and one linked to
    ``/dev/zero`` would read until memory runs out; both are refused by
    :func:`~lattice_contract.artifact.open_regular_file`, which judges the
    opened file, not its name.
    """
    with open_regular_file(path, what=what) as handle:
        return handle.read(os.fstat(handle.fileno()).st_size)


# --------------------------------------------------------------------------- NPY

_NPY_MAX_HEADER = 10_000
"""Largest ``.npy`` header read (bytes): NumPy's own default ``max_header_size``."""

_NPY_ENTRY = re.compile(
    r"\s*'(descr|fortran_order|shape)'\s*:\s*"
    r"('[^'\\]{0,64}'|True|False|\(\s*(?:-?\d{1,19}\s*,\s*)*(?:-?\d{1,19}\s*)?\))"
    r"\s*(?:,|(?=\}))"
)
"""One entry of the header dict as ``numpy.lib.format`` writes it (its ``repr``)."""


def _npy_header(source: Path, text: str) -> tuple[str, bool, tuple[int, ...]]:
    """``descr``, ``fortran_order`` and ``shape`` of a ``.npy`` header, read by its grammar.

    The header is a Python dict literal, but evaluating it (``ast.literal_eval``)
    lets a hostile file raise ``RecursionError`` or ``MemoryError`` (a few
    thousand unary minus signs); the three entries NumPy writes have a tiny
    grammar, so they are matched instead and anything else is refused.
    """
    body = text.rstrip(" \n\x00")
    entries: dict[str, str] = {}
    at = 1
    if body.startswith("{") and body.endswith("}"):
        while at < len(body) - 1 and (found := _NPY_ENTRY.match(body, at)) is not None:
            if found.group(1) in entries:
                break
            entries[found.group(1)] = found.group(2)
            at = found.end()
        at += len(body[at:-1]) - len(body[at:-1].lstrip())
    if at != len(body) - 1 or set(entries) != {"descr", "fortran_order", "shape"}:
        raise ValueError(
            f"{source}: unreadable .npy header {text[:80]!r} (a dict of 'descr', "
            "'fortran_order' and 'shape', as numpy.save writes it)"
        )
    if not entries["descr"].startswith("'"):
        raise ValueError(f"{source}: .npy descr {entries['descr']!r} is not a dtype string")
    if entries["fortran_order"] not in ("True", "False"):
        raise ValueError(f"{source}: .npy fortran_order must be True or False")
    shape = tuple(int(v) for v in re.findall(r"-?\d+", entries["shape"]))
    return entries["descr"][1:-1], entries["fortran_order"] == "True", shape


def read_npy(path: PathLike) -> torch.Tensor:
    """A ``.npy`` file's array as a tensor (numeric dtypes; never unpickles)."""
    source = Path(path)
    data = _read_regular(source, ".npy file")
    if not data.startswith(b"\x93NUMPY") or len(data) < 10:
        raise ValueError(f"{source}: not a .npy file (bad magic)")
    major = data[6]
    if major == 1:
        size, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3):
        size, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise ValueError(f"{source}: unsupported .npy format version {major}")
    if size > _NPY_MAX_HEADER:
        raise ValueError(
            f"{source}: .npy header of {size} bytes, over the {_NPY_MAX_HEADER}-byte limit "
            "NumPy itself reads by default"
        )
    descr, fortran, shape = _npy_header(source, data[start : start + size].decode("latin1"))
    if not isinstance(descr, str) or len(descr) < 3 or descr[0] not in "<>|=":
        raise ValueError(
            f"{source}: dtype {descr!r} is not a plain numeric array (structured or object "
            "arrays are not read)"
        )
    little = descr[0] != ">"
    kind = descr[1:]
    if kind in _NPY_KINDS:
        dtype, bits = _NPY_KINDS[kind], 0
    elif kind in _NPY_UNSIGNED:
        dtype, bits = _NPY_UNSIGNED[kind]
    else:
        raise ValueError(f"{source}: unsupported .npy dtype {descr!r}")
    if not all(0 <= dim < 1 << 63 for dim in shape):
        raise ValueError(
            f"{source}: .npy shape {shape} must hold non-negative integers below 2**63"
        )
    count = 1
    for dim in shape:
        count *= dim
    width = torch.empty((), dtype=dtype).element_size()
    payload = data[start + size :]
    if len(payload) < count * width:
        raise ValueError(f"{source}: truncated .npy payload for shape {shape} of {descr}")
    flat = _from_bytes(payload[: count * width], dtype, little)
    if bits:
        flat = _widen_unsigned(flat, bits)
    if fortran and len(shape) > 1:  # a 0-d or 1-d array is the same in either order
        return (
            flat.reshape(tuple(reversed(shape))).permute(*reversed(range(len(shape)))).contiguous()
        )
    return flat.reshape(shape)


# --------------------------------------------------------------------------- SemanticKITTI


def semantic_kitti_paths(root: PathLike, sequence: int | str, frame: int) -> tuple[Path, Path]:
    """``(velodyne .bin, labels .label)`` paths of one frame under the dataset root."""
    seq = f"{int(sequence):02d}"
    base = Path(root) / "sequences" / seq
    return base / "velodyne" / f"{frame:06d}.bin", base / "labels" / f"{frame:06d}.label"


def read_semantic_kitti(
    scan: PathLike, label: PathLike | None = None
) -> tuple[PointCloud, torch.Tensor | None]:
    """One SemanticKITTI scan: ``(PointCloud, instance ids or None)``.

    ``points`` are the float32 x, y, z; ``features`` the ``(P, 1)``
    remission; ``labels`` the raw semantic ids (low 16 bits of the
    ``.label`` words, int64).  Map raw ids to training classes with the
    dataset's ``learning_map`` (see ``SemanticKITTIScans``).
    """
    scan_path = Path(scan)
    raw = _read_regular(scan_path, "SemanticKITTI scan")
    if len(raw) % 16:
        raise ValueError(
            f"{scan_path}: {len(raw)} bytes is not a whole number of (x, y, z, remission) "
            "float32 records"
        )
    values = _from_bytes(raw, torch.float32).view(-1, 4)
    cloud = PointCloud(values[:, :3].contiguous(), values[:, 3:].contiguous())
    if label is None:
        return cloud, None
    label_path = Path(label)
    words = _read_regular(label_path, "SemanticKITTI label file")
    if len(words) != 4 * values.shape[0]:
        raise ValueError(
            f"{label_path}: {len(words) // 4} labels for {values.shape[0]} points in {scan_path}"
        )
    full = _widen_unsigned(_from_bytes(words, torch.int32), 32)
    return cloud._replace(labels=full & 0xFFFF), full >> 16


def write_semantic_kitti(
    root: PathLike,
    sequence: int | str,
    frame: int,
    points: torch.Tensor,
    remission: torch.Tensor,
    labels: torch.Tensor | None = None,
    instances: torch.Tensor | None = None,
) -> tuple[Path, Path | None]:
    """Write one frame in the SemanticKITTI layout (for samples and tests); returns its paths.

    All checks run before anything is written; each file is replaced
    atomically, the ``.label`` before the ``.bin``.
    """
    if points.ndim != 2 or points.shape[1] != 3 or remission.shape != (points.shape[0],):
        raise ValueError("points must be (P, 3) and remission (P,)")
    scan, label = semantic_kitti_paths(root, sequence, frame)
    scan.parent.mkdir(parents=True, exist_ok=True)
    record = torch.cat([points.to(torch.float32), remission.to(torch.float32)[:, None]], dim=1)
    if labels is None:
        _write_bytes(scan, _host_to_little(record.contiguous()))
        return scan, None
    if labels.shape != (points.shape[0],):
        raise ValueError("labels must be (P,), one per point")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) > 0xFFFF):
        raise ValueError(
            "SemanticKITTI stores semantic labels in 16 bits: labels must lie in [0, 65535]"
        )
    inst = torch.zeros_like(labels) if instances is None else instances
    if inst.shape != labels.shape or (
        inst.numel() and (int(inst.min()) < 0 or int(inst.max()) > 0xFFFF)
    ):
        raise ValueError(
            "instances must be (P,), one per point, in [0, 65535]: SemanticKITTI stores them "
            "in the high 16 bits of each label word"
        )
    word = (inst.to(torch.int64) << 16) | (labels.to(torch.int64) & 0xFFFF)
    signed = torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)
    label.parent.mkdir(parents=True, exist_ok=True)
    # Each file complete or untouched (lattice_contract.artifact.atomic), labels first: a
    # new frame interrupted between the two has labels but no scan, which no
    # reader lists (they walk the scans).
    _write_bytes(label, _host_to_little(signed))
    _write_bytes(scan, _host_to_little(record.contiguous()))
    return scan, label


def _write_bytes(path: Path, data: bytes) -> None:
    atomic_write_file(path, lambda tmp: tmp.write_bytes(data))


def _host_to_little(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().cpu().reshape(-1).contiguous()
    width = flat.element_size()
    if width > 1:
        flat = _columns(flat.view(torch.uint8).view(-1, width), width, True).reshape(-1)
    return ctypes.string_at(flat.data_ptr(), flat.numel() * flat.element_size())


# --------------------------------------------------------------------------- any file


def read_point_cloud(path: PathLike) -> PointCloud:
    """A ``.ply``, ``.npy`` or SemanticKITTI ``.bin`` file as a :class:`PointCloud`.

    PLY: ``x, y, z`` are the points, a ``label``/``class``/``semantic``
    property the labels, the other numeric properties (colour, intensity,
    normals) the features in file order.  NPY: an ``(P, 3+C)`` array, the
    first three columns the points and the rest the features.  ``.bin``: the
    SemanticKITTI scan, with its ``../labels/<frame>.label`` when it exists.
    """
    source = Path(path)
    suffix = source.suffix.lower()
    if suffix == ".ply":
        props = read_ply(source)
        missing = [axis for axis in "xyz" if axis not in props]
        if missing:
            raise ValueError(f"{source}: the vertex element has no {'/'.join(missing)} property")
        points = torch.stack([props[a].to(torch.float32) for a in "xyz"], dim=1)
        labels = next((props[n].to(torch.int64) for n in _LABEL_NAMES if n in props), None)
        rest = [n for n in props if n not in ("x", "y", "z", *_LABEL_NAMES)]
        features = torch.stack([props[n].to(torch.float32) for n in rest], dim=1) if rest else None
        return PointCloud(points, features, labels)
    if suffix == ".npy":
        array = read_npy(source)
        if array.ndim != 2 or array.shape[1] < 3:
            raise ValueError(f"{source}: expected a (P, 3+C) array, got shape {tuple(array.shape)}")
        array = array.to(torch.float32)
        features = array[:, 3:].contiguous() if array.shape[1] > 3 else None
        return PointCloud(array[:, :3].contiguous(), features)
    if suffix == ".bin":
        label = source.parent.parent / "labels" / (source.stem + ".label")
        cloud, _ = read_semantic_kitti(source, label if label.is_file() else None)
        return cloud
    raise ValueError(f"{source}: point clouds must be .ply, .npy or SemanticKITTI .bin files")

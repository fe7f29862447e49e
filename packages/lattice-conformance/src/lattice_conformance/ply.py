"""Point clouds in PLY files: positions as a NumPy array, and a writer.

Only what a geometry runner needs: the ``x``, ``y``, ``z`` properties of the
``vertex`` element, as a float64 ``(P, 3)`` NumPy array.  Parsing is the
project's one PLY reader, :func:`torch_lattice.data.read_ply` (ASCII, binary
little and big endian, every scalar property type, its bounds on declared
counts against the file's size); this module turns its ``ValueError`` into
:class:`PlyFormatError` and checks that the positions are there.  Writing is
``plyfile``'s, for the clouds the examples ship.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from lattice_contract.artifact import atomic_write_file
from plyfile import PlyData, PlyElement
from torch_lattice.data import read_ply as read_ply_properties

__all__ = ["PlyFormatError", "read_ply", "write_ply"]

Encoding = Literal["binary_little_endian", "binary_big_endian", "ascii"]


class PlyFormatError(ValueError):
    """The file is not a PLY point cloud this reader understands (the message says why)."""


def read_ply(path: str | os.PathLike[str]) -> np.ndarray:
    """The vertex positions of a PLY file: float64 ``(P, 3)`` in file order.

    Raises :class:`FileNotFoundError` for a missing file and
    :class:`PlyFormatError` when the file is not PLY, is truncated, has no
    ``vertex`` element, or lacks one of ``x``, ``y``, ``z``.  Other vertex
    properties (colours, normals) and elements after ``vertex`` (faces) are
    ignored.
    """
    file = Path(path)
    if not file.exists():  # a FIFO or a device is named by the reader, which opens files only
        raise FileNotFoundError(f"PLY file {str(file)!r} does not exist")
    try:
        props = read_ply_properties(file)
    except ValueError as exc:
        why = str(exc).removeprefix(f"{file}: ")  # the reader names the file too
        raise PlyFormatError(f"{file}: not a readable PLY file ({why})") from None
    missing = [axis for axis in ("x", "y", "z") if axis not in props]
    if missing:
        raise PlyFormatError(
            f"{file}: the vertex element lacks {', '.join(missing)} (properties: {list(props)}); "
            "positions must be the x, y and z properties"
        )
    return torch.stack([props[axis].to(torch.float64) for axis in ("x", "y", "z")], dim=1).numpy()


def write_ply(
    path: str | os.PathLike[str],
    points: np.ndarray,
    *,
    encoding: Encoding = "binary_little_endian",
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> None:
    """Write ``points`` ``(P, 3)`` as PLY vertices ``x``, ``y``, ``z`` (their dtype kept).

    ``encoding`` is ``binary_little_endian`` (default), ``binary_big_endian``
    or ``ascii``.  Integer or float points are written with their own dtype
    (float32 is a good default for voxelised clouds).  The file is written
    under a temporary name and renamed, so a failure leaves no partial file;
    ``inputs`` (what the caller read) are never replaced.
    """
    arr = np.asarray(points)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"points must have shape (P, 3), got {arr.shape}")
    if arr.dtype.kind not in "iuf" or arr.dtype.itemsize > 8:
        raise TypeError(f"points must be an integer or float array, got {arr.dtype}")
    order: Literal["<", ">"] = ">" if encoding == "binary_big_endian" else "<"
    base = arr.dtype.newbyteorder(order) if arr.dtype.itemsize > 1 else arr.dtype
    record = np.empty(arr.shape[0], dtype=[("x", base), ("y", base), ("z", base)])
    record["x"], record["y"], record["z"] = arr[:, 0], arr[:, 1], arr[:, 2]
    element = PlyElement.describe(record, "vertex")
    ply = PlyData([element], text=encoding == "ascii", byte_order=order)
    atomic_write_file(path, lambda tmp: ply.write(str(tmp)), inputs=inputs)

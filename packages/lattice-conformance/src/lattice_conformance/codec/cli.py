"""``conformance geometry-codec encode|decode``: PLY -> coded file -> PLY, losslessly.

Usage::

    conformance geometry-codec encode --input cloud.ply --output cloud.lgc --levels 10
        [--model examples/geometry/model.lattice] [--runtime torch|mlx] [--cross-check]
        [--report report.json]
    conformance geometry-codec decode --input cloud.lgc --output back.ply
        [--model examples/geometry/model.lattice] [--runtime torch|mlx]

A cloud already holding integer coordinates inside the ``2^L`` grid is coded
as is; any other is scaled uniformly into the grid first (the same fit as
``geometry-profile``), and the file then holds the quantised voxels.  Encode
prints bits per occupied voxel next to LZMA (xz -9e) of the octree stream, its
order-0 entropy and Draco (when DracoPy is installed), and the wall times.
Exit status: 0 on success, 2 on bad input (the message says why).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lattice_contract.artifact import (
    OutputClashError,
    WriterLockedError,
    atomic_write_file,
    check_outputs,
    printable,
    read_regular_file,
)
from lattice_contract.runtime import ProgramCallError

from lattice_conformance.codec.baselines import codec_measurement, format_bits_per_voxel
from lattice_conformance.codec.codec import decode_voxels
from lattice_conformance.codec.format import CodecFormatError
from lattice_conformance.codec.neural import NeuralModel
from lattice_conformance.ply import PlyFormatError, read_ply, write_ply

PROG = "conformance geometry-codec"
MAX_CODED_BYTES = 1 << 30
"""Largest coded file ``decode`` reads (far above any cloud a 2^16 grid codes to)."""


class _Fail(Exception):
    pass


def _voxels(points: np.ndarray, levels: int) -> np.ndarray:
    side = float(1 << levels)
    if len(points) == 0:
        return np.zeros((0, 3), np.int64)
    if not np.all(np.isfinite(points)):
        raise _Fail("the cloud holds NaN or infinite coordinates")
    if np.all((points >= 0) & (points < side)) and np.all(points == np.floor(points)):
        return points.astype(np.int64)
    import torch
    from torch_lattice.occupancy import quantize_points

    coords = quantize_points(torch.from_numpy(np.ascontiguousarray(points)), levels, fit=True)
    return coords[:, 1:].numpy().astype(np.int64)


def _model(args: argparse.Namespace) -> NeuralModel | None:
    if args.model is None:
        return None
    try:
        return NeuralModel(args.model, args.runtime)
    except (FileNotFoundError, ValueError) as exc:
        raise _Fail(str(exc)) from None


def _write(path: Path, data: bytes, inputs: list[Path]) -> None:
    try:
        atomic_write_file(path, lambda tmp: tmp.write_bytes(data), inputs=inputs)
    except (OSError, ValueError, WriterLockedError) as exc:
        raise _Fail(f"cannot write {str(path)!r}: {exc}") from None


def _check_paths(args: argparse.Namespace) -> list[Path]:
    """The command's inputs; refuses an output that is one of them, or another output."""
    inputs = [args.input] + ([args.model] if args.model is not None else [])
    outputs = [args.output] + ([args.report] if args.report is not None else [])
    try:
        check_outputs(outputs, inputs)
    except OutputClashError as exc:
        raise _Fail(str(exc)) from None
    return inputs


def _encode(args: argparse.Namespace) -> dict[str, Any]:
    if not 1 <= args.levels <= 16:
        raise _Fail(f"--levels must be in [1, 16], got {args.levels}")
    try:
        points = read_ply(args.input)
    except (FileNotFoundError, PlyFormatError) as exc:
        raise _Fail(str(exc)) from None
    vox = np.unique(_voxels(points, args.levels), axis=0)
    model = _model(args)
    other = None
    if args.cross_check:
        if model is None:
            raise _Fail("--cross-check needs --model")
        try:
            other = NeuralModel(args.model, "mlx" if args.runtime == "torch" else "torch")
        except (FileNotFoundError, ValueError) as exc:
            raise _Fail(str(exc)) from None
    # One implementation of the comparison for both commands: encode, decode
    # (checked, so a file is only written once it is known to decode), the
    # baselines on the same voxel set, the wall times.
    try:
        measured = codec_measurement(vox, args.levels, model, cross_check=other)
    except ProgramCallError as exc:  # the artifact does not take the codec's inputs
        raise _Fail(f"the model artifact {printable(args.model)} cannot run here: {exc}") from None
    data = measured.pop("data")
    _write(args.output, data, _check_paths(args))
    measured.update(
        input=str(args.input),
        output=str(args.output),
        levels=args.levels,
        runtime=args.runtime if model is not None else None,
        torch_threads=1,
    )
    print(
        f"{printable(args.input)} -> {printable(args.output)}: {len(vox)} voxels at level "
        f"{args.levels}, "
        f"{len(data)} bytes ({measured['mode']}; levels: {' '.join(measured['methods'])})\n"
        + format_bits_per_voxel(measured)
    )
    return measured


def _decode(args: argparse.Namespace) -> dict[str, Any]:
    try:  # a regular file only: a FIFO blocked, /dev/zero was read until memory ran out
        data = read_regular_file(args.input, MAX_CODED_BYTES, what="coded file")
    except (OSError, ValueError) as exc:
        raise _Fail(f"cannot read {str(args.input)!r}: {exc}") from None
    model = _model(args)
    start = time.perf_counter()
    try:
        vox, levels = decode_voxels(data, model)
    except CodecFormatError as exc:
        raise _Fail(f"{args.input}: {exc}") from None
    except ProgramCallError as exc:
        raise _Fail(f"the model artifact {printable(args.model)} cannot run here: {exc}") from None
    dec_s = time.perf_counter() - start
    try:
        write_ply(args.output, vox.astype(np.float32), inputs=_check_paths(args))
    except (OSError, ValueError, WriterLockedError) as exc:
        raise _Fail(f"cannot write {str(args.output)!r}: {exc}") from None
    print(
        f"{printable(args.input)} -> {printable(args.output)}: {len(vox)} voxels at level "
        f"{levels}; decode "
        f"{dec_s:.2f} s ({len(vox) / max(dec_s, 1e-9):.0f} voxels/s)"
    )
    return {"voxels": len(vox), "levels": levels, "decode_s": dec_s}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Lossless voxel-cloud geometry codec.")
    sub = parser.add_subparsers(dest="command", required=True)
    enc = sub.add_parser("encode", help="PLY point cloud -> coded file")
    enc.add_argument("--input", required=True, type=Path, help="point cloud (.ply)")
    enc.add_argument("--output", required=True, type=Path, help="coded file to write")
    enc.add_argument("--levels", type=int, default=8, help="grid depth L (2^L per axis)")
    enc.add_argument(
        "--cross-check",
        action="store_true",
        help="also run the other runtime and verify its logits are identical (the integer "
        "model guarantees it; a check, no longer needed for cross-runtime decoding)",
    )
    enc.add_argument("--report", type=Path, help="write a JSON report here")
    dec = sub.add_parser("decode", help="coded file -> PLY point cloud (float32 x, y, z)")
    dec.add_argument("--input", required=True, type=Path, help="coded file")
    dec.add_argument("--output", required=True, type=Path, help="PLY file to write")
    dec.add_argument("--report", type=Path, help="write a JSON report here")
    for p in (enc, dec):
        p.add_argument("--model", type=Path, help="geometry model artifact directory")
        p.add_argument("--runtime", choices=("torch", "mlx"), default="torch")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``conformance geometry-codec``."""
    try:
        args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    try:
        inputs = _check_paths(args)  # before the (slow) coding
        report = _encode(args) if args.command == "encode" else _decode(args)
        if args.report is not None:
            _write(args.report, (json.dumps(report, indent=2) + "\n").encode(), inputs)
    except _Fail as exc:
        logging.getLogger(__name__).error("%s: error: %s", PROG, exc)
        return 2
    return 0

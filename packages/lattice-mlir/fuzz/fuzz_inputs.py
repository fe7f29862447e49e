"""Coverage-guided fuzzing of what users hand the project: artifacts, point clouds, checkpoints.

One Atheris (libFuzzer) harness, several targets (``--target``):

* ``artifact``: an input is a graph and a weight file together (see
  :func:`split`); they are written as a bundle, loaded and compiled on both
  runtimes (MLX and torch) and called once with a small input built from
  the entry's declared ABI;
* ``ply``, ``npy``, ``kitti``: an input is a file for
  ``torch_lattice.data.read_ply`` / ``read_npy`` / ``read_semantic_kitti``
  (for SemanticKITTI, a scan and a label file);
* ``convert``: an input is a kernel spec and a checkpoint (``.pt`` or
  ``.safetensors``) for ``convert-checkpoint``, converted into a scratch
  directory.

A run fails on a crash (a signal), an exception other than the target's
documented refusals (``ValueError`` and the contract's own error types), an
input slower than one second per megabyte plus a fixed allowance (process
CPU time, best of three), or resident memory growing by more than
``--leak-mb`` after the first executions.  At the end it prints the number
of executions, the peak resident memory and the slowest input per byte.

    python packages/lattice-mlir/fuzz/fuzz_inputs.py --target ply --workdir /tmp/fz --runs 100000
"""

from __future__ import annotations

import argparse
import atexit
import io
import json
import os
import re
import resource
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports(include=["lattice_contract", "torch_lattice", "mlx_lattice"]):
    import lattice_contract.artifact
    import lattice_contract.plan
    import mlx_lattice.artifact as mla
    import torch_lattice.artifact as tla
    from lattice_contract.builder import MLIRModuleBuilder
    from lattice_contract.dialect import GRAPH_FILE, WEIGHT_FILE
    from torch_lattice.convert import convert_checkpoint
    from torch_lattice.data import read_npy, read_ply, read_semantic_kitti

import mlx.core as mx
import numpy as np
import safetensors.numpy as stn
import torch

REGRESSIONS = Path(__file__).resolve().parent / "regressions-inputs"
"""Inputs that once failed a run, one folder per target; every run starts from them."""

CALL_ALLOWANCE_S = {"artifact": 2.0, "convert": 1.0}
"""Fixed CPU allowance per call, on top of one second per megabyte (default 0.2 s)."""

REPORT_EVERY_S = 30.0
"""Seconds between progress lines at most: a run ended by ``-max_total_time`` (libFuzzer exits
without returning) still ends with counts at most this old."""

SCRATCH = Path(tempfile.mkdtemp(prefix="lattice-fuzz-"))
atexit.register(lambda: __import__("shutil").rmtree(SCRATCH, ignore_errors=True))


class FuzzFailure(Exception):
    """An input broke one of the fuzzer's rules (libFuzzer saves it as a crash)."""


def split(data: bytes) -> tuple[bytes, bytes]:
    """Two files from one input: a little-endian u32 length, the first file, the second."""
    if len(data) < 4:
        return data, b""
    (size,) = struct.unpack("<I", data[:4])
    size = min(size, len(data) - 4)
    return data[4 : 4 + size], data[4 + size :]


def join(first: bytes, second: bytes) -> bytes:
    """The inverse of :func:`split` (seeds are written with it)."""
    return struct.pack("<I", len(first)) + first + second


# --------------------------------------------------------------------------- targets

REFUSALS: tuple[type[BaseException], ...] = (
    ValueError,  # every reader's refusal; ConversionError, BundleError, PlanError ... derive
    lattice_contract.plan.PlanError,
    lattice_contract.plan.LatticeValidationError,
)


def _write(name: str, data: bytes) -> Path:
    path = SCRATCH / name
    path.write_bytes(data)
    return path


def target_ply(data: bytes) -> None:
    read_ply(_write("in.ply", data))


def target_npy(data: bytes) -> None:
    read_npy(_write("in.npy", data))


def target_kitti(data: bytes) -> None:
    scan, label = split(data)
    read_semantic_kitti(_write("scan.bin", scan), _write("scan.label", label) if label else None)


def target_convert(data: bytes) -> None:
    spec, checkpoint = split(data)
    suffix = ".safetensors" if checkpoint[8:9] == b"{" else ".pt"
    src = _write("ckpt" + suffix, checkpoint)
    spec_path = _write("spec.json", spec)
    out = SCRATCH / "out" / "w.safetensors"
    out.parent.mkdir(exist_ok=True)
    convert_checkpoint(src, out, spec_path)


ROWS = 3
"""Rows of every input of the first call (voxels (0, i, i, i), feature rows)."""


def _abi_inputs(program: Any, runtime: str) -> dict[str, Any]:
    """A small array for each ABI argument: three voxels, or three rows of a dense tensor."""
    rng = np.random.default_rng(0)
    values: dict[str, Any] = {}
    plan = program.plan
    for arg in plan.args:
        info = plan.type_info(arg.type)
        shape = [ROWS if d < 0 else min(d, 64) for d in (info.shape or ())]
        if arg.role == "sparse_coords":
            line = np.arange(ROWS, dtype=np.int32)[:, None]
            values[arg.abi_name] = np.concatenate([np.zeros_like(line), line, line, line], 1)
        elif arg.role == "sparse_active":
            values[arg.abi_name] = np.array([ROWS], np.int32)
        else:
            dtype = {"f32": np.float32, "f16": np.float16, "i32": np.int32}.get(info.dtype)
            if dtype is None:
                return {}
            values[arg.abi_name] = rng.standard_normal(shape).astype(dtype)
    if runtime == "mlx":
        return {k: mx.array(v) for k, v in values.items()}
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in values.items()}


_KEY_LINE = re.compile(rb'storage_key = "([^"]{1,64})"')
_DTYPES = (np.float32, np.float16, np.uint32, np.int32)


def weights_for(graph: bytes, provider: atheris.FuzzedDataProvider) -> bytes:
    """A well-formed weight file for the graph's storage keys, shapes and values fuzzed.

    Hostile headers are the contract's own table; this target aims past them,
    at weights that disagree with the graph (empty, wider or narrower,
    non-finite, packed triplets that do not fit).  Each key (and a packed
    key's ``.weight``/``.scales``/``.biases``) gets a dtype, a rank of 1-5,
    extents of 0-9 and raw bytes drawn from the input.
    """
    keys: list[str] = []
    for line in graph.splitlines():
        for found in _KEY_LINE.finditer(line):
            key = found.group(1).decode("utf-8", "replace")
            packed = b"#lattice.packing<" in line and b"dense" not in line
            parts = ("weight", "scales", "biases")
            keys += [f"{key}.{part}" for part in parts] if packed else [key]
    arrays: dict[str, np.ndarray] = {}
    for key in keys:
        dtype = _DTYPES[provider.ConsumeIntInRange(0, len(_DTYPES) - 1)]
        shape = [provider.ConsumeIntInRange(0, 9) for _ in range(provider.ConsumeIntInRange(1, 5))]
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        raw = provider.ConsumeBytes(size).ljust(size, b"\0")
        arrays[key] = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    return stn.save(arrays)


def target_artifact(data: bytes) -> None:
    graph, rest = split(data)
    root = SCRATCH / "m.lattice"
    root.mkdir(exist_ok=True)
    (root / GRAPH_FILE).write_bytes(graph)
    # "ST" + a literal weight file (the seeds: they reach calls), else drawn from the bytes
    literal = rest.startswith(b"ST")
    weights = rest[2:] if literal else weights_for(graph, atheris.FuzzedDataProvider(rest))
    (root / WEIGHT_FILE).write_bytes(weights)
    for runtime, module in (("mlx", mla), ("torch", tla)):
        program = module.load_lattice_program(root)
        inputs = _abi_inputs(program, runtime)
        if inputs:
            program(**inputs)
            OUTCOMES["called " + runtime] = OUTCOMES.get("called " + runtime, 0) + 1
        else:
            OUTCOMES["loaded " + runtime] = OUTCOMES.get("loaded " + runtime, 0) + 1


OUTCOMES: dict[str, int] = {}
"""How far inputs got: refusals by error type, and for artifacts the loads and calls."""

TARGETS: dict[str, Callable[[bytes], None]] = {
    "artifact": target_artifact,
    "convert": target_convert,
    "kitti": target_kitti,
    "npy": target_npy,
    "ply": target_ply,
}


# --------------------------------------------------------------------------- seeds


def _ply_seed(fmt: str) -> bytes:
    head = f"ply\nformat {fmt} 1.0\ncomment seed\nelement vertex 2\n"
    head += "property float x\nproperty float y\nproperty float z\nproperty uchar red\n"
    head += "element face 0\nproperty list uchar int vertex_indices\nend_header\n"
    if fmt == "ascii":
        return (head + "0.5 1 2 3\n-1 2.5 4 255\n").encode()
    end = "<" if fmt == "binary_little_endian" else ">"
    return head.encode() + struct.pack(f"{end}3fB3fB", 0.5, 1, 2, 3, -1, 2.5, 4, 255)


def _npy_seed(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _bundle_seeds() -> Iterator[bytes]:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(2, 3, 3, 3, 4))
    bias = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(2,))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, bias=bias, kernel_size=3))
    conv = {"w": np.ones((2, 3, 3, 3, 4), np.float32), "b": np.zeros(2, np.float32)}
    yield join(b.build().encode(), b"ST" + stn.save(conv))
    yield join(b.build().encode(), bytes(range(256)) * 4)
    b = MLIRModuleBuilder()
    x = b.add_input("x", "tensor<?x32xf16>")
    packing = {"bits": "int4", "group_size": 32, "scale_dtype": "f16", "mode": "affine"}
    w = b.weight(storage_key="h", layout="linear_o_i", shape=(2, 32), packing=packing)
    b.add_output("y", b.linear(input=x, weight=w))
    packed: dict[str, np.ndarray] = {
        "h.weight": np.full((1, 2, 4), 0x12345678, np.uint32),
        "h.scales": np.full((1, 2, 1), 0.5, np.float16),
        "h.biases": np.zeros((1, 2, 1), np.float16),
    }
    yield join(b.build().encode(), b"ST" + stn.save(packed))
    yield join(b.build().encode(), bytes(range(256)) * 4)


def _pt_bytes(state: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    torch.save(state, out)
    return out.getvalue()


def seeds(target: str) -> Iterator[bytes]:
    """Valid inputs of each target, built here (the fuzzer mutates from them)."""
    if target == "ply":
        yield from (_ply_seed(f) for f in ("ascii", "binary_little_endian", "binary_big_endian"))
    elif target == "npy":
        yield _npy_seed(np.arange(12, dtype="<f4").reshape(3, 4))
        yield _npy_seed(np.asfortranarray(np.arange(6, dtype=">u2").reshape(2, 3)))
    elif target == "kitti":
        scan = np.arange(32, dtype="<f4").tobytes()
        yield join(scan, (np.arange(8, dtype="<u4") * 65537).astype("<u4").tobytes())
    elif target == "convert":
        spec = {
            "format": "lattice-kernel-spec",
            "version": 2,
            "kernels": {"*.kernel": {"framework": "minkowski", "kernel_size": 3}},
            "rename": [["^net\\.(.*)$", "enc.\\1"]],
            "drop": ["*.num_batches_tracked"],
        }
        state = {"net.kernel": torch.ones(27, 2, 3), "net.bn.num_batches_tracked": torch.ones(())}
        yield join(json.dumps(spec).encode(), _pt_bytes(state))
        from safetensors.torch import save as save_torch

        yield join(json.dumps(spec).encode(), save_torch({"net.kernel": torch.ones(27, 2, 3)}))
    elif target == "artifact":
        yield from _bundle_seeds()


# --------------------------------------------------------------------------- the run


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Runner:
    """The libFuzzer callback: one input through the target, timed and leak-watched."""

    def __init__(self, target: str, leak_mb: float, runs: int, warmup: int = 200) -> None:
        self.name, self.run_one = target, TARGETS[target]
        self.allowance = CALL_ALLOWANCE_S.get(target, 0.2)
        self.leak_mb, self.warmup = leak_mb, warmup
        self.count = 0
        self.baseline: float | None = None
        self.slowest = (0.0, 0, 0.0)  # seconds per byte, size, seconds
        self.runs = runs  # libFuzzer ends the process with _exit: report at the last run
        self.reported = time.monotonic()  # and every 30 s, for runs ended by -max_total_time

    def _timed(self, data: bytes) -> float:
        start = time.process_time()
        try:
            self.run_one(data)
        except REFUSALS as exc:  # a verdict, not a failure
            kind = "refused " + type(exc).__name__
            OUTCOMES[kind] = OUTCOMES.get(kind, 0) + 1
        except RecursionError as exc:  # derives from RuntimeError: never a refusal
            raise FuzzFailure(f"RecursionError escaped: {exc}") from exc
        return time.process_time() - start

    def __call__(self, data: bytes) -> None:
        seconds = self._timed(data)
        budget = self.allowance + len(data) / 1e6
        if seconds > budget:
            seconds = min(seconds, *(self._timed(data) for _ in range(2)))
            if seconds > budget:
                raise FuzzFailure(
                    f"a {len(data)}-byte input took {seconds:.3f} s CPU, more than one second "
                    f"per megabyte plus {self.allowance} s"
                )
        per_byte = seconds / max(len(data), 64)  # tiny inputs are all fixed cost
        if per_byte > self.slowest[0]:
            self.slowest = (per_byte, len(data), seconds)
        self.count += 1
        if (
            self.count == self.runs
            or self.count % 10_000 == 0
            or time.monotonic() - self.reported > REPORT_EVERY_S
        ):
            self.report()
        if self.count == self.warmup:
            self.baseline = _rss_mb()
        elif self.baseline is not None and self.count % 500 == 0:
            grown = _rss_mb() - self.baseline
            if grown > self.leak_mb:
                raise FuzzFailure(
                    f"resident memory grew by {grown:.0f} MB over {self.count - self.warmup} "
                    f"executions (limit {self.leak_mb} MB): a leak"
                )

    def report(self) -> None:
        self.reported = time.monotonic()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        per_byte, size, seconds = self.slowest
        print(
            f"fuzz_inputs[{self.name}]: {self.count} executions, peak RSS {peak:.0f} MB, "
            f"slowest {per_byte * 1e6:.1f} us/byte ({size} bytes in {seconds * 1e3:.1f} ms); "
            + ", ".join(f"{k} {v}" for k, v in sorted(OUTCOMES.items())),
            file=sys.stderr,
            flush=True,
        )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=sorted(TARGETS), required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-len", type=int, default=65_536)
    parser.add_argument("--leak-mb", type=float, default=128.0)
    ours, libfuzzer = parser.parse_known_args(argv[1:])
    work: Path = ours.workdir / ours.target
    seed_dir, found, crashes = work / "seeds", work / "corpus", work / "crashes"
    for folder in (seed_dir, found, crashes):
        folder.mkdir(parents=True, exist_ok=True)
    for index, data in enumerate(seeds(ours.target)):
        (seed_dir / f"seed-{index}").write_bytes(data)
    for path in sorted((REGRESSIONS / ours.target).glob("*")):
        (seed_dir / f"regression-{path.name}").write_bytes(path.read_bytes())
    args = [
        argv[0],
        f"-runs={ours.runs}",
        f"-seed={ours.seed}",
        f"-max_len={ours.max_len}",
        f"-artifact_prefix={crashes}/",
        "-timeout=60",
        "-rss_limit_mb=6144",
        "-print_final_stats=1",
        *libfuzzer,
        str(found),
        str(seed_dir),
    ]
    atheris.Setup(args, Runner(ours.target, ours.leak_mb, ours.runs))
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

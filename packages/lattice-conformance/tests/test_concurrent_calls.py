"""Programs and the native importer under threads: eight callers at once, same answers.

A compiled program is shared by every thread of a server.  Each of eight
threads calls the same program (MLX and torch) with its own input, several
times, all released together by a barrier; every result must equal, bit for
bit, what a single-threaded call gives for that input.  The native
``verify`` / ``import_plan`` (which release the GIL and parse on a thread of
their own) are hammered the same way with valid, invalid and limit-breaking
texts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lattice_mlir
import mlx.core as mx
import mlx_lattice.artifact as mart
import numpy as np
import pytest
import torch
import torch_lattice.artifact as tart
from lattice_contract import MLIRModuleBuilder

THREADS = 8
ROUNDS = 3


def _graph() -> str:
    """sparse.make (stride 1) -> strided conv -> relu features -> subm conv: maps and gathers."""
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=1)
    w1 = b.weight(storage_key="w1", layout="conv3d_o_xyz_i", dtype="f32", shape=(8, 2, 2, 2, 4))
    w2 = b.weight(storage_key="w2", layout="conv3d_o_xyz_i", dtype="f32", shape=(8, 3, 3, 3, 8))
    y = b.conv3d(input=x, weight=w1, kernel_size=2, stride=2)
    z = b.subm_conv3d(input=y, weight=w2, kernel_size=3)
    b.add_output("z", z)
    return b.build()


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    return {
        "w1": rng.standard_normal((8, 2, 2, 2, 4)).astype(np.float32),
        "w2": rng.standard_normal((8, 3, 3, 3, 8)).astype(np.float32),
    }


def _input(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = 300 + 40 * seed
    flat = rng.choice(2 * 24**3, size=rows, replace=False)
    coords = np.stack(
        [flat // 24**3, (flat // 24**2) % 24, (flat // 24) % 24, flat % 24], axis=1
    ).astype(np.int32)
    feats = rng.standard_normal((rows, 4)).astype(np.float32)
    return coords, feats, np.array([rows], dtype=np.int32)


def _concurrently(work: Callable[[int], Any]) -> list[list[Any]]:
    """``work(i)`` ROUNDS times on each of THREADS threads released together."""
    barrier = threading.Barrier(THREADS)
    results: list[list[Any]] = [[] for _ in range(THREADS)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                results[i].append(work(i))
        except BaseException as error:  # reported below, with the thread's index
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert all(len(r) == ROUNDS for r in results)
    return results


def _rows(coords: np.ndarray, feats: np.ndarray) -> tuple[bytes, bytes]:
    """Result rows in a fixed order (by coordinate), as raw bytes: bitwise comparison."""
    order = np.lexsort(coords.T[::-1])
    return coords[order].tobytes(), feats[order].tobytes()


def _mlx_call(program: Any, i: int) -> tuple[bytes, bytes]:
    coords, feats, active = _input(i)
    out = program(mx.array(coords), mx.array(feats), mx.array(active))
    mx.eval(out.coords, out.feats)
    return _rows(np.array(out.coords), np.array(out.feats))


def _torch_call(program: Any, i: int) -> tuple[bytes, bytes]:
    coords, feats, active = _input(i)
    out = program(torch.from_numpy(coords), torch.from_numpy(feats), torch.from_numpy(active))
    return _rows(out.coords.numpy(), out.feats.numpy())


@pytest.mark.parametrize("runtime", ["mlx", "torch"])
def test_eight_threads_get_the_single_threaded_results(runtime: str) -> None:
    graph, weights = _graph(), _weights()
    if runtime == "mlx":
        artifact = mart.LatticeArtifact(graph, {k: mx.array(v) for k, v in weights.items()})
        program: Any = mart.compile_lattice_artifact(artifact)
        call = _mlx_call
    else:
        artifact_t = tart.LatticeArtifact(
            graph, {k: torch.from_numpy(v) for k, v in weights.items()}
        )
        program = tart.compile_lattice_artifact(artifact_t)
        call = _torch_call
    expected = [call(program, i) for i in range(THREADS)]
    assert len({e[0] for e in expected}) == THREADS  # every thread has its own input
    results = _concurrently(lambda i: call(program, i))
    for i, per_thread in enumerate(results):
        for got in per_thread:
            assert got == expected[i], f"thread {i} got another result than a lone call"


def _lit_corpus() -> list[str]:
    """The dialect's valid lit files, stamped with the built digest."""
    folder = Path(__file__).resolve().parents[2] / "lattice-mlir" / "test" / "valid"
    texts = []
    for path in sorted(folder.glob("*.mlir")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        body = "".join(line for line in lines if not line.startswith("//"))
        texts.append(body.replace("@SCHEMA_DIGEST@", lattice_mlir.SCHEMA_DIGEST))
    assert len(texts) > 10, folder
    return texts


def test_native_verify_and_import_from_eight_threads() -> None:
    texts = _lit_corpus()
    names = list(range(len(texts)))
    texts += [
        texts[0].replace("lattice.ir_version = 2", "lattice.ir_version = 7"),  # artifact rule
        texts[1][: len(texts[1]) // 2],  # parse error
        "module attributes {x = " + "[" * 5000 + "]" * 5000 + "} {}",  # the nesting limit
        "module attributes {x = " + "9" * 20000 + "} {}",  # the number limit
    ]
    expected = [lattice_mlir.verify(t) for t in texts]
    plans = {i: lattice_mlir.import_plan(t) for i, t in enumerate(texts) if expected[i].valid}
    assert len(plans) == len(names)

    def work(i: int) -> list[Any]:
        out: list[Any] = []
        for k in range(len(texts)):
            j = (k + i) % len(texts)  # every thread walks the texts from another start
            status = lattice_mlir.verify(texts[j])
            out.append((j, status.valid, status.diagnostics))
            if status.valid:
                out.append((j, lattice_mlir.import_plan(texts[j])))
        return out

    for per_thread in _concurrently(work):
        for calls in per_thread:
            for item in calls:
                if len(item) == 3:
                    j, valid, diagnostics = item
                    assert (valid, diagnostics) == (expected[j].valid, expected[j].diagnostics)
                else:
                    j, plan = item
                    assert plan == plans[j]

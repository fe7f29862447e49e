"""Saving an artifact onto a full disk is an ``OSError`` naming the file, and leaves nothing.

On both runtimes: the disk is simulated in a child process with
``RLIMIT_FSIZE`` (writes past 100 kB fail with ``EFBIG``, as they fail with
``ENOSPC`` on a full disk).  safetensors (torch) and ``mx.save_safetensors``
(MLX) used to let their own ``SafetensorError`` / ``RuntimeError`` escape.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD = """
import os, resource, signal, sys
from lattice_contract.builder import MLIRModuleBuilder
if sys.argv[2] == "mlx":
    import mlx.core as mx
    import mlx_lattice.artifact as runtime
    ones = mx.ones((256, 256))
else:
    import torch
    import torch_lattice.artifact as runtime
    ones = torch.ones(256, 256)
b = MLIRModuleBuilder()
x = b.add_input("x", "tensor<?x256xf32>")
w = b.weight(storage_key="head", layout="linear_o_i", dtype="f32", shape=(256, 256))
b.add_output("y", b.linear(input=x, weight=w))
graph = b.build()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
try:
    runtime.save_lattice_artifact(sys.argv[1], graph, {"head": ones})
except OSError as exc:
    print("refused:", exc)
print(sorted(os.listdir(os.path.dirname(sys.argv[1]))))
"""


@pytest.mark.parametrize("runtime", ["torch", "mlx"])
def test_a_full_disk_is_an_oserror_and_leaves_nothing(tmp_path: Path, runtime: str) -> None:
    target = tmp_path / "m.lattice"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(target), runtime],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused: cannot write weights.safetensors"), lines
    assert lines[1] == "[]"

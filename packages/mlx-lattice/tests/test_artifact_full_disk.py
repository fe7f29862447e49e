"""Saving an artifact from MLX onto a full disk: an ``OSError`` naming the file, nothing left.

The disk is simulated in a child process with ``RLIMIT_FSIZE`` (writes past
100 kB fail with ``EFBIG``, as they fail with ``ENOSPC`` on a full disk); MLX
used to let its own ``RuntimeError`` escape to the caller.  The torch side has
the same test in torch-lattice.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import os, resource, signal, sys
import mlx.core as mx
from lattice_contract.builder import MLIRModuleBuilder
import mlx_lattice.artifact as mla
b = MLIRModuleBuilder()
x = b.add_input("x", "tensor<?x256xf32>")
w = b.weight(storage_key="head", layout="linear_o_i", dtype="f32", shape=(256, 256))
b.add_output("y", b.linear(input=x, weight=w))
graph = b.build()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
try:
    mla.save_lattice_artifact(sys.argv[1], graph, {"head": mx.ones((256, 256))})
except OSError as exc:
    print("refused:", exc)
print(sorted(os.listdir(os.path.dirname(sys.argv[1]))))
"""


def test_a_full_disk_is_an_oserror_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "m.lattice"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(target)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused: cannot write weights.safetensors"), lines
    assert lines[1] == "[]"

"""examples/train_ddp.py end to end: two gloo processes, save, export, fixture, MLX replay.

A few steps of a small MinkUNet on small scenes (bounded in time); the
record must show both ranks, the saved weights must load into a plain
MinkUNet, and the exported fixture must have replayed on MLX with every
case passing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch_lattice.models import MinkUNet

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_ddp.py"


def test_train_ddp_runs_on_two_cpu_processes_and_replays_on_mlx(tmp_path: Path) -> None:
    torchrun = (sys.executable, "-m", "torch.distributed.run", "--standalone")
    command = [
        *torchrun,
        "--nproc_per_node=2",
        str(EXAMPLE),
        *("--steps", "3", "--warmup", "1", "--voxels", "400", "--scenes", "4"),
        *("--batch", "1", "--val", "1", "--channels", "8", "8", "16", "--out", str(tmp_path)),
    ]
    run = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        log, _ = run.communicate(timeout=240)
    finally:
        if run.poll() is None:  # kill the launcher and every rank it started
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode == 0, log[-4000:]
    assert "[rank 1/2] throughput" in log
    record = json.loads((tmp_path / "train_ddp.json").read_text())
    assert record["world_size"] == 2 and record["backend"] == "gloo"
    assert len(record["scenes_per_s_per_rank"]) == 2
    assert record["export"]["replay_runtime"] == "mlx"
    assert record["export"]["replay_passed"] is True
    model = MinkUNet(4, 4, (8, 8, 16))
    model.load_state_dict(load_file(str(tmp_path / "minkunet_ddp.safetensors")))
    assert (tmp_path / "minkunet_ddp.lattice" / "graph.mlir").is_file()
    assert all(torch.isfinite(p).all() for p in model.parameters())

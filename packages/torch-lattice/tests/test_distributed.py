"""DistributedDataParallel over torch_lattice models, with gloo and two CPU processes.

One ``torchrun --nproc_per_node=2`` run of ``ddp_worker.py`` (bounded in
time) is compared with one plain process on the same global batches:

* SyncBatchNorm over rows split unevenly between the ranks (9 / 28 and
  0 / 37) equals one BatchNorm over all 37 rows: outputs, input gradients,
  weight gradients and running statistics;
* three DDP steps of MinkUNet with SyncBatchNorm on 2 x 2 samples give the
  parameters one process gets on the same 4 samples per step (1e-5, f32);
* a second seeded run is bit-identical, and a checkpoint saved by rank 0
  reloads on every rank and resumes exactly;
* ``find_unused_parameters=True`` (with an unused parameter) over a module
  returning the logits tensor trains exactly as the default does;
* with ``find_unused_parameters=True`` and a model returning a
  ``SparseTensor`` whose head only some steps use, plain DDP fails and
  :class:`torch_lattice.distributed.SparseDDP` trains it like the same
  model run with the head's gradient zeroed on the steps that skip it.
"""

from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch_lattice as tl
from torch_lattice.nn import BatchNorm

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 240


def _worker_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lattice_ddp_worker", HERE / "ddp_worker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Launch the 2-rank run, compute the one-process reference meanwhile, collect both."""
    out = tmp_path_factory.mktemp("ddp")
    worker = _worker_module()
    # A session of its own, so a hung run is killed with all of its ranks.
    launched = worker.start_two_ranks(HERE / "ddp_worker.py", out)
    try:
        reference, _, batches = worker.train(0, 1)
        reference_params = {k: v.detach().clone() for k, v in reference.state_dict().items()}
        log, _ = launched.communicate(timeout=TIMEOUT_S)
    finally:
        if launched.poll() is None:
            os.killpg(launched.pid, signal.SIGKILL)
            launched.communicate()
    assert launched.returncode == 0, f"torchrun failed:\n{log[-4000:]}"
    ranks = [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(2)]
    return {"ranks": ranks, "reference": reference_params, "batches": batches, "out": out}


def _reference_syncbn(split: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(37, 5, generator=g, dtype=torch.float32) * 3.0 + 1.5
    upstream = torch.randn(37, 5, generator=g)
    norm = BatchNorm(5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 5))
        norm.bias.copy_(torch.linspace(-1.0, 1.0, 5))
    full = x.clone().requires_grad_(True)
    y = norm(full)
    (y * upstream).sum().backward()
    assert full.grad is not None and norm.weight.grad is not None and norm.bias.grad is not None
    # An independent oracle for the statistics: the definitions, in float64.
    x64 = x.double()
    mean, var = x64.mean(0), x64.var(0, unbiased=True)
    assert torch.allclose(norm.running_mean.double(), 0.1 * mean, atol=1e-6)
    assert torch.allclose(norm.running_var.double(), 0.9 + 0.1 * var, atol=1e-5)
    return {
        "y": y.detach(),
        "dx": full.grad,
        "dweight": norm.weight.grad,
        "dbias": norm.bias.grad,
        "running_mean": norm.running_mean,
        "running_var": norm.running_var,
    }


@pytest.mark.parametrize("split", [9, 0])
def test_sync_batchnorm_over_uneven_ranks_equals_one_batchnorm(
    ddp: dict[str, Any], split: int
) -> None:
    want = _reference_syncbn(split)
    rank0, rank1 = (r["syncbn"][split] for r in ddp["ranks"])
    assert rank0["y"].shape[0] == split and rank1["y"].shape[0] == 37 - split
    for key in ("y", "dx"):
        got = torch.cat([rank0[key], rank1[key]])
        torch.testing.assert_close(got, want[key], atol=1e-5, rtol=1e-5, msg=key)
    for key in ("dweight", "dbias", "running_mean", "running_var"):
        for rank in (rank0, rank1):
            torch.testing.assert_close(rank[key], want[key], atol=1e-5, rtol=1e-5, msg=key)


def test_ddp_with_sync_batchnorm_matches_one_process(ddp: dict[str, Any]) -> None:
    rank0, rank1 = ddp["ranks"]
    assert rank0["norm"] == "SyncBatchNorm"
    # The shards really differ in size, or the test would not tell sums from means.
    assert rank0["rows"] != rank1["rows"]
    assert [a + b for a, b in zip(rank0["rows"], rank1["rows"], strict=True)] == [
        int(b["input"].num_rows) for b in ddp["batches"]
    ]
    reference = ddp["reference"]
    worst = 0.0
    for key, want in reference.items():
        assert torch.equal(rank0["params"][key], rank1["params"][key]), key
        worst = max(worst, float((rank0["params"][key] - want).abs().max()))
    print(f"DDP vs one process: max |difference| {worst:.3g}")
    assert worst <= 1e-5, f"DDP vs one process: max |difference| {worst:.3g}"
    # The run actually trained: parameters moved well beyond the tolerance.
    start = _worker_module().build(1)[0].state_dict()
    moved = max(float((reference[k] - v).abs().max()) for k, v in start.items())
    assert moved > 1e-2


def test_seeded_ddp_run_is_reproducible(ddp: dict[str, Any]) -> None:
    assert all(r["rerun_equal"] for r in ddp["ranks"])


def test_find_unused_parameters_over_a_tensor_output(ddp: dict[str, Any]) -> None:
    assert all(r["unused_parameters_equal"] for r in ddp["ranks"])


def test_find_unused_parameters_over_sparse_tensor_outputs(ddp: dict[str, Any]) -> None:
    rank0, rank1 = (r["sparse_unused"] for r in ddp["ranks"])
    # Plain DDP finds no tensor in a SparseTensor: it marks every parameter unused.
    assert rank0["plain_error"] is not None
    assert "Expected to mark a variable ready only once" in rank0["plain_error"]
    for key, value in rank0["params"].items():
        assert torch.equal(value, rank1["params"][key]), key
    assert rank0["worst"] <= 1e-6, rank0["worst"]


def test_rank0_checkpoint_reloads_and_resumes(ddp: dict[str, Any]) -> None:
    saved = torch.load(ddp["out"] / "checkpoint.pt", weights_only=True)
    assert saved["step"] == 3
    for key, value in saved["model"].items():
        assert torch.equal(value, ddp["ranks"][0]["params"][key]), key
    assert all(r["checkpoint_equal"] and r["resume_equal"] for r in ddp["ranks"])
    # The checkpoint loads into a plain (unsynchronised) model for evaluation too.
    model = _worker_module().MinkUNet(4, 3, (8, 8, 16))
    model.load_state_dict(saved["model"])
    assert isinstance(model.stem[0][1], BatchNorm)
    assert not isinstance(model.stem[0][1], tl.nn.SyncBatchNorm)

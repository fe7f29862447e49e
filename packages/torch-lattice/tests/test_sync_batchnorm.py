"""SyncBatchNorm and the distributed helpers in one process: conversion, fallback, export.

The synchronised statistics themselves are tested across two gloo ranks in
``test_distributed.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch_lattice as tl
from safetensors.torch import load_file
from torch_lattice.distributed import global_mean, init_distributed
from torch_lattice.models import MinkUNet
from torch_lattice.nn import BatchNorm, SyncBatchNorm


class _Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sparse = tl.nn.Sequential(tl.nn.SubmConv3d(2, 4, 3), BatchNorm(4, momentum=0.3))
        self.dense = torch.nn.BatchNorm1d(4)


def test_convert_replaces_every_batchnorm_and_shares_the_tensors() -> None:
    model = _Mixed()
    norm = model.sparse[1]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    converted = SyncBatchNorm.convert_sync_batchnorm(model)
    assert converted is model
    sync = model.sparse[1]
    assert type(sync) is SyncBatchNorm and sync.momentum == 0.3 and sync.eps == norm.eps
    assert isinstance(model.dense, torch.nn.SyncBatchNorm)
    assert sync.weight is norm.weight and sync.running_mean is norm.running_mean
    assert list(model.state_dict()) == list(_Mixed().state_dict())
    # The optimizer built before the conversion still trains the new module.
    sync.weight.grad = torch.ones(4)
    optimizer.step()
    assert torch.equal(sync.weight.detach(), torch.zeros(4))
    root = SyncBatchNorm.convert_sync_batchnorm(BatchNorm(3).eval())
    assert type(root) is SyncBatchNorm and not root.training
    # Converting twice changes nothing.
    assert SyncBatchNorm.convert_sync_batchnorm(root) is root


def test_outside_a_process_group_it_is_batchnorm() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, generator=g) * 2 + 1
    plain, sync = BatchNorm(6), SyncBatchNorm(6)
    a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = plain(a), sync(b)
    (ya * x).sum().backward()
    (yb * x).sum().backward()
    assert a.grad is not None and b.grad is not None
    assert torch.equal(ya, yb) and torch.equal(a.grad, b.grad)
    assert plain.running_var is not None and sync.running_var is not None
    assert torch.equal(plain.running_var, sync.running_var)
    coords = torch.tensor([[0, i, 0, 0] for i in range(4)], dtype=torch.int32)
    out = sync(tl.SparseTensor(coords, torch.randn(4, 6, generator=g)))
    assert isinstance(out, tl.SparseTensor) and out.num_rows == 4


def test_exports_as_plain_batch_norm_with_the_running_statistics(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MinkUNet(2, 3, (4, 4, 8))
    for module in model.modules():
        if isinstance(module, BatchNorm):
            module.running_mean.uniform_(-1, 1)
            module.running_var.uniform_(0.5, 2)
    g = torch.Generator().manual_seed(1)
    coords = torch.unique(torch.randint(0, 8, (60, 3), generator=g), dim=0).int()
    coords = torch.cat([torch.zeros(len(coords), 1, dtype=torch.int32), coords], 1)
    x = tl.SparseTensor(coords, torch.randn(len(coords), 2, generator=g))
    tl.save_lattice_model_artifact(model, x, tmp_path / "plain")
    synced = SyncBatchNorm.convert_sync_batchnorm(model)
    tl.save_lattice_model_artifact(synced, x, tmp_path / "sync")
    plain_graph = (tmp_path / "plain" / "graph.mlir").read_text()
    assert (tmp_path / "sync" / "graph.mlir").read_text() == plain_graph
    norms = sum(isinstance(m, BatchNorm) for m in model.modules())
    assert norms == 10 and plain_graph.count("lattice.batch_norm") == norms
    assert "sync" not in plain_graph.lower()
    stored = load_file(str(tmp_path / "sync" / "weights.safetensors"))
    assert torch.equal(stored["stem.0.1.running_var"], model.get_buffer("stem.0.1.running_var"))
    assert (tmp_path / "sync" / "weights.safetensors").read_bytes() == (
        tmp_path / "plain" / "weights.safetensors"
    ).read_bytes()


def test_distributed_helpers_without_a_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    ctx = init_distributed(device="cpu")
    assert not ctx.distributed and ctx.is_main and ctx.world_size == 1
    assert ctx.device == torch.device("cpu")
    total = torch.tensor(12.0, requires_grad=True)
    loss = global_mean(total, 4)
    loss.backward()
    assert float(loss.detach()) == 3.0 and total.grad is not None and float(total.grad) == 0.25
    with pytest.raises(ValueError, match="no terms"):
        global_mean(torch.tensor(1.0), 0)
    monkeypatch.setenv("RANK", "zero")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="RANK='zero'"):
        init_distributed(device="cpu")

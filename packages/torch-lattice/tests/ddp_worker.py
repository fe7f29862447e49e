"""The worker ``test_distributed.py`` launches with ``torchrun --nproc_per_node=2`` (gloo, CPU).

Also imported by the test itself, which runs :func:`train` in one plain
process on the same global batches as the reference.  Each rank writes
``rank<R>.pt`` into the output directory:

* ``syncbn``: SyncBatchNorm outputs, input/weight gradients and running
  statistics on a fixed tensor split unevenly over the ranks (9 / 28 rows,
  then 0 / 37), for the test to compare with one BatchNorm over all rows;
* ``params``: the model after ``STEPS`` DDP steps (gradients reduced in
  several small buckets); ``rerun_equal`` whether a
  second seeded run gave bit-identical parameters;
* ``unused_parameters_equal``: whether ``find_unused_parameters=True``
  over a module that returns the logits tensor trains as the default does;
* ``sparse_unused``: with ``find_unused_parameters=True``, a model that
  returns a ``SparseTensor`` and uses a branch only on some steps: the error
  plain DDP raises (None if it trains), and whether :class:`SparseDDP`
  trains it exactly as the same model does with the branch's gradients
  treated as unused by hand;
* ``checkpoint_equal`` / ``resume_equal``: whether rank 0's checkpoint,
  reloaded on this rank, equals the live model, and whether one more step
  from the reloaded checkpoint equals one more step of the live run.

:func:`launch_two_ranks` runs a script like this one on two ranks, bounded
in time, for the tests that need a process group (``test_sync_batchnorm_amp.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
from torch_lattice.data import PointCloud, VoxelizedDataset, sparse_collate
from torch_lattice.distributed import SparseDDP, global_mean, init_distributed
from torch_lattice.models import MinkUNet
from torch_lattice.nn import BatchNorm, SyncBatchNorm
from torch_lattice.sparse import SparseTensor

SCENES = 12
PER_RANK = 2
STEPS = 3
CLASSES = 3
SEED = 0


class Clouds:
    """Small labelled clouds: a floor (0), a wall (1) and a sphere (2), sizes varying by seed."""

    def __len__(self) -> int:
        return SCENES

    def __getitem__(self, index: int) -> PointCloud:
        g = torch.Generator().manual_seed(1000 + index)
        n = 150 + 40 * (index % 5)
        floor = torch.rand(n, 3, generator=g) * torch.tensor([8.0, 8.0, 0.3])
        wall = torch.rand(n // 2, 3, generator=g) * torch.tensor([8.0, 0.3, 4.0])
        d = torch.randn(n, 3, generator=g)
        sphere = 2.0 * d / d.norm(dim=1, keepdim=True) + torch.tensor([4.0, 4.0, 2.5])
        points = torch.cat([floor, wall, sphere])
        labels = torch.cat([torch.zeros(n), torch.ones(n // 2), torch.full((n,), 2.0)]).to(
            torch.int64
        )
        return PointCloud(points, labels=labels)


def features(cloud: PointCloud) -> torch.Tensor:
    p = cloud.points
    scaled = (p - p.min(0).values) / 8.0
    return torch.cat([torch.ones(len(p), 1), scaled], dim=1)


def dataset() -> VoxelizedDataset:
    return VoxelizedDataset(Clouds(), 0.5, point_features=features)


def build(world: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(SEED)
    model: torch.nn.Module = MinkUNet(4, CLASSES, (8, 8, 16))
    if world > 1:
        model = SyncBatchNorm.convert_sync_batchnorm(model)
        # Small buckets: the gradients are reduced in several all-reduces.
        model = DistributedDataParallel(model, bucket_cap_mb=0.04)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, optimizer


def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: Any) -> float:
    logits = model(batch["input"]).feats
    total = torch.nn.functional.cross_entropy(logits, batch["labels"], reduction="sum")
    loss = global_mean(total, batch["labels"].numel())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def loader(rank: int, world: int) -> DataLoader[Any]:
    data = dataset()
    if world == 1:
        # One process sees each step's 2 x PER_RANK samples as one batch (in
        # the sampler's order; the sums do not depend on the order).
        order = torch.randperm(SCENES, generator=torch.Generator().manual_seed(SEED)).tolist()
        return DataLoader(
            torch.utils.data.Subset(data, order), batch_size=2 * PER_RANK, collate_fn=sparse_collate
        )
    sampler = DistributedSampler[int](data, num_replicas=world, rank=rank, shuffle=True, seed=SEED)
    sampler.set_epoch(0)
    return DataLoader(data, batch_size=PER_RANK, sampler=sampler, collate_fn=sparse_collate)


def train(rank: int, world: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, list[Any]]:
    model, optimizer = build(world)
    batches = list(loader(rank, world))[:STEPS]
    for batch in batches:
        step(model, optimizer, batch)
    return model, optimizer, batches


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if isinstance(model, DistributedDataParallel) else model


def syncbn_case(rank: int, split: int) -> dict[str, torch.Tensor]:
    """Rank 0 takes rows [0, split), rank 1 the rest, of one fixed (37, 5) tensor."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(37, 5, generator=g, dtype=torch.float32) * 3.0 + 1.5
    upstream = torch.randn(37, 5, generator=g)
    rows = slice(0, split) if rank == 0 else slice(split, 37)
    norm = SyncBatchNorm.convert_sync_batchnorm(BatchNorm(5))
    assert isinstance(norm, SyncBatchNorm)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 5))
        norm.bias.copy_(torch.linspace(-1.0, 1.0, 5))
    local = x[rows].clone().requires_grad_(True)
    y = norm(local)
    (y * upstream[rows]).sum().backward()
    assert local.grad is not None and norm.weight.grad is not None and norm.bias.grad is not None
    dweight, dbias = norm.weight.grad.clone(), norm.bias.grad.clone()
    dist.all_reduce(dweight)
    dist.all_reduce(dbias)
    return {
        "y": y.detach(),
        "dx": local.grad,
        "dweight": dweight,
        "dbias": dbias,
        "running_mean": norm.get_buffer("running_mean").clone(),
        "running_var": norm.get_buffer("running_var").clone(),
    }


class _WithUnused(torch.nn.Module):
    """A wrapper with a parameter no step uses, returning the logits as a tensor."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net
        self.unused = torch.nn.Linear(3, 3)

    def forward(self, x: Any) -> torch.Tensor:
        out: torch.Tensor = self.net(x).feats
        return out


def unused_parameters_case(batches: list[Any]) -> bool:
    """find_unused_parameters=True over a tensor-returning module trains like the plain run."""
    models = []
    for find_unused in (False, True):
        torch.manual_seed(SEED)
        net = SyncBatchNorm.convert_sync_batchnorm(MinkUNet(4, CLASSES, (8, 8, 16)))
        module: torch.nn.Module = _WithUnused(net) if find_unused else net
        ddp = DistributedDataParallel(module, find_unused_parameters=find_unused)
        optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
        for batch in batches[:2]:
            out = ddp(batch["input"])
            logits = out if find_unused else out.feats
            total = torch.nn.functional.cross_entropy(logits, batch["labels"], reduction="sum")
            optimizer.zero_grad()
            global_mean(total, batch["labels"].numel()).backward()
            optimizer.step()
        models.append(net.state_dict())
    return all(torch.equal(v, models[1][k]) for k, v in models[0].items())


class _Branchy(torch.nn.Module):
    """MinkUNet plus a head that only odd steps use; returns a ``SparseTensor``."""

    def __init__(self) -> None:
        super().__init__()
        self.net = SyncBatchNorm.convert_sync_batchnorm(MinkUNet(4, CLASSES, (8, 8, 16)))
        self.extra = torch.nn.Linear(CLASSES, CLASSES)

    def forward(self, x: Any, use_extra: bool) -> Any:
        out = self.net(x)
        return out.with_feats(out.feats + self.extra(out.feats)) if use_extra else out


class _Always(_Branchy):
    """The reference: the head takes part in every step, scaled by 0 where _Branchy skips it."""

    def forward(self, x: Any, use_extra: bool) -> Any:
        out = self.net(x)
        scale = 1.0 if use_extra else 0.0
        return out.with_feats(out.feats + scale * self.extra(out.feats))


def _branchy_steps(
    wrap: Any, batches: list[Any], kind: type[_Branchy] = _Branchy
) -> dict[str, torch.Tensor]:
    torch.manual_seed(SEED)
    model = kind()
    ddp = wrap(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for index, batch in enumerate(batches[:3]):
        out = ddp(batch["input"], use_extra=index == 1)
        assert isinstance(out, SparseTensor)
        total = torch.nn.functional.cross_entropy(out.feats, batch["labels"], reduction="sum")
        optimizer.zero_grad()
        global_mean(total, batch["labels"].numel()).backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def sparse_unused_case(batches: list[Any]) -> dict[str, Any]:
    """find_unused_parameters=True over SparseTensor outputs: plain DDP, then SparseDDP.

    The reference is plain DDP without unused-parameter detection over
    :class:`_Always`, whose head gets a zero gradient on the steps that skip
    it (SGD without momentum leaves it where it is, as an unused head stays).
    """
    plain_error = None
    try:
        _branchy_steps(lambda m: DistributedDataParallel(m, find_unused_parameters=True), batches)
    except RuntimeError as exc:
        plain_error = str(exc).splitlines()[0]
    dist.barrier()  # both ranks failed (or not) in the same step; start clean
    fixed = _branchy_steps(lambda m: SparseDDP(m, find_unused_parameters=True), batches)
    reference = _branchy_steps(DistributedDataParallel, batches, _Always)
    worst = max(float((fixed[k] - v).abs().max()) for k, v in reference.items())
    return {"plain_error": plain_error, "worst": worst, "params": fixed}


def start_two_ranks(script: Path, out: Path) -> subprocess.Popen[str]:
    """``torchrun --standalone --nproc_per_node=2 script out``, started in a session of its own
    (so that a hung run can be killed with all of its ranks), output piped."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(script),
        str(out),
    ]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def launch_two_ranks(script: Path, out: Path, timeout_s: float) -> str:
    """Run ``script out`` on two gloo ranks (``torchrun --standalone``); its log.

    The launch gets a session of its own, so a run that hangs past
    ``timeout_s`` (a collective one rank never joins) is killed with all of
    its ranks instead of holding the test session.  Fails with the log's
    tail unless both ranks exit cleanly.
    """
    launched = start_two_ranks(script, out)
    try:
        log, _ = launched.communicate(timeout=timeout_s)
    finally:
        if launched.poll() is None:
            os.killpg(launched.pid, signal.SIGKILL)
            launched.communicate()
    if launched.returncode != 0:
        raise AssertionError(f"torchrun failed:\n{log[-4000:]}")
    return log


def main(out: Path) -> None:
    torch.set_num_threads(1)
    ctx = init_distributed("gloo", device="cpu")
    rank, world = ctx.rank, ctx.world_size
    result: dict[str, Any] = {"syncbn": {split: syncbn_case(rank, split) for split in (9, 0)}}
    model, optimizer, batches = train(rank, world)
    result["norm"] = type(unwrap(model).get_submodule("stem.0.1")).__name__
    result["rows"] = [int(b["input"].num_rows) for b in batches]
    params = {k: v.detach().clone() for k, v in unwrap(model).state_dict().items()}
    result["params"] = params
    rerun, _, _ = train(rank, world)
    result["rerun_equal"] = all(
        torch.equal(params[k], v) for k, v in unwrap(rerun).state_dict().items()
    )
    result["unused_parameters_equal"] = unused_parameters_case(batches)
    result["sparse_unused"] = sparse_unused_case(batches)
    checkpoint = out / "checkpoint.pt"
    if ctx.is_main:
        tmp = out / ".checkpoint.pt.tmp"
        state = {"model": unwrap(model).state_dict(), "optimizer": optimizer.state_dict()}
        torch.save({**state, "step": STEPS}, tmp)
        tmp.replace(checkpoint)
    dist.barrier()
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    resumed, resumed_opt = build(world)
    unwrap(resumed).load_state_dict(saved["model"])
    resumed_opt.load_state_dict(saved["optimizer"])
    result["checkpoint_equal"] = all(
        torch.equal(params[k], v) for k, v in unwrap(resumed).state_dict().items()
    )
    step(model, optimizer, batches[0])
    step(resumed, resumed_opt, batches[0])
    result["resume_equal"] = all(
        torch.equal(v, unwrap(resumed).state_dict()[k])
        for k, v in unwrap(model).state_dict().items()
    )
    torch.save(result, out / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))

"""Train MinkUNet with torch.distributed (DDP), then save, export and replay the result.

    # two CPU processes (gloo)
    torchrun --nproc_per_node=2 examples/train_ddp.py --steps 20
    # the same script, unchanged, on every GPU of a host (NCCL)
    torchrun --nproc_per_node=8 examples/train_ddp.py --steps 200
    # one plain process (no process group): the single-process loop
    .venv/bin/python examples/train_ddp.py --steps 20

The task is examples/train_segmentation.py's: label each voxel of a
procedural room scene by the primitive it lies on.  Here every scene is
turned into a LiDAR-like cloud of several jittered points per voxel, so the
input pipeline is the one a real dataset uses: ``sparse_quantize`` (unique
voxels + inverse map) and majority-vote labels in ``VoxelizedDataset``,
``DistributedSampler``, ``sparse_collate`` in the ``DataLoader``,
``SyncBatchNorm`` and ``DistributedDataParallel``.  The loss is the global
mean over every rank's voxels (``global_mean``), so N processes with B
scenes each train exactly like one process with N x B scenes.

Each rank logs its own throughput (scenes/s and voxels/s); rank 0 reports
the total, evaluates point-level accuracy and mIoU on unseen scenes (voxel
logits mapped back to points through the inverse maps), saves the weights
(safetensors) and a training record, exports the model with
``save_lattice_model_artifact``, writes a fixture archive and replays it:
on MLX when mlx_lattice is importable here, otherwise on torch (the same as
``conformance replay ARCHIVE --runtime torch``).  Without the native module
(a bare GPU box) export and replay are skipped with a message.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

# The one place the scene generator is imported from (a numpy-only module).
from lattice_conformance.segmentation import CLASS_NAMES, make_scene
from lattice_contract.artifact import atomic_write_file
from safetensors.torch import save_file
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
from torch_lattice.data import PointCloud, VoxelizedDataset, sparse_collate
from torch_lattice.distributed import (
    DistributedContext,
    SparseDDP,
    global_mean,
    init_distributed,
)
from torch_lattice.models import MinkUNet
from torch_lattice.nn import SyncBatchNorm

NUM_CLASSES = len(CLASS_NAMES)
IN_CHANNELS = 4  # [1, position scaled to the scene's extent]


class SyntheticScenes:
    """Room scenes (``lattice_conformance.segmentation.make_scene``) as labelled point clouds.

    Scene ``i`` has seed ``first_seed + i`` and ``points_per_voxel`` points
    jittered uniformly inside each of its voxels, labelled by the voxel's
    primitive.  Deterministic per index, cached per process.
    """

    def __init__(self, count: int, voxels: int, points_per_voxel: int, first_seed: int) -> None:
        self.count = count
        self.voxels = voxels
        self.ppv = points_per_voxel
        self.first_seed = first_seed
        self._cache: dict[int, PointCloud] = {}

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> PointCloud:
        if not 0 <= index < self.count:
            raise IndexError(index)
        if index not in self._cache:
            self._cache[index] = self._make(index)
        return self._cache[index]

    def _make(self, index: int) -> PointCloud:
        seed = self.first_seed + index
        scene = make_scene(seed, n_voxels=self.voxels)
        voxels = torch.from_numpy(scene.coords[:, 1:]).to(torch.float32)
        g = torch.Generator().manual_seed(seed)
        jitter = torch.rand(len(voxels) * self.ppv, 3, generator=g)
        points = voxels.repeat_interleave(self.ppv, dim=0) + jitter
        labels = torch.from_numpy(scene.labels).to(torch.int64).repeat_interleave(self.ppv)
        return PointCloud(points, labels=labels)


def position_features(cloud: PointCloud) -> torch.Tensor:
    """``[1, (p - min) / extent]`` per point."""
    p = cloud.points
    low = p.min(dim=0).values
    extent = (p.max(dim=0).values - low).max().clamp_min(1.0)
    return torch.cat([torch.ones(len(p), 1), (p - low) / extent], dim=1)


def scenes(count: int, voxels: int, ppv: int, first_seed: int) -> VoxelizedDataset:
    source = SyntheticScenes(count, voxels, ppv, first_seed)
    return VoxelizedDataset(source, 1.0, point_features=position_features)


def log(ctx: DistributedContext, message: str, *, every_rank: bool = False) -> None:
    if every_rank or ctx.is_main:
        prefix = f"[rank {ctx.rank}/{ctx.world_size}]" if ctx.distributed else "[single]"
        print(f"{prefix} {message}", flush=True)


def build_model(ctx: DistributedContext, args: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model: torch.nn.Module = MinkUNet(IN_CHANNELS, NUM_CLASSES, tuple(args.channels))
    model = model.to(ctx.device)
    if ctx.distributed:
        # With one rank SyncBatchNorm is BatchNorm; the script stays the same for any N.
        model = SyncBatchNorm.convert_sync_batchnorm(model)
        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        if args.find_unused_parameters:
            # Models whose branches skip some steps: SparseDDP lets DDP see the
            # features inside the SparseTensor the model returns.
            model = SparseDDP(model, device_ids=ids, find_unused_parameters=True)
        else:
            # Every MinkUNet parameter is used in every step: no find_unused_parameters.
            model = DistributedDataParallel(model, device_ids=ids)
    return model


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    if isinstance(model, SparseDDP):
        return model.module
    return model.module if isinstance(model, DistributedDataParallel) else model


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(
    ctx: DistributedContext, args: argparse.Namespace
) -> tuple[torch.nn.Module, dict[str, Any]]:
    data = scenes(args.scenes, args.voxels, args.points_per_voxel, first_seed=0)
    if ctx.distributed:
        sampler: Any = DistributedSampler(data, shuffle=True, seed=args.seed, drop_last=True)
    else:
        sampler = RandomSampler(data, generator=torch.Generator().manual_seed(args.seed))
    loader = DataLoader(
        data,
        batch_size=args.batch,
        sampler=sampler,
        collate_fn=sparse_collate,
        num_workers=args.workers,
        pin_memory=ctx.device.type == "cuda",
        drop_last=True,
        persistent_workers=args.workers > 0,
    )
    model = build_model(ctx, args)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps))
    )
    model.train()
    step, epoch = 0, 0
    timed_samples = timed_voxels = 0
    started = 0.0
    losses: list[float] = []
    while step < args.steps:
        if isinstance(sampler, DistributedSampler):
            sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for batch in loader:
            if step >= args.steps:
                break
            if step == args.warmup:
                # Throughput is wall time from here on, data loading included;
                # the first steps build caches and allocator pools.
                synchronize(ctx.device)
                started = time.perf_counter()
            t0 = time.perf_counter()
            batch = batch.to(ctx.device, non_blocking=True)
            logits = model(batch["input"]).feats
            total = torch.nn.functional.cross_entropy(
                logits, batch["labels"], ignore_index=-1, reduction="sum"
            )
            loss = global_mean(total, int((batch["labels"] >= 0).sum()))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            if step >= args.warmup:
                timed_samples += batch.batch_size
                timed_voxels += batch["input"].num_rows
            if step % args.log_every == 0 or step == args.steps - 1:
                # The ranks' losses sum to N times the global mean.
                value = loss.detach().clone()
                if ctx.distributed:
                    dist.all_reduce(value)
                losses.append(float(value) / ctx.world_size)
                ms = (time.perf_counter() - t0) * 1e3
                log(ctx, f"step {step:4d}/{args.steps}  loss {losses[-1]:.4f}  {ms:7.1f} ms")
            step += 1
        epoch += 1
    synchronize(ctx.device)
    timed_s = time.perf_counter() - started
    rate = timed_samples / timed_s if timed_s else float("nan")
    voxel_rate = timed_voxels / timed_s if timed_s else float("nan")
    log(
        ctx,
        f"throughput {rate:.2f} scenes/s, {voxel_rate:,.0f} voxels/s "
        f"({timed_samples} scenes over {step - args.warmup} timed steps)",
        every_rank=True,
    )
    totals = torch.tensor([timed_samples, timed_voxels, timed_s], dtype=torch.float64)
    if ctx.distributed:
        gathered = [torch.zeros_like(totals) for _ in range(ctx.world_size)]
        dist.all_gather_object(gathered, totals)  # gloo and NCCL alike, tiny payload
        per_rank = [float(t[0] / t[2]) if float(t[2]) else float("nan") for t in gathered]
        global_rate = sum(per_rank)
    else:
        per_rank, global_rate = [rate], rate
    record = {
        "world_size": ctx.world_size,
        "backend": ctx.backend or "none (single process)",
        "device": str(ctx.device),
        "device_name": torch.cuda.get_device_name(ctx.device)
        if ctx.device.type == "cuda"
        else "cpu",
        "threads_per_rank": torch.get_num_threads(),
        "steps": args.steps,
        "batch_per_rank": args.batch,
        "voxels_per_scene": args.voxels,
        "points_per_voxel": args.points_per_voxel,
        "warmup_steps": args.warmup,
        "scenes_per_s_per_rank": per_rank,
        "scenes_per_s_total": global_rate,
        "voxels_per_s_rank0": voxel_rate,
        "final_loss": losses[-1],
        "torch": torch.__version__,
    }
    if ctx.distributed:
        log(ctx, f"total throughput {global_rate:.2f} scenes/s over {ctx.world_size} ranks")
    return model, record


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, device: torch.device, args: argparse.Namespace
) -> dict[str, Any]:
    """Point accuracy and mIoU on unseen scenes (voxel logits read back through ``inverse``)."""
    net = unwrap(model).eval()
    data = scenes(args.val, args.voxels, args.points_per_voxel, first_seed=500)
    confusion = torch.zeros(NUM_CLASSES, NUM_CLASSES, dtype=torch.int64)
    for batch in DataLoader(data, batch_size=2, collate_fn=sparse_collate):
        batch = batch.to(device)
        point_logits = net(batch["input"]).feats[batch["inverse"]]
        pred, truth = point_logits.argmax(dim=1).cpu(), batch["point_labels"].cpu()
        keep = truth >= 0
        confusion += torch.bincount(
            truth[keep] * NUM_CLASSES + pred[keep], minlength=NUM_CLASSES**2
        ).view(NUM_CLASSES, NUM_CLASSES)
    tp = confusion.diag().double()
    union = confusion.sum(0).double() + confusion.sum(1).double() - tp
    iou = torch.where(union > 0, tp / union.clamp_min(1), torch.nan)
    return {
        "point_accuracy": float(tp.sum() / confusion.sum().clamp_min(1)),
        "miou": float(iou.nanmean()),
        "iou": dict(zip(CLASS_NAMES, [float(v) for v in iou], strict=True)),
    }


def save_weights(model: torch.nn.Module, path: Path) -> None:
    """Atomic safetensors write (CPU float32 state dict; SyncBatchNorm keys are BatchNorm's).

    Through ``lattice_contract.artifact.atomic``: a lock, a synced temporary renamed
    into place, the umask's mode, leftovers of a killed run removed.
    """
    state = {k: v.detach().cpu().contiguous() for k, v in unwrap(model).state_dict().items()}
    atomic_write_file(path, lambda tmp: save_file(state, str(tmp)))


def export_and_replay(
    model: torch.nn.Module, out: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Export the trained model, write a fixture archive of unseen scenes, replay it."""
    from torch_lattice.artifact import load_lattice_program, native_artifact_execution_available

    if not native_artifact_execution_available():
        message = (
            "export and replay skipped: the native module (lattice_mlir) is not installed in "
            "this environment; copy the saved weights to a machine with it and export there"
        )
        print(message, flush=True)
        return {"skipped": message}
    from lattice_conformance.archive import write_fixture_archive
    from lattice_conformance.replay import format_table, replay_archive
    from lattice_conformance.torch_fixtures import expected_case, torch_producer
    from torch_lattice.export import save_lattice_model_artifact

    net = copy.deepcopy(unwrap(model)).cpu().float().eval()
    data = scenes(2, args.voxels, args.points_per_voxel, first_seed=1001)
    inputs = [data[i]["input"] for i in range(len(data))]
    artifact = out / "minkunet_ddp.lattice"
    report = save_lattice_model_artifact(net, inputs[0], artifact)
    worst = max(check.max_abs_error for check in report.checks)
    print(f"exported {artifact} ({len(report.ops)} ops; artifact vs eager max |error| {worst:.2e})")
    program = load_lattice_program(artifact)
    cases = [
        expected_case(program, x, name=f"scene-{1001 + i}", atol=1e-4, rtol=1e-4)
        for i, x in enumerate(inputs)
    ]
    archive = write_fixture_archive(
        out / "minkunet_ddp-f32.tar.gz",
        artifact,
        cases,
        producer=torch_producer({"example": "train_ddp"}),
    )
    runtime = "mlx" if importlib.util.find_spec("mlx_lattice") is not None else "torch"
    print(f"replaying {archive} on {runtime} (conformance replay {archive} --runtime {runtime})")
    result = replay_archive(archive, runtime=runtime, progress=False)
    print(format_table(result), flush=True)
    return {
        "artifact": str(artifact),
        "archive": str(archive),
        "replay_runtime": runtime,
        "replay_passed": result.passed,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=2, help="scenes per rank per step")
    parser.add_argument("--scenes", type=int, default=32, help="training scenes")
    parser.add_argument("--val", type=int, default=4, help="validation scenes")
    parser.add_argument("--voxels", type=int, default=4000, help="voxels per scene")
    parser.add_argument("--points-per-voxel", type=int, default=4)
    parser.add_argument("--channels", type=int, nargs=3, default=(32, 32, 64))
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per rank")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--out", type=Path, default=Path("out/train_ddp"))
    parser.add_argument("--no-export", action="store_true", help="skip export and replay")
    parser.add_argument(
        "--find-unused-parameters",
        action="store_true",
        help="wrap in torch_lattice.distributed.SparseDDP with find_unused_parameters=True "
        "(for models with branches that skip steps; MinkUNet needs no such detection)",
    )
    return parser


def main() -> None:
    args = build_parser().parse_args()
    if args.steps <= args.warmup:
        raise SystemExit(f"--steps ({args.steps}) must exceed --warmup ({args.warmup})")
    torch.set_num_threads(args.threads)
    ctx = init_distributed(device=None if args.device == "auto" else args.device)
    log(ctx, f"backend {ctx.backend or 'none'}, device {ctx.device}, world size {ctx.world_size}")
    model, record = train(ctx, args)
    if ctx.is_main:
        out = args.out
        out.mkdir(parents=True, exist_ok=True)
        record["validation"] = evaluate(model, ctx.device, args)
        val = record["validation"]
        log(ctx, f"validation: point accuracy {val['point_accuracy']:.3f}, mIoU {val['miou']:.3f}")
        save_weights(model, out / "minkunet_ddp.safetensors")
        log(ctx, f"saved {out / 'minkunet_ddp.safetensors'}")
        if not args.no_export:
            record["export"] = export_and_replay(model, out, args)
        text = json.dumps(record, indent=2) + "\n"
        atomic_write_file(out / "train_ddp.json", lambda tmp: tmp.write_text(text))
    if ctx.distributed:
        dist.barrier()
        dist.destroy_process_group()
    if ctx.is_main and record.get("export", {}).get("replay_passed") is False:
        raise SystemExit("train_ddp: the exported model failed its replay (see the table above)")


if __name__ == "__main__":
    main()

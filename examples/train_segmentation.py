"""Train the shipped example segmentation networks and regenerate their fixtures.

    .venv/bin/python examples/train_segmentation.py   # both models: ~3 min, 1 core
    .venv/bin/python examples/train_segmentation.py --model minkunet --steps 100 --out /tmp/x
    .venv/bin/python examples/train_segmentation.py --fixtures-only   # re-export, no training

The task: label every voxel (MinkUNet) or point (SPVCNN) of a procedural room
scene (``lattice_conformance.scenes``) by the primitive it lies on -- plane,
sphere, cylinder or box.  Inputs are ``[1, position / scene extent]`` per
voxel / point.  Training uses fresh scenes (seeds 0..N-1), validation and the
fixtures use unseen seeds.  The loss is cross-entropy weighted by inverse
square-root class frequency, since planes cover about three quarters of the
voxels and mIoU weighs every class equally.

Writes, into ``--out`` (default: the package's shipped data directory):
``<model>.safetensors`` (float32 state dict), ``<model>.json`` (architecture,
training record, validation IoU) and, unless ``--no-fixtures``, the fixture
archives ``<model>-f16.tar.gz`` and ``<model>-int8.tar.gz``.  ``--fixtures-only``
skips training and re-exports the fixture archives from the shipped weights
(after a change of the dialect or of the exporter).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lattice_conformance import segmentation as seg
from lattice_conformance.replay import write_json_atomic
from lattice_contract.artifact import atomic_write_file
from safetensors.torch import save_file


def _pool(seeds: range, rng: np.random.Generator) -> list[seg.Scene]:
    sizes = rng.integers(3500, 8000, size=len(seeds))
    return [seg.make_scene(int(s), n_voxels=int(n)) for s, n in zip(seeds, sizes, strict=True)]


def _logits(name: str, model: Any, scene: seg.Scene) -> torch.Tensor:
    out = model(*seg.model_inputs(name, scene))
    return out.feats if name == "minkunet" else out


def evaluate(name: str, model: Any, scenes: list[seg.Scene]) -> dict[str, Any]:
    """mIoU and per-class IoU over the validation scenes (eager, float32)."""
    model.eval()
    preds, labels = [], []
    with torch.no_grad():
        for scene in scenes:
            preds.append(_logits(name, model, scene).argmax(dim=1).numpy())
            labels.append(seg.scene_labels(name, scene))
    pred, label = np.concatenate(preds), np.concatenate(labels)
    iou = seg.iou_per_class(pred, label)
    return {
        "miou": seg.mean_iou(pred, label),
        "accuracy": float(np.mean(pred == label)),
        "iou": dict(zip(seg.CLASS_NAMES, [float(v) for v in iou], strict=True)),
    }


def train(name: str, args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    train_scenes = _pool(range(args.scenes), rng)
    val_scenes = _pool(range(500, 500 + args.val), rng)
    counts = np.bincount(
        np.concatenate([seg.scene_labels(name, s) for s in train_scenes]),
        minlength=seg.NUM_CLASSES,
    )
    weight = torch.tensor(1.0 / np.sqrt(counts / counts.sum()), dtype=torch.float32)
    weight = weight / weight.mean()
    data_s = time.perf_counter() - t0

    model = seg.build_model(name)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / args.steps))
    )
    model.train()
    losses = []
    t1 = time.perf_counter()
    for step in range(args.steps):
        picks = rng.choice(len(train_scenes), size=args.batch, replace=False)
        scene = seg.merge_scenes([train_scenes[i] for i in picks])
        labels = torch.from_numpy(seg.scene_labels(name, scene)).long()
        loss = torch.nn.functional.cross_entropy(_logits(name, model, scene), labels, weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == args.steps - 1:
            recent = float(np.mean(losses[-25:]))
            print(
                f"[{name}] step {step:4d}/{args.steps}  loss {recent:.4f}  "
                f"{time.perf_counter() - t1:6.1f}s",
                flush=True,
            )
    train_s = time.perf_counter() - t1
    model.eval()
    val = evaluate(name, model, val_scenes)
    print(
        f"[{name}] trained {args.steps} steps in {train_s:.1f}s; validation mIoU "
        f"{val['miou']:.3f}  " + "  ".join(f"{k} {v:.3f}" for k, v in val["iou"].items()),
        flush=True,
    )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    atomic_write_file(out / f"{name}.safetensors", lambda tmp: save_file(state, str(tmp)))
    record = {
        "model": name,
        "architecture": seg.DEFAULT_CONFIGS[name],
        "in_channels": seg.IN_CHANNELS,
        "classes": list(seg.CLASS_NAMES),
        "parameters": sum(p.numel() for p in model.parameters()),
        "training": {
            "steps": args.steps,
            "batch_scenes": args.batch,
            "train_scenes": args.scenes,
            "lr": args.lr,
            "seed": args.seed,
            "threads": torch.get_num_threads(),
            "class_weights": [float(w) for w in weight],
            "final_loss": float(np.mean(losses[-25:])),
            "data_s": data_s,
            "train_s": train_s,
        },
        "validation": {"scenes": args.val, **val},
    }
    if not args.no_fixtures:
        t2 = time.perf_counter()
        paths = seg.write_model_fixtures(name, model, out)
        record["fixtures_s"] = time.perf_counter() - t2
        for path in paths:
            print(f"[{name}] wrote {path} ({path.stat().st_size / 1e6:.2f} MB)", flush=True)
    write_json_atomic(out / f"{name}.json", record)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=(*seg.MODELS, "all"), default="all")
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--batch", type=int, default=2, help="scenes per step")
    parser.add_argument("--scenes", type=int, default=48, help="training scenes")
    parser.add_argument("--val", type=int, default=6, help="validation scenes")
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--out", type=Path, default=seg.DATA_DIR)
    parser.add_argument("--no-fixtures", action="store_true")
    parser.add_argument(
        "--fixtures-only",
        action="store_true",
        help="re-export the fixture archives from the shipped weights, without training",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = seg.MODELS if args.model == "all" else (args.model,)
    start = time.perf_counter()
    for name in names:
        if args.fixtures_only:
            for path in seg.write_model_fixtures(name, seg.load_trained_model(name), args.out):
                print(f"[{name}] wrote {path} ({path.stat().st_size / 1e6:.2f} MB)", flush=True)
        else:
            train(name, args)
    print(f"done in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":
    main()

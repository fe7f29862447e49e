"""Train, export and ship the fixed geometry profile model (an integer network).

The model (:class:`torch_lattice.geometry.GeometryModel`) predicts, level by
level, which of the 8 children of every occupied voxel are occupied, from the
parent level's geometry (a 3x3x3 submanifold stack, so neighbouring parents)
and the level (its features say which level of how many).  It trains with the
integer network's rounding simulated (straight-through gradients) and is
frozen into the integer network, whose logits are bit-identical on every
runtime.  Training data: procedural clouds of six families
(``train_shapes.py``: closed superquadrics, open height fields with cut-outs,
thin curves and trusses, CAD-like unions of boxes and cylinders, single-view
range scans with noise and holes, and the generated rooms) at Levels 8-11 and
sampling densities from 0.25 to 4 samples per voxel face.  None of them is a
held-out cloud of ``codec_table.py`` (``train_shapes.py`` says how they
differ).  Then the script

* evaluates held-out clouds (the same families, other seeds) beside the
  octree baseline of 8 bits per occupied parent,
* saves ``model.lattice/`` (``graph.mlir`` + ``weights.safetensors``) through
  the torch exporter, which verifies the graph with the native MLIR dialect
  and checks the artifact against the eager model before writing,
* and writes ``training.json`` (data, steps, time, device).

Run from the repository root: ``.venv/bin/python examples/geometry/train.py``
(CPU; ``--device cuda`` on a GPU).  Data and initialisation are
deterministic in the seed; the learning rate follows a cosine over the step
budget or the ``--minutes`` cap, whichever ends first, so a run cut off by
the cap is reproduced step for step only on a machine of the same speed.
``--state-out`` saves the float training weights (to export them
elsewhere), ``--from-state`` exports saved training weights without
training, ``--no-export`` skips the artifact (a machine without the native
verifier), and ``--reexport`` re-exports
``model.lattice/`` from its own weights (after a change of the dialect or of
the exporter).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # train_shapes beside this file

from safetensors.torch import save_file  # noqa: E402
from torch_lattice.geometry import (  # noqa: E402
    GeometryModel,
    export_geometry_artifact,
    hierarchy_bits,
    load_geometry_model,
    stacked_level_inputs,
)
from torch_lattice.occupancy import OccupancyHierarchy, occupancy_hierarchy  # noqa: E402
from train_shapes import training_cloud  # noqa: E402

HELD_OUT_SEED_OFFSET = 1_000_003  # held-out clouds: the training families, another seed


def hierarchy_of(coords: np.ndarray, levels: int, device: str = "cpu") -> OccupancyHierarchy:
    rows = np.zeros((len(coords), 4), np.int32)
    rows[:, 1:] = coords
    h = occupancy_hierarchy(torch.from_numpy(rows).to(device), levels)
    assert isinstance(h, OccupancyHierarchy)  # declared as the shared base class
    return h


def save_state(model: GeometryModel, path: Path) -> None:
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path))


def _cloud(job: tuple[int, int, tuple[int, ...], int]) -> tuple[str, int, np.ndarray]:
    return training_cloud(*job)


def make_clouds(
    count: int, seed: int, levels: tuple[int, ...], workers: int, max_samples: int
) -> list[tuple[str, int, np.ndarray]]:
    jobs = [(i, seed, levels, max_samples) for i in range(count)]
    if workers <= 1:
        return [_cloud(j) for j in jobs]
    with get_context("fork").Pool(workers) as pool:
        return pool.map(_cloud, jobs)


def train(
    args: argparse.Namespace, levels: tuple[int, ...]
) -> tuple[GeometryModel, dict[str, object]]:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    clouds = make_clouds(args.clouds, args.seed, levels, args.workers, args.max_samples)
    batches = []
    for _, level, vox in clouds:
        h = hierarchy_of(vox, level, args.device)
        # Stacked inputs are built once and reused, so each support keeps its
        # cached kernel maps across steps.
        batches.append((stacked_level_inputs([h]), len(vox)))
    prep = time.perf_counter() - start
    print(f"{len(clouds)} clouds, {sum(len(c[2]) for c in clouds)} voxels, ready in {prep:.0f}s")
    model = GeometryModel(args.channels, args.blocks).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    log: list[float] = []
    start = time.perf_counter()
    step = 0
    while step < args.steps and time.perf_counter() - start < args.minutes * 60:
        # cosine decay over the step budget or the time budget, whichever ends first
        done = max(step / args.steps, (time.perf_counter() - start) / (args.minutes * 60))
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * min(done, 1.0)))
        for group in opt.param_groups:
            group["lr"] = lr
        (parents, children), points = batches[int(rng.integers(len(batches)))]
        logits = model.candidate_logits(parents)
        nats = model.candidate_nats(logits, children)
        loss = nats.feats.sum() / (math.log(2.0) * points)  # bits per point of this cloud
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append(float(loss.detach()))
        if args.state_out is not None and step % 500 == 499:  # survives a cut-off run
            save_state(model, args.state_out)
        if step % 10 == 0:
            recent = sum(log[-50:]) / len(log[-50:])
            took = time.perf_counter() - start
            print(f"step {step:5d}  bpp {recent:.4f}  lr {lr:.2e}  {took:.0f}s", flush=True)
        step += 1
    elapsed = time.perf_counter() - start
    model.eval()
    families: dict[str, int] = {}
    for name, _, _ in clouds:
        families[name] = families.get(name, 0) + 1
    summary: dict[str, object] = {
        "steps": step,
        "training_seconds": round(elapsed, 1),
        "data_seconds": round(prep, 1),
        "last_50_steps_bpp": round(sum(log[-50:]) / max(len(log[-50:]), 1), 4),
        "clouds": len(clouds),
        "families": families,
        "levels": list(levels),
        "voxels": int(sum(len(c[2]) for c in clouds)),
    }
    return model, summary


def evaluate(
    model: GeometryModel, args: argparse.Namespace, levels: tuple[int, ...]
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    frozen = model.freeze().to(args.device)
    for i in range(args.held_out):
        name, level, vox = training_cloud(
            i, args.seed + HELD_OUT_SEED_OFFSET, levels, args.max_samples
        )
        h = hierarchy_of(vox, level, args.device)
        bits = sum(hierarchy_bits(frozen, h))
        n = len(vox)
        octree = 8 * sum(h.counts()[:-1])
        rows.append(
            {
                "family": name,
                "level": level,
                "points": n,
                "neural_bpp": round(bits / n, 4),
                "octree_bpp": round(octree / n, 4),
            }
        )
        print(f"held-out {name}@{level}: {n} voxels, {bits / n:.4f} bpp, octree {octree / n:.4f}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--minutes", type=float, default=34.0, help="wall-clock cap on training")
    parser.add_argument("--clouds", type=int, default=96)
    parser.add_argument("--levels", default="8,9,10,11", help="comma-separated training levels")
    parser.add_argument(
        "--max-samples", type=int, default=40_000, help="surface samples per cloud at most"
    )
    parser.add_argument("--held-out", type=int, default=12, help="held-out clouds to evaluate")
    parser.add_argument("--channels", type=int, default=24)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="processes generating the clouds")
    parser.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
    parser.add_argument(
        "--schedule", default="auto", help="torch_lattice conv schedule (tap_major: no Triton)"
    )
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--state-out", type=Path, help="also save the float training weights")
    parser.add_argument(
        "--from-state", type=Path, help="export these training weights, no training"
    )
    parser.add_argument("--summary", type=Path, help="training.json of the --from-state run")
    parser.add_argument("--no-export", action="store_true", help="train and save, no artifact")
    parser.add_argument(
        "--reexport",
        action="store_true",
        help="re-export OUT/model.lattice from its own weights, without training",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    levels = tuple(int(v) for v in args.levels.split(","))
    bundle = args.out / "model.lattice"
    if args.reexport:
        model = load_geometry_model(bundle / "weights.safetensors")  # read before replacing
        export_geometry_artifact(model, bundle)  # the exporter swaps the bundle atomically
        print(f"re-exported {bundle}")
        return 0
    if args.from_state is not None:
        model = load_geometry_model(args.from_state, frozen=False)
        summary = json.loads(args.summary.read_text()) if args.summary else {}
    else:
        from torch_lattice.ops import schedule

        with schedule(args.schedule):
            model, summary = train(args, levels)
            summary["held_out"] = evaluate(model, args, levels)
        summary.update(
            max_samples=args.max_samples,
            channels=args.channels,
            blocks=args.blocks,
            seed=args.seed,
            threads=args.threads,
            lr=args.lr,
            device=args.device,
            card=torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        )
        if args.state_out is not None:
            save_state(model, args.state_out)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.no_export:
        export_geometry_artifact(model.cpu(), bundle)
    (args.out / "training.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

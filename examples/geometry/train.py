"""Train, export and ship the fixed geometry profile model (CPU, a few minutes).

The model (:class:`torch_lattice.geometry.GeometryModel`) predicts, level by
level, which of the 8 children of every occupied voxel are occupied.  It is
trained here on procedurally generated surface scenes (``lattice_conformance.scenes``:
floors, walls, a ramp, spheres, a cylinder and boxes, jittered and voxelised)
at several sizes in a 256^3 grid (Level 8), then:

* evaluated on held-out scenes (other seeds) beside the octree baseline of
  8 bits per occupied parent,
* saved as ``model.lattice/`` (``graph.mlir`` + ``weights.safetensors``)
  through the torch exporter, which verifies the graph with the native MLIR
  dialect and checks the artifact against the eager model before writing,
* and a held-out Level-8 scene is written as ``level8.ply`` (binary little
  endian, float32 x, y, z) for ``conformance geometry-profile``.

Run from the repository root: ``.venv/bin/python examples/geometry/train.py``.
Training is deterministic for a given seed and thread count.  ``--reexport``
skips training and re-exports ``model.lattice/`` from its own weights (after a
change of the dialect or of the exporter).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]

from lattice_conformance.ply import write_ply  # noqa: E402
from lattice_conformance.scenes import batched, make_scene  # noqa: E402
from torch_lattice.geometry import (  # noqa: E402
    GeometryModel,
    export_geometry_artifact,
    hierarchy_bits,
    stacked_level_inputs,
)
from torch_lattice.occupancy import OccupancyHierarchy, occupancy_hierarchy  # noqa: E402

LEVELS = 8
GRID = 1 << LEVELS
TRAIN_SIZES = (3_000, 60_000)  # log-uniform range of training scene sizes (voxels)
HELD_OUT = ((40_000, 1), (20_000, 2), (8_000, 3))
SHIPPED = (40_000, 7)  # the Level-8 PLY: its own seed, never trained on


def hierarchy_of(coords: np.ndarray) -> OccupancyHierarchy:
    h = occupancy_hierarchy(torch.from_numpy(batched(coords)), LEVELS)
    assert isinstance(h, OccupancyHierarchy)  # declared as the shared base class
    return h


def octree_bits(h: OccupancyHierarchy) -> int:
    return 8 * sum(h.counts()[:-1])


def train(args: argparse.Namespace) -> tuple[GeometryModel, dict[str, object]]:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    batches = []
    for i in range(args.scenes):
        # Sizes spread evenly in log scale over the range, so every density
        # regime of every level is seen.
        frac = i / max(args.scenes - 1, 1)
        size = int(TRAIN_SIZES[0] * (TRAIN_SIZES[1] / TRAIN_SIZES[0]) ** frac)
        coords, _ = make_scene(size, grid=GRID, seed=1000 + i)
        h = hierarchy_of(coords)
        # Stacked inputs are built once and reused, so each support keeps its
        # cached kernel maps across steps.
        batches.append((stacked_level_inputs([h]), int(coords.shape[0])))
    model = GeometryModel(args.channels, args.blocks)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    log = []
    start = time.perf_counter()
    step = 0
    while step < args.steps and time.perf_counter() - start < args.minutes * 60:
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        (parents, children), points = batches[int(rng.integers(len(batches)))]
        logits = model.candidate_logits(parents)
        nats = model.candidate_nats(logits, children)
        loss = nats.feats.sum() / (math.log(2.0) * points)  # bits per point of this scene
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append(float(loss.detach()))
        if step % 20 == 0:
            recent = sum(log[-20:]) / len(log[-20:])
            print(
                f"step {step:4d}  bpp {recent:.4f}  lr {lr:.2e}  {time.perf_counter() - start:.0f}s"
            )
        step += 1
    elapsed = time.perf_counter() - start
    model.eval()
    return model, {"steps": step, "training_seconds": round(elapsed, 1), "last_step_bpp": log[-1]}


def evaluate(model: GeometryModel) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for size, seed in HELD_OUT:
        coords, _ = make_scene(size, grid=GRID, seed=seed)
        h = hierarchy_of(coords)
        bits = sum(hierarchy_bits(model, h))
        n = int(coords.shape[0])
        rows.append(
            {
                "seed": seed,
                "points": n,
                "neural_bpp": round(bits / n, 4),
                "octree_bpp": round(octree_bits(h) / n, 4),
            }
        )
        print(
            f"held-out seed {seed}: {n} points, neural {bits / n:.4f} bpp, "
            f"octree {octree_bits(h) / n:.4f} bpp"
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--minutes", type=float, default=8.0, help="wall-clock safety cap")
    parser.add_argument("--scenes", type=int, default=16)
    parser.add_argument("--channels", type=int, default=24)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument(
        "--reexport",
        action="store_true",
        help="re-export OUT/model.lattice from its own weights, without training",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.reexport:
        from torch_lattice.geometry import load_geometry_model

        bundle = args.out / "model.lattice"
        model = load_geometry_model(bundle / "weights.safetensors")  # read before replacing
        export_geometry_artifact(model, bundle)  # the exporter swaps the bundle atomically
        print(f"re-exported {bundle}")
        return 0
    model, summary = train(args)
    summary["held_out"] = evaluate(model)
    summary.update(
        channels=args.channels,
        blocks=args.blocks,
        seed=args.seed,
        threads=args.threads,
        scenes=args.scenes,
        lr=args.lr,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    export_geometry_artifact(model, args.out / "model.lattice")
    coords, _ = make_scene(SHIPPED[0], grid=GRID, seed=SHIPPED[1])
    write_ply(args.out / "level8.ply", coords.astype(np.float32))
    (args.out / "training.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

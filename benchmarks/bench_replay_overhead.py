"""Replay overhead: what ``conformance replay`` costs beyond MLX's own compute.

    .venv/bin/python benchmarks/bench_replay_overhead.py [--voxels 10000] [--repeats 5]

Exports a MinkUNet (random weights, f16 and f32) on one ~10k-voxel surface
scene, writes a one-case fixture archive, and replays it ``--repeats`` times.
Reports per replay: the whole call (extract + checksums + compile + case),
MLX compute (program call to evaluated outputs), and replay's own overhead
split into reading the case arrays, converting inputs and outputs, and the
comparison (canonical ordering, exact coordinates, error statistics).  Median
of the repeats; ratios to compute.  Never asserted anywhere.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from lattice_conformance import segmentation as seg
from lattice_conformance.replay import replay_archive
from lattice_conformance.torch_fixtures import write_torch_fixture_archive
from torch_lattice.models import MinkUNet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voxels", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    scene = seg.make_scene(42, n_voxels=args.voxels)
    print(f"scene: {len(scene.coords)} voxels; MinkUNet(4 -> 4, 32/32/64), one case per archive")
    header = (
        f"{'dtype':<6}{'total':>9}{'compute':>9}{'overhead':>10}{'load':>8}"
        f"{'convert':>9}{'compare':>9}{'open':>8}{'compile':>9}{'ovh/comp':>10}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (torch.float32, torch.float16):
            model = MinkUNet(seg.IN_CHANNELS, seg.NUM_CLASSES, (32, 32, 64)).to(dtype).eval()
            archive = write_torch_fixture_archive(
                Path(tmp) / f"{dtype}.tar.gz",
                model,
                [seg.model_inputs("minkunet", scene, dtype)],
                atol=2e-2,
                rtol=1e-2,
            )
            rows = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                result = replay_archive(archive, progress=False)
                total = time.perf_counter() - start
                if not result.passed:
                    sys.exit(f"replay failed: {[c.reasons for c in result.cases]}")
                case = result.cases[0]
                rows.append(
                    (
                        total,
                        case.compute_s,
                        case.overhead_s,
                        case.load_s,
                        case.prepare_s + case.convert_s,
                        case.compare_s,
                        result.open_s,
                        result.compile_s,
                    )
                )
            med = [statistics.median(col) for col in zip(*rows, strict=True)]
            name = "f32" if dtype == torch.float32 else "f16"
            ms = "".join(
                f"{v * 1e3:>{w}.1f}" for v, w in zip(med, (9, 9, 10, 8, 9, 9, 8, 9), strict=True)
            )
            print(f"{name:<6}{ms}{med[2] / med[1]:>10.3f}")
    print("times in ms (median); overhead = load + convert + compare of the case")


if __name__ == "__main__":
    main()

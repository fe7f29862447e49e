"""Where the time of one fresh layer goes on CUDA (map built): torch.profiler's top ops.

Run: ``python benchmarks/profile_cuda.py`` on a CUDA machine (PYTHONPATH as for bench_cuda.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scenes import batched, make_scene
from torch_lattice import SparseTensor, ops


def main() -> None:
    coords = torch.from_numpy(batched(make_scene(100_000)[0])).cuda()
    feats = torch.randn(coords.shape[0], 64, device="cuda").half()
    w3 = torch.randn(64, 3, 3, 3, 64, device="cuda").half()
    w2 = torch.randn(64, 2, 2, 2, 64, device="cuda").half()
    layers = {
        "subm3 64 +map": lambda: ops.subm_conv3d(
            SparseTensor.trusted(coords, feats), w3, kernel_size=3
        ),
        "k2s2 64 +map": lambda: ops.conv3d(
            SparseTensor.trusted(coords, feats), w2, kernel_size=2, stride=2
        ),
    }
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    for name, fn in layers.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
        print(f"\n=== {name} (5 calls)")
        print(
            prof.key_averages().table(
                sort_by="cpu_time_total", row_limit=22, max_name_column_width=40
            )
        )


if __name__ == "__main__":
    main()

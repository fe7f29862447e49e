"""Train the reference geometry encoder/decoder block and write its fixture archive.

The block is the shape of the reference system's learned geometry codecs
(upstream's ``gameleon_reproduction_block``) in Lattice's ops: weight-
normalised submanifold convs encode a voxelised surface, an average pool
halves the resolution, a normalised conv reads context there, and four
decoders bring it back onto the input's exact rows -- a target normalised
transposed conv, a normalised generative transposed conv reindexed onto the
input, ``pool_transpose3d`` and ``trilinear_upsample3d`` onto the input --
whose features are concatenated and mixed by a last normalised conv.

It is trained for a few Adam steps in torch (one thread, fixed seeds, so the
run is deterministic), exported with ``save_lattice_model_artifact`` (which
checks the artifact on torch against the eager model), and written as a
fixture archive by ``lattice_conformance.torch_fixtures`` with three held-out
inputs; ``conformance replay`` then requires exact coordinates on MLX.  Run
it again whenever the schema digest changes (it is part of the shipped data
regeneration)::

    .venv/bin/python examples/geometry_block/build.py [--out PATH] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch_lattice
from torch_lattice import nn

DATA = (
    Path(__file__).resolve().parents[2]
    / "packages"
    / "lattice-conformance"
    / "src"
    / "lattice_conformance"
    / "data"
)
ARCHIVE = DATA / "geometry-block.tar.gz"


class GeometryBlock(torch.nn.Module):
    """Encoder/decoder over one sparse surface; output rows are the input rows."""

    def __init__(self, in_channels: int = 4, width: int = 8, out_channels: int = 3) -> None:
        super().__init__()
        self.encoder = nn.NormalizedSubmConv3d(in_channels, width, 3)
        self.down = nn.AvgPool3d(2, stride=2)
        self.context = nn.NormalizedSubmConv3d(width, width, 3)
        self.learned_up = nn.TargetNormalizedConvTranspose3d(width, width, 2, stride=2)
        self.generated_up = nn.NormalizedGenerativeConvTranspose3d(width, width, 2, stride=2)
        self.onto_input = nn.SparseReindex()
        self.pool_up = nn.PoolTranspose3d(2, stride=2)
        self.linear_up = nn.TrilinearUpsample3d(2)
        self.cat = nn.SparseCat(join="left")
        self.mix = nn.NormalizedSubmConv3d(4 * width, out_channels, 3)

    def forward(self, x: torch_lattice.SparseTensor) -> torch_lattice.SparseTensor:
        encoded = self.encoder(x)
        context = self.context(self.down(encoded))
        learned = self.learned_up(context, x)
        generated = self.onto_input(self.generated_up(context), x)
        pooled = self.pool_up(context, x)
        linear = self.linear_up(context, x)
        joined = self.cat(self.cat(self.cat(learned, generated), pooled), linear)
        return self.mix(joined)


def surface(seed: int, radius: float = 6.0) -> torch_lattice.SparseTensor:
    """A jittered, voxelised sphere shell with features [1, x, y, z] / radius (one batch item)."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.randn(1500, 3, generator=g)
    directions = directions / directions.norm(dim=1, keepdim=True)
    centre = torch.rand(3, generator=g) * 4.0
    points = centre + directions * (radius + 0.4 * torch.rand(1500, 1, generator=g))
    voxels = torch.unique(torch.floor(points).to(torch.int32), dim=0)
    coords = torch.cat([torch.zeros(len(voxels), 1, dtype=torch.int32), voxels], dim=1)
    rel = (voxels.to(torch.float32) - centre) / radius
    feats = torch.cat([torch.ones(len(voxels), 1), rel], dim=1)
    return torch_lattice.SparseTensor(coords, feats)


def target_of(x: torch_lattice.SparseTensor) -> torch.Tensor:
    """What the block learns: a smooth field on the surface (its outward direction, squashed)."""
    return torch.tanh(1.5 * x.feats[:, 1:])


def train(steps: int) -> tuple[GeometryBlock, list[float]]:
    torch.manual_seed(0)
    model = GeometryBlock()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    losses = []
    for step in range(steps):
        x = surface(seed=step)
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x).feats, target_of(x))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model.eval(), losses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ARCHIVE, help="fixture archive to write")
    parser.add_argument("--steps", type=int, default=12, help="Adam steps (default 12)")
    args = parser.parse_args()
    from lattice_conformance.torch_fixtures import write_torch_fixture_archive

    torch.set_num_threads(1)
    started = time.perf_counter()
    model, losses = train(args.steps)
    inputs = [surface(seed=1000 + i) for i in range(3)]
    path = write_torch_fixture_archive(
        args.out,
        model,
        inputs,
        atol=1e-4,
        rtol=1e-4,
        names=[f"surface-{1000 + i}" for i in range(3)],
        descriptions=["held-out jittered sphere shell, one batch item"] * 3,
        producer={"example": "examples/geometry_block/build.py", "steps": str(args.steps)},
    )
    record = {
        "steps": args.steps,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "seconds": round(time.perf_counter() - started, 2),
        "archive": str(path),
    }
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

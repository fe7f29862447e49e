"""The neural model on its own, on the codec's held-out clouds, next to LZMA and the context models.

For every cloud of ``codec_table.py`` (seed 1, Levels 8 and 10, sparse and
dense) it encodes once with the model and reads, from the encoder's exact
per-level code lengths, what each method would cost if it coded *every*
level: the neural model alone, the neural model recalibrated by context
counts (hybrid), the context model alone and the parity-phase model alone.
These are bits per occupied voxel, next to LZMA (xz -9e) of the octree
stream, its order-0 entropy and the codec's real file (the per-level
choice).  The file is decoded on the *other* runtime (no cross-check) and
compared with the input.

Run from the repository root (tens of minutes on a loaded 2-core CPU)::

    .venv/bin/python examples/geometry/neural_table.py --model examples/geometry/model.lattice \
        [--only cad_part@8] [--json neural.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # codec_table beside this file

from codec_table import CASES, CLOUDS, LETTERS, markdown_rows, run_rows
from lattice_conformance.codec import NeuralModel, decode_voxels, encode_voxels
from lattice_conformance.codec.baselines import baselines

METHODS = ("neural", "hybrid", "context", "phases", "mix", "mixnn")
"""Per-method columns; mix and mixnn sum only the levels with at least 256 parents (the
mixing methods code no smaller level), so they leave out a few bytes."""


def run_case(
    name: str, levels: int, sparse: bool, model: NeuralModel, other: NeuralModel
) -> dict[str, object]:
    """One row: bits per voxel of each method alone, the file, and the baselines."""
    vox = CLOUDS[name](levels, np.random.default_rng(1), sparse)
    n = max(len(vox), 1)
    start = time.perf_counter()
    res = encode_voxels(vox, levels, model, allow_lzma=False)
    enc_s = time.perf_counter() - start
    start = time.perf_counter()
    back, _ = decode_voxels(res.data, other)
    dec_s = time.perf_counter() - start
    exact = bool(np.array_equal(np.unique(back, axis=0), np.unique(vox, axis=0)))
    base = baselines(vox, levels)
    row: dict[str, object] = {
        "cloud": f"{name}_{'sparse' if sparse else 'dense'}",
        "level": levels,
        "voxels": len(vox),
    }
    for method in METHODS:
        row[method] = sum(lv.get(method, 0.0) for lv in res.level_bits) / n
    row.update(
        file=8 * len(res.data) / n,
        xz=8 * base["xz_bytes"] / n,
        order0=base["order0_bits"] / n,
        methods="".join(LETTERS[m] for m in res.methods),
        exact_other_runtime=exact,
        encode_s=round(enc_s, 1),
        decode_s=round(dec_s, 1),
    )
    row["neural_over_xz"] = float(row["neural"]) / float(row["xz"])  # type: ignore[arg-type]
    return row


def markdown(rows: list[dict[str, object]]) -> str:
    cols = ["cloud", "level", "voxels", *METHODS, "file", "xz", "order0", "neural_over_xz"]
    cols += ["methods", "exact_other_runtime"]
    out = markdown_rows(rows, cols)
    ratios = [float(r["neural_over_xz"]) for r in rows]  # type: ignore[arg-type]
    out.append("")
    out.append(
        f"neural alone / xz over {len(rows)} clouds: mean {sum(ratios) / len(ratios):.3f}, "
        f"min {min(ratios):.3f}, max {max(ratios):.3f}; "
        f"below xz on {sum(x < 1 for x in ratios)} of {len(ratios)}"
    )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="geometry artifact")
    parser.add_argument("--runtime", choices=("torch", "mlx"), default="torch")
    parser.add_argument("--only", nargs="*", help="cases as name@level (both densities)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    model = NeuralModel(args.model, args.runtime)
    other = NeuralModel(args.model, "mlx" if args.runtime == "torch" else "torch")

    def one(name: str, levels: int, sparse: bool) -> dict[str, object]:
        return run_case(name, levels, sparse, model, other)

    rows = run_rows(CASES, args.only, one, args.json)
    print(markdown(rows))


if __name__ == "__main__":
    main()

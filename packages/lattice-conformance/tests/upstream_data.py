"""Where the tests find upstream mlx-lattice 0.6's corpus and fixtures (never copied here).

``$LATTICE_UPSTREAM`` wins; otherwise the nearest ``shared/upstream`` beside
or above the repository (``../shared/upstream`` from a checkout next to it).
A missing directory is a test failure, not a skip: these files are the
reference system's own verdicts.
"""

from __future__ import annotations

import os
from pathlib import Path

UPSTREAM_DIGEST = "1380f1e819fc0eb1af587202ecec3c14ec2c981d249333c5061f0263f82072ad"
"""The schema digest every upstream file carries (mlx-lattice 0.6.x)."""


def upstream_root() -> Path:
    """The ``upstream/`` directory (corpus/ and fixtures/)."""
    if os.environ.get("LATTICE_UPSTREAM"):
        return Path(os.environ["LATTICE_UPSTREAM"])
    repo = Path(__file__).resolve().parents[3]
    for parent in (repo, *repo.parents):
        if (parent / "shared" / "upstream").is_dir():
            return parent / "shared" / "upstream"
    return repo.parent / "shared" / "upstream"


def corpus(kind: str) -> list[Path]:
    """The ``valid`` or ``invalid`` corpus files, sorted; asserts they are there."""
    folder = upstream_root() / "corpus" / kind
    files = sorted(folder.glob("*.mlir"))
    assert files, f"upstream corpus not found at {folder} (set LATTICE_UPSTREAM)"
    return files

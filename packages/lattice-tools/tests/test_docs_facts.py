"""Numbers in the README that are the project's own facts, checked against their sources.

The README's measured table says how much of the reference system's data
(mlx-lattice 0.6's corpus and fixtures, read in place from ``shared/upstream``)
Lattice verifies, rejects and replays.  The counts are the data's, so they
are compared with the files here; the verdicts themselves are the business of
test_upstream_corpus.py and the conformance package's upstream replay tests.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# upstream_data (where the upstream corpus and fixtures are) is the conformance tests' helper.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lattice-conformance" / "tests"))
from upstream_data import corpus, upstream_root

ROOT = Path(__file__).resolve().parents[3]


def test_readme_counts_are_the_upstream_data() -> None:
    text = (ROOT / "README.md").read_text()
    m = re.search(
        r"corpus: (\d+)/(\d+) valid verify, (\d+)/(\d+) invalid rejected[^;]*; "
        r"fixtures: (\d+)/(\d+) cases",
        text,
    )
    assert m is not None, "the README's upstream row changed shape; update this test with it"
    valid, valid_total, invalid, invalid_total, fixtures, fixtures_total = map(int, m.groups())
    manifest = json.loads((upstream_root() / "fixtures" / "manifest.json").read_text())
    assert (valid, invalid, fixtures) == (valid_total, invalid_total, fixtures_total)
    assert valid_total == len(corpus("valid"))
    assert invalid_total == len(corpus("invalid"))
    assert fixtures_total == len(manifest["cases"])

"""Type-check a snippet of user code with mypy (strict), as a user's checker would see it.

Tests of the public typing (overloads, declared signatures) write a few lines
that use the real classes and assert which of them mypy flags.
"""

from __future__ import annotations

from pathlib import Path

from mypy import api as mypy_api


def flagged_lines(tmp_path: Path, source: str) -> tuple[set[int], str]:
    """The 1-based lines of ``source`` with a mypy error, and mypy's whole report."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(source, encoding="utf-8")
    report, _, _ = mypy_api.run([str(snippet), "--strict", "--cache-dir", str(tmp_path / "cache")])
    flagged = {int(line.split(":")[1]) for line in report.splitlines() if ": error:" in line}
    return flagged, report

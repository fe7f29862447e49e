"""Type-check a snippet of user code with mypy (strict), as a user's checker would see it.

The public typing of every package (the typed builder methods, the declared
op keywords, the nn constructors, SparseTensor's overloads) is a promise to
users' type checkers; tests keep it by writing a few lines that use the real
classes and asserting which lines mypy flags.  Needs mypy (a development
dependency), imported only when called.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["flagged_lines"]


def flagged_lines(tmp_path: Path, source: str) -> tuple[set[int], str]:
    """The 1-based lines of ``source`` that mypy ``--strict`` flags, and its whole report.

    ``tmp_path`` (a fresh directory) holds the snippet and mypy's cache.
    """
    from mypy import api

    snippet = tmp_path / "snippet.py"
    snippet.write_text(source, encoding="utf-8")
    report, _, _ = api.run([str(snippet), "--strict", "--cache-dir", str(tmp_path / "cache")])
    flagged = {int(line.split(":")[1]) for line in report.splitlines() if ": error:" in line}
    return flagged, report

"""README.md and docs/*.md run as written: every Python and shell block, in order, on CPU.

A block's info string says what it is: ```` ```python ```` and ```` ```sh ````
blocks run; ```` ```python fragment ```` (a piece of a larger program, with
names the page defines in prose) and ```` ```sh setup ```` (the set-up itself:
``./dev``, building wheels; this environment is its result) are not run, and
the fragments must stay few.  Each page runs in its own scratch directory that
looks like the checkout (its top-level folders linked in), so a page's
relative paths work and what it writes stays out of the tree; its Python
blocks share one namespace, like a reader's one session, and its shell blocks
run with ``bash -euo pipefail`` in between, in page order.  The console scripts
come from this interpreter's environment.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples/README.md"]
RUNNABLE = {"python", "sh", "bash"}
SKIPPED_KINDS = {"fragment", "setup"}
MAX_FRAGMENTS = 8
"""Fragments are allowed, but few: a page that needs many should show a whole program."""

_FENCE = re.compile(r"^```(\S*)[ \t]*(.*)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    kind: str  # "" (runs), "fragment" or "setup"
    text: str

    @property
    def runs(self) -> bool:
        return self.language in RUNNABLE and self.kind not in SKIPPED_KINDS

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` with their language and kind."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        kind = m.group(2).split()[0] if m.group(2) else ""
        found.append(Block(page, start + 1, m.group(1), kind, "\n".join(body) + "\n"))
    return found


_DRIVER = textwrap.dedent(
    """
    import json, subprocess, sys, traceback
    steps = json.load(open(sys.argv[1]))
    namespace = {"__name__": "__main__"}
    for where, language, text in steps:
        print(f"::: {where} ({language})", flush=True)
        if language == "python":
            try:
                exec(compile(text, where, "exec"), namespace)
            except SystemExit as exc:
                if exc.code not in (0, None):
                    print(f"block {where} exited {exc.code}", file=sys.stderr)
                    sys.exit(1)
            except BaseException:
                traceback.print_exc()
                print(f"block {where} raised", file=sys.stderr)
                sys.exit(1)
        else:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", text])
            if done.returncode != 0:
                print(f"block {where} exited {done.returncode}", file=sys.stderr)
                sys.exit(1)
            sys.stdout.flush()
    """
)


def run_page(page: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    """Run ``page``'s runnable blocks in order in ``scratch`` (made to look like the checkout)."""
    import json

    for entry in ROOT.iterdir():
        if entry.name.startswith(".") and entry.name != ".ci":
            continue
        if not (scratch / entry.name).exists():
            (scratch / entry.name).symlink_to(entry)
    steps = [
        (b.where(), "python" if b.language == "python" else "sh", b.text)
        for b in blocks(page)
        if b.runs
    ]
    (scratch / ".steps.json").write_text(json.dumps(steps))
    (scratch / ".driver.py").write_text(_DRIVER)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return subprocess.run(
        [sys.executable, ".driver.py", ".steps.json"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_fragments_are_marked_and_few() -> None:
    every = [b for page in PAGES for b in blocks(page)]
    python_or_shell = [b for b in every if b.language in RUNNABLE]
    assert python_or_shell, "the parser found no blocks"
    unknown = [b.where() for b in python_or_shell if b.kind and b.kind not in SKIPPED_KINDS]
    assert unknown == [], f"unknown block kinds (use 'fragment' or 'setup'): {unknown}"
    shells = {"shell", "console", "zsh", "py", "python3"}
    untagged = [b.where() for b in every if b.language in shells]
    assert untagged == [], f"spell the language python or sh so the runner sees them: {untagged}"
    fragments = [b.where() for b in python_or_shell if b.kind == "fragment"]
    assert len(fragments) <= MAX_FRAGMENTS, fragments


RUN_PAGES = [p for p in PAGES if any(b.runs for b in blocks(p))]


def test_the_readme_tour_is_among_the_pages_run() -> None:
    assert ROOT / "README.md" in RUN_PAGES
    assert sum(b.runs for b in blocks(ROOT / "README.md")) >= 3  # demo, Python, the tools


@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    done = run_page(page, tmp_path)
    assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-6000:])

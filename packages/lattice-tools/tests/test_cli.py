"""The ``lattice`` command's dispatch: its four subcommands, ``python -m``, help and errors.

``python -m lattice_tools`` is run as a real subprocess, so it works the same
whether or not the ``lattice`` console script of this checkout is installed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from lattice_conformance.cli import conformance_main
from lattice_tools.cli import lattice_main

LATTICE_COMMANDS = ("demo", "inspect", "migrate", "view")


def _python_m(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lattice_tools", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_python_m_lists_the_commands_and_runs_one() -> None:
    listed = _python_m("--help")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("usage: lattice ")
    for name in LATTICE_COMMANDS:
        assert f"\n  {name} " in listed.stdout
    inspect_help = _python_m("inspect", "--help")
    assert inspect_help.returncode == 0, inspect_help.stderr
    assert "usage: lattice inspect" in inspect_help.stdout and "--json" in inspect_help.stdout


def test_unknown_or_missing_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert lattice_main(["replay"]) == 2  # conformance's command, not lattice's
    err = capsys.readouterr().err
    assert "lattice: unknown command 'replay'" in err and "  view " in err
    assert lattice_main([]) == 2
    assert "usage: lattice" in capsys.readouterr().err


def test_the_two_commands_keep_their_own_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert conformance_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "replay" in out and "geometry-profile" in out
    assert not any(f"\n  {name} " in out for name in LATTICE_COMMANDS)
    assert conformance_main(["view"]) == 2
    assert "conformance: unknown command 'view'" in capsys.readouterr().err

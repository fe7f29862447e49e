"""lit configuration of the lattice dialect corpus (valid/ and invalid/).

Tools: ``lattice-opt`` from PATH or the repository's ``.venv/bin``, and the
PyPI ``filecheck`` (substituted for ``FileCheck``).  ``%{digest}`` expands to
the schema digest of the built dialect, so corpus files carry the placeholder
``@SCHEMA_DIGEST@`` instead of a digest that would go stale.
"""

# ruff: noqa: F821 - lit injects `config` and `lit_config`

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import lit.formats

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

config.name = "lattice-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["regenerate_valid.py", "lit.cfg.py", "long_stride_chain.py"]
config.test_source_root = str(HERE)
config.test_exec_root = str(Path(os.environ.get("LATTICE_LIT_OUT", REPO / "out" / "lit")))

search = os.pathsep.join([os.environ.get("PATH", ""), str(REPO / ".venv" / "bin")])


def find(tool: str) -> str:
    found = shutil.which(tool, path=search)
    if found is None:
        lit_config.fatal(
            f"{tool} not found on PATH or in {REPO / '.venv' / 'bin'}; "
            "install lattice-mlir and the dev requirements (./dev test does both)"
        )
    return found


lattice_opt = find("lattice-opt")
filecheck = find("filecheck")
config.environment["PATH"] = os.pathsep.join(
    [str(Path(lattice_opt).parent), str(Path(filecheck).parent), os.environ.get("PATH", "")]
)


def built_digest() -> str:
    """The digest compiled into lattice_mlir (falls back to the contract's)."""
    try:
        import lattice_mlir

        return str(lattice_mlir.SCHEMA_DIGEST)
    except ImportError:
        sys.path.insert(0, str(REPO / "packages" / "lattice-contract" / "src"))
        from lattice_contract import SCHEMA_DIGEST

        return SCHEMA_DIGEST


config.substitutions.append(("%{digest}", built_digest()))
config.substitutions.append(("FileCheck", filecheck))
config.substitutions.append(("%{python}", sys.executable))

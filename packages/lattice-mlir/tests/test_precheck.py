"""The forward-reference pre-check that shields MLIR 19's parser bug.

MLIR 19 frees IR twice when a parse fails after a forward reference was
resolved from another region (llvm/llvm-project#107121).  lattice_mlir and
lattice-opt reject every use-before-definition lexically before parsing; these
tests pin that the check fires on such inputs (in a child process, so a
regression is a reported crash, not a dead test run) and never on valid text.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lattice_mlir
import pytest

ALIASES = """!s = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z,
                              feature = row_channel, dtype = f32>
!c = tensor<?x4xi32>
!f = tensor<?x8xf32>
!a = tensor<1xi32>
"""

# The shape that crashed the fuzzer before the pre-check: a module-level op
# using values that a later function defines with other types.
CROSS_REGION = (
    ALIASES
    + """module {
  %4 = "lattice.sparse.cat"(%0, %1) <{join = #lattice.join<inner>}> : (!s, !s) -> !s
  func.func @forward(%c: !c, %f: !f, %a: !a) -> !s {
    %0 = lattice.sparse.make %c, %f, %a {stride = array<i64: 2, 2, 2>} : (!c, !f, !a) -> !s
    %1 = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"}
      : !lattice.weight<conv3d, f32>
    return %0 : !s
  }
}
"""
)


def test_cross_region_forward_reference_is_rejected_without_crash(
    tmp_path: Path, run_opt: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    script = (
        "import lattice_mlir\n"
        "for _ in range(50):\n"
        "    status = lattice_mlir.verify(TEXT)\n"
        "    assert not status.valid\n"
        "print(status.diagnostics)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", f"TEXT = {CROSS_REGION!r}\n" + script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert "use of SSA value %0 before its definition in this region" in child.stdout
    path = tmp_path / "cross.mlir"
    path.write_text(CROSS_REGION, encoding="utf-8")
    run = run_opt(str(path))
    assert run.returncode == 1
    assert "cross.mlir:7:29: error: use of SSA value %0 before its definition" in run.stderr


@pytest.mark.parametrize(
    "text",
    [
        # strings and comments may mention %names
        '// %later is only a comment\nmodule attributes {x.note = "%later"} {}\n',
        # multi-result definitions, result-group uses, a signature with attributes
        ALIASES
        + """func.func @forward(%arg0: !c, %arg1: !f, %arg2: !a) -> !f attributes {x.y} {
  %0 = lattice.sparse.make %arg0, %arg1, %arg2 {stride = array<i64: 1, 1, 1>} : (!c, !f, !a) -> !s
  %1:3 = lattice.sparse.decompose %0 : !s -> (!c, !f, !a)
  %c, %f, %a = lattice.sparse.decompose %0 : !s -> (!c, !f, !a)
  %2 = lattice.softmax %1#1 : (!f) -> !f
  return %f : !f
}
""",
    ],
)
def test_valid_text_passes_the_precheck(text: str) -> None:
    status = lattice_mlir.verify(text)
    assert "before its definition" not in status.diagnostics, status.diagnostics


def test_generic_form_passes_the_precheck(
    valid_modules: dict[str, str], run_opt: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    for name in ("unet_block", "call", "voxelize"):
        generic = run_opt("--mlir-print-op-generic", "-", stdin=valid_modules[name]).stdout
        status = lattice_mlir.verify(generic)
        assert status.valid, (name, status.diagnostics)

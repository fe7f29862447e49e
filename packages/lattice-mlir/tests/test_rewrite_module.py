"""``lattice_mlir.rewrite_module``: op verification, module-attribute edits, MLIR's printing."""

from __future__ import annotations

import lattice_mlir
import pytest

S = "!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>"
ARGS = "(tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>)"
BARE = f"""
!s = {S}
module attributes {{lattice.output_roles = ["tensor"], lattice.ir_version = 2 : i32}} {{
  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s {{
    %x = lattice.sparse.make %c, %f, %a {{stride = array<i64: 2, 2, 2>}} : {ARGS} -> !s
    %y = lattice.sparse.binary %x, %x
        {{op = #lattice.binary_op<max>, join = #lattice.join<inner>}} : (!s, !s) -> !s
    return %y : !s
  }}
}}
"""


def test_edits_module_attributes_and_prints_canonically() -> None:
    found = lattice_mlir.rewrite_module(
        BARE, {"lattice.output_roles": ["sparse_tensor"], "lattice.weight_file": "w"}
    )
    # the module as parsed (the artifact rules do not run: no digest needed)
    assert found.attributes == {"lattice.ir_version": 2, "lattice.output_roles": ["tensor"]}
    assert found.results == ["sparse"]
    assert 'lattice.output_roles = ["sparse_tensor"]' in found.printed
    assert 'lattice.weight_file = "w"' in found.printed
    assert "#lattice.binary_op<maximum>" in found.printed  # the synonym prints canonically
    assert lattice_mlir.rewrite_module(found.printed, {}).printed == found.printed


def test_rejects_what_does_not_parse_or_verify() -> None:
    with pytest.raises(lattice_mlir.LatticeMLIRError, match="unknown binary_op 'pow'"):
        lattice_mlir.rewrite_module(BARE.replace("<max>", "<pow>"), {})
    bad_stride = BARE.replace("%x, %x", "%x, %c")
    with pytest.raises(lattice_mlir.LatticeMLIRError):
        lattice_mlir.rewrite_module(bad_stride, {})
    forward = BARE.replace("%x = lattice.sparse.make", "%z = lattice.sparse.make").replace(
        "lattice.sparse.binary %x, %x", "lattice.sparse.binary %z, %q"
    )
    with pytest.raises(lattice_mlir.LatticeMLIRError):
        lattice_mlir.rewrite_module(forward, {})


def test_attribute_values_are_strings_or_string_lists() -> None:
    with pytest.raises(TypeError, match=r"'lattice\.ir_version' must be a str"):
        lattice_mlir.rewrite_module(BARE, {"lattice.ir_version": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        lattice_mlir.rewrite_module(123, {})  # type: ignore[arg-type]

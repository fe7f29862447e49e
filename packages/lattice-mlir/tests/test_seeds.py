"""The seed documents' MLIR, as written, parses and verifies natively.

The seeds show fragments (a packed weight, a support-preserving feature update)
and the artifact's module attributes.  SPEC binds three details the fragments
leave open, and only those are adjusted: the digest is the real schema digest,
sparse input ABI names are ``<name>_coords/_features/_active``, and the body is
a complete ``@forward`` around the fragments.
"""

from __future__ import annotations

import lattice_mlir
import pytest

SPARSE16 = """!lattice.sparse_tensor<rank = 3,
                           coord = batch_x_y_z,
                           feature = row_channel,
                           dtype = f16>"""

# Fragments exactly as the seeds spell them (000: quantization model and
# feature-only updates).
PACKED_WEIGHT = """%w = lattice.weight @stem.qweight
  {storage_key = "stem.qweight",
   layout = #lattice.weight_layout<conv3d_o_xyz_i>,
   packing = #lattice.packing<int4,
                              group_size = 32,
                              scale_dtype = f16,
                              mode = affine>}
  : !lattice.weight<conv3d, i4>"""

FEATURE_UPDATE = """%coords, %features, %active = lattice.sparse.decompose %input
  : !lattice.sparse_tensor<rank = 3,
                           coord = batch_x_y_z,
                           feature = row_channel,
                           dtype = f16>
    -> (tensor<?x4xi32>, tensor<?x32xf16>, tensor<1xi32>)

%features2 = lattice.activation %features
  {kind = #lattice.activation<relu>,
   approximate = #lattice.gelu_approx<none>,
   alpha = 0.01 : f32,
   beta = 1.0 : f32,
   threshold = 20.0 : f32}
  : (tensor<?x32xf16>) -> tensor<?x32xf16>

%out = lattice.sparse.with_features %input, %features2
  : (!lattice.sparse_tensor<rank = 3,
                            coord = batch_x_y_z,
                            feature = row_channel,
                            dtype = f16>,
     tensor<?x32xf16>)
    -> !lattice.sparse_tensor<rank = 3,
                              coord = batch_x_y_z,
                              feature = row_channel,
                              dtype = f16>"""

# The seed's module attributes, with the SPEC-bound ABI names and real digest.
MODULE_ATTRS = """module attributes {{
  lattice.ir_version = 2,
  lattice.schema_digest = "{digest}",
  lattice.input_names = ["x_coords", "x_features", "x_active"],
  lattice.input_roles = ["sparse_coords",
                         "sparse_features",
                         "sparse_active"],
  lattice.output_names = ["output"],
  lattice.output_roles = ["sparse_tensor"],
  lattice.weight_file = "weights.safetensors"
}}"""


def seed_module(body: str) -> str:
    """The seed fragments inside a complete @forward entry."""
    indented = "\n".join("    " + line if line else "" for line in body.splitlines())
    return (
        MODULE_ATTRS.format(digest=lattice_mlir.SCHEMA_DIGEST)
        + " {\n"
        + "  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x32xf16>, %a: tensor<1xi32>)\n"
        + f"      -> {SPARSE16} {{\n"
        + "    %input = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>}\n"
        + f"      : (tensor<?x4xi32>, tensor<?x32xf16>, tensor<1xi32>) -> {SPARSE16}\n"
        + indented
        + f"\n    return %out : {SPARSE16}\n  }}\n}}\n"
    )


def test_seed_feature_update_and_packed_weight_verify() -> None:
    text = seed_module(PACKED_WEIGHT + "\n\n" + FEATURE_UPDATE)
    status = lattice_mlir.verify(text)
    assert status.valid, status.diagnostics
    plan = lattice_mlir.import_plan(text)
    names = [op["name"] for op in plan["ops"]]
    assert names == [
        "lattice.sparse.make",
        "lattice.weight",
        "lattice.sparse.decompose",
        "lattice.activation",
        "lattice.sparse.with_features",
    ]
    weight = plan["ops"][1]["attrs"]
    assert weight["packing"] == {
        "bits": "int4",
        "group_size": 32,
        "scale_dtype": "f16",
        "mode": "affine",
    }
    assert weight["sym_name"] == "stem.qweight" and weight["layout"] == "conv3d_o_xyz_i"
    assert plan["outputs"][0]["abi_name"] == "output"


def test_seed_module_attributes_are_checked() -> None:
    """The seed's placeholder digest ("...") is what the verifier must refuse."""
    text = seed_module(FEATURE_UPDATE).replace(lattice_mlir.SCHEMA_DIGEST, "...")
    status = lattice_mlir.verify(text)
    assert not status.valid
    assert "does not match this build's schema digest" in status.diagnostics


def test_seed_bare_abi_names_verify_for_a_single_sparse_input() -> None:
    """The seeds' own header: the only sparse input may be coords, features, active."""
    bare = '["coords", "features", "active"]'
    text = seed_module(FEATURE_UPDATE).replace('["x_coords", "x_features", "x_active"]', bare)
    status = lattice_mlir.verify(text)
    assert status.valid, status.diagnostics


@pytest.mark.parametrize(
    ("legacy", "needle"),
    [
        ('["coords", "feats", "active"]', "the bare sparse input needs 'features'"),
        ('["coordinates", "x_features", "x_active"]', "must be <name>_coords"),
        ('["x_coords", "x_features"]', "has 3 arguments but lattice.input_names has 2"),
    ],
)
def test_seed_abi_names_follow_spec(legacy: str, needle: str) -> None:
    """Sparse ABI names are <name>_coords/_features/_active (or bare, for one input)."""
    text = seed_module(FEATURE_UPDATE).replace('["x_coords", "x_features", "x_active"]', legacy)
    status = lattice_mlir.verify(text)
    assert not status.valid and needle in status.diagnostics, status.diagnostics

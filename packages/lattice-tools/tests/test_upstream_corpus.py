"""Upstream mlx-lattice 0.6's own verifier corpus, read in place (``../shared/upstream``).

* Every ``corpus/valid`` file migrates (``lattice migrate``'s graph step),
  verifies natively under Lattice's rules, imports as a typed plan, and its
  printed form is a fixed point (print, parse, print).
* Every ``corpus/invalid`` file is rejected, and for the reason its first
  comment line names: :data:`INVALID` pins, per file, that line and the
  substring of Lattice's diagnostic that states the same defect.  A file
  added to (or dropped from) the corpus fails the test until the table says
  what it expects.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lattice_mlir
import pytest
from lattice_contract import SCHEMA_DIGEST
from lattice_contract.plan import RuntimePlan, typecheck_plan
from lattice_tools.migrate import MigrationError, migrate_graph

# upstream_data (where the upstream corpus and fixtures are) is the conformance tests' helper.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lattice-conformance" / "tests"))
from upstream_data import UPSTREAM_DIGEST, corpus

VALID = {p.name: p for p in corpus("valid")}
INVALID_FILES = {p.name: p for p in corpus("invalid")}

ISSUE_12 = "issue 12 op"
"""Files of the ops issue 12 added (normalised convolutions, pool_transpose3d,
trilinear_upsample3d): before those ops landed they were rejected as unknown
ops; now each is rejected (or accepted) for its own reason like every other."""

# file -> (words of its first comment line, Lattice's diagnostic, owner note)
INVALID: dict[str, tuple[str, str, str]] = {
    "activation_bad_kind.mlir": (
        "activation kind is part of the stable ABI enum",
        "unknown activation 'mish'; expected one of: relu, leaky_relu, gelu",
        "",
    ),
    "activation_bad_rank.mlir": (
        "feature activations operate on rank-2 feature tensors",
        "'lattice.activation' op operand 'input' (#0) must be a rank-2 float feature tensor",
        "",
    ),
    "conv_bad_bias_family.mlir": (
        "optional convolution bias must be a bias-family weight",
        "'lattice.conv3d' op operand 'bias' (#2) must be a weight of family bias, got family "
        "conv3d",
        "",
    ),
    "conv_bad_weight_layout.mlir": (
        "lattice.conv3d requires a conv3d-compatible weight layout",
        "'lattice.conv3d' op operand 'weight' (#1) must be a weight of family conv3d, got family "
        "linear",
        "",
    ),
    "devoxelize_bad_interpolation.mlir": (
        "interpolation must be nearest or linear",
        "unknown point_interpolation 'cubic'; expected one of: nearest, linear, trilinear",
        "",
    ),
    "empty_entry_return.mlir": (
        "executable artifacts must return at least one value",
        "lattice artifact: @forward returns no values",
        "",
    ),
    "generative_with_padding.mlir": (
        "generative transpose convolution must not carry padding/dilation",
        "'lattice.generative_conv_transpose3d' op takes no padding or dilation",
        "",
    ),
    "global_pool_bad_batch_size.mlir": (
        "batch_size must be -1 for inferred size or non-negative",
        "'lattice.global_pool' op attribute 'batch_size' = -2 must be >= -1",
        "",
    ),
    "missing_entry_function.mlir": (
        "executable artifacts require one @forward function",
        "lattice artifact: expected exactly one func.func @forward, found 0 functions",
        "",
    ),
    "missing_ir_version.mlir": (
        "lattice artifact modules must declare the dialect ABI version",
        "lattice artifact: module attribute lattice.ir_version is missing",
        "",
    ),
    "missing_weight_file.mlir": (
        "lattice artifact modules must declare the weight payload file",
        "lattice artifact: module attribute lattice.weight_file is missing",
        "",
    ),
    "multiple_entry_functions.mlir": (
        "executable artifacts must not contain multiple functions",
        "lattice artifact: function @aux is not the entry; an artifact has exactly one func.func",
        "",
    ),
    "non_lattice_entry_op.mlir": (
        "executable artifact bodies may only contain lattice ops and return",
        "lattice artifact: @forward may contain only lattice ops and func.return, found "
        "'func.call'",
        "",
    ),
    "norm_bad_eps.mlir": (
        "normalization epsilon must be positive",
        "'lattice.rms_norm' op attribute 'eps' = 0 must be > 0",
        "",
    ),
    "norm_bad_weight_family.mlir": (
        "normalization scale/mean/var must use channel-family weights",
        "'lattice.layer_norm' op operand 'scale' (#1) must be a weight of family channel",
        "",
    ),
    "normalized_conv_bad_eps.mlir": (
        "normalized convolution epsilon must be positive",
        "'lattice.normalized_subm_conv3d' op attribute 'eps' = 0 must be > 0",
        ISSUE_12,
    ),
    "pool_bad_mode.mlir": (
        "pooling mode must be sum, max, or avg",
        "unknown pool_mode 'median'; expected one of: max, avg, sum",
        "",
    ),
    "pool_transpose_bad_stride.mlir": (
        "pooling-transpose stride components must be positive",
        "'lattice.pool_transpose3d' op attribute 'stride' = (2, 0, 2) must have every component "
        ">= 1",
        ISSUE_12,
    ),
    "quantized_conv_op_rejected.mlir": (
        "quantized conv must be lattice.conv3d with quantized weight type",
        "'lattice.quantized_conv3d' is not defined by the lattice dialect; quantized op variants "
        "are not part of the dialect",
        "",
    ),
    "sparse_binary_bad_op.mlir": (
        "sparse binary op must be one of the supported elementwise modes",
        "unknown binary_op 'divide'; expected one of: add, sub, mul, maximum, minimum",
        "",
    ),
    "sparse_make_bad_coords.mlir": (
        "sparse coordinates must have second dimension 4",
        "'lattice.sparse.make' op operand 'coords' (#0) must be coordinates tensor<?x4xi32>",
        "",
    ),
    "sparse_reindex_bad_result_dtype.mlir": (
        "sparse reindex result features must keep the source dtype",
        "'lattice.sparse.reindex' op mixes element types: 'input' stores f32 but 'result' stores "
        "f16",
        "",
    ),
    "subm_with_stride.mlir": (
        "lattice.subm_conv3d must not carry stride or padding",
        "'lattice.subm_conv3d' op takes no stride or padding",
        "",
    ),
    "target_normalized_conv_transpose_bad_eps.mlir": (
        "target normalized transpose convolution epsilon must be positive",
        "'lattice.target_normalized_conv_transpose3d' op attribute 'eps' = 0 must be > 0",
        ISSUE_12,
    ),
    "trilinear_upsample_bad_stride.mlir": (
        "trilinear upsampling stride must be positive",
        "'lattice.trilinear_upsample3d' op attribute 'stride' = (2, 0, 2) must have every "
        "component >= 1",
        ISSUE_12,
    ),
    "unsupported_ir_version.mlir": (
        "only lattice.ir_version = 2 is currently accepted",
        "lattice artifact: lattice.ir_version = 1 : i64 is not supported",
        "",
    ),
    "unsupported_weight_file.mlir": (
        "the current artifact ABI uses a fixed safetensors payload name",
        'lattice artifact: lattice.weight_file = "model.safetensors" is not allowed',
        "",
    ),
    "voxelize_bad_points.mlir": (
        "point tensor must have trailing xyz dimension 3",
        "'lattice.voxelize' op operand 'points' (#0) must be points tensor<?x3xf32>, got "
        "tensor<?x4xf32>",
        "",
    ),
    "wrong_entry_name.mlir": (
        "the executable artifact entry point is named @forward",
        "lattice artifact: function @predict is not the entry",
        "",
    ),
}

VALID_ISSUE_12 = frozenset(
    {
        "normalized_subm_conv3d_basic.mlir",
        "pool_transpose3d_target.mlir",
        "target_normalized_conv_transpose3d.mlir",
        "trilinear_upsample3d_target.mlir",
    }
)
"""Valid files that need the ops of issue 12 (they verify since those ops landed)."""


def test_the_tables_cover_exactly_the_corpus() -> None:
    assert len(VALID) == 21 and len(INVALID_FILES) == 29
    assert set(INVALID) == set(INVALID_FILES)
    assert set(VALID) >= VALID_ISSUE_12
    assert sum(1 for *_, note in INVALID.values() if note == ISSUE_12) == 4


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_file_migrates_verifies_and_reprints(name: str) -> None:
    text = VALID[name].read_text()
    assert UPSTREAM_DIGEST in text
    migrated = migrate_graph(text, where=name)
    assert migrated.producer == "mlx-lattice 0.6.x"
    assert migrated.changes[0].what == "lattice.schema_digest"
    assert migrated.changes[0].after == SCHEMA_DIGEST
    status = lattice_mlir.verify(migrated.text)
    assert status.valid, status.diagnostics
    # print, parse, print is a fixed point
    again = lattice_mlir.rewrite_module(migrated.text, {}).printed
    assert again == migrated.text
    typecheck_plan(RuntimePlan.from_native(lattice_mlir.import_plan(again)))


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_file_is_rejected_for_its_named_defect(name: str) -> None:
    reason, diagnostic, _note = INVALID[name]
    text = INVALID_FILES[name].read_text()
    first = text.splitlines()[0]
    assert first.startswith("// Invalid:") and reason in first, first
    with pytest.raises(MigrationError) as info:
        migrate_graph(text, where=name)
    assert diagnostic in str(info.value)


def test_an_unmigrated_upstream_file_names_the_migration() -> None:
    """Nothing migrates at load time: the verifier points at `lattice migrate`."""
    status = lattice_mlir.verify(VALID["conv3d_basic.mlir"].read_text())
    assert not status.valid
    assert "schema digest of mlx-lattice 0.6.x" in status.diagnostics
    assert "lattice migrate SRC DST" in status.diagnostics

"""Regenerate the valid lit files of the weight-normalised, upsampling and lookup ops.

The same generator as ``regenerate_valid.py`` (builder program -> lattice-opt's
printed form with the digest placeholder), for the ops the reference system
has beyond the first contract; it writes only these files::

    .venv/bin/python packages/lattice-mlir/test/regenerate_valid_extra.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import regenerate_valid as base
from lattice_contract.builder import MLIRModuleBuilder, Value, tensor_type

program, conv_weight, vector = base.program, base.conv_weight, base.vector
_BEFORE = set(base.PROGRAMS)


@program("normalized_subm_conv3d", "lattice.normalized_subm_conv3d %0, %1, %2")
def _normalized_subm(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=4, dtype="f16")
    w = conv_weight(b, "block.weight", 8, (3, 3, 3), 4, "f16")
    bias = vector(b, "block.bias", "bias_c", 8, "f16")
    y = b.normalized_subm_conv3d(input=x, weight=w, bias=bias, kernel_size=3, eps=1e-8)
    return [("y", y)]


@program(
    "normalized_conv_transpose3d",
    "lattice.normalized_conv_transpose3d %0, %1",
    "lattice.normalized_generative_conv_transpose3d %0, %2",
)
def _normalized_transposes(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    w = conv_weight(b, "up.weight", 4, (3, 3, 3), 8, "f32")
    g = conv_weight(b, "gen.weight", 4, (2, 2, 2), 8, "f32")
    up = b.normalized_conv_transpose3d(
        input=x, weight=w, kernel_size=3, stride=2, padding=1, eps=1e-8
    )
    gen = b.normalized_generative_conv_transpose3d(
        input=x, weight=g, kernel_size=2, stride=2, eps=1e-8
    )
    return [("up", up), ("gen", gen)]


@program(
    "target_normalized_conv_transpose3d",
    "lattice.target_normalized_conv_transpose3d %0, %1, %2, %3",
)
def _target_normalized(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=1, dtype="f32", stride=(2, 1, 1))
    t = b.add_sparse_input("t", channels=1, dtype="f32")
    w = conv_weight(b, "up.weight", 2, (3, 1, 1), 1, "f32")
    bias = vector(b, "up.bias", "bias_c", 2, "f32")
    y = b.target_normalized_conv_transpose3d(
        input=x,
        target=t,
        weight=w,
        bias=bias,
        kernel_size=(3, 1, 1),
        stride=(2, 1, 1),
        padding=(1, 0, 0),
        eps=1e-6,
    )
    return [("y", y)]


@program(
    "pool_transpose3d",
    "lattice.pool_transpose3d %0, %1 {dilation",
    "lattice.pool_transpose3d %0 {dilation",
)
def _pool_transpose(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=8, dtype="f32", stride=2)
    t = b.add_sparse_input("t", channels=1, dtype="f32")
    onto = b.pool_transpose3d(input=x, target=t, kernel_size=2, stride=2)
    derived = b.pool_transpose3d(input=x, kernel_size=3, stride=2, padding=1)
    return [("onto", onto), ("derived", derived)]


@program(
    "trilinear_upsample3d",
    "lattice.trilinear_upsample3d %0, %1 {stride = array<i64: 2, 2, 2>}",
    "lattice.trilinear_upsample3d %0 {stride = array<i64: 2, 1, 1>}",
)
def _trilinear(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=8, dtype="bf16", stride=2)
    t = b.add_sparse_input("t", channels=1, dtype="bf16")
    onto = b.trilinear_upsample3d(input=x, target=t, stride=2)
    derived = b.trilinear_upsample3d(input=x, stride=(2, 1, 1))
    return [("onto", onto), ("derived", derived)]


@program("embedding_lookup", "lattice.embedding_lookup %arg0, %0 : (tensor<?xi32>")
def _embedding(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    idx = b.add_input("idx", tensor_type([None], "i32"))
    table = b.weight(storage_key="embed.weight", layout="embedding_n_c", dtype="f16", shape=(16, 4))
    return [("rows", b.embedding_lookup(indices=idx, weight=table))]


@program(
    "elementwise",
    'lattice.elementwise %arg0 {kind = "exp"}',
    'lattice.elementwise %0 {kind = "round"}',
)
def _elementwise(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_input("x", tensor_type([None, 4], "f32"))
    e = b.elementwise(input=x, kind="exp")
    return [("y", b.elementwise(input=e, kind="round"))]


@program(
    "sparse_crop",
    "lattice.sparse.crop %0 {lower = array<i64: 0, 0, 0>, upper = array<i64: 88, 100, 20>}",
)
def _crop(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=(2, 2, 4))
    return [("y", b.sparse_crop(input=x, lower=0, upper=(88, 100, 20)))]


@program(
    "sparse_to_dense",
    'lattice.sparse.to_dense %0 {batch_size = 2 : i64, layout = "b_cz_y_x"',
    'lattice.sparse.to_dense %0 {batch_size = 2 : i64, layout = "b_c_z_y_x"',
)
def _to_dense(b: MLIRModuleBuilder) -> list[tuple[str, Value]]:
    x = b.add_sparse_input("x", channels=8, dtype="f16", stride=(8, 8, 16))
    bev = b.sparse_to_dense(input=x, spatial_shape=(22, 25, 2), batch_size=2, layout="b_cz_y_x")
    vol = b.sparse_to_dense(input=x, spatial_shape=(22, 25, 2), batch_size=2, layout="b_c_z_y_x")
    return [("bev", bev), ("volume", vol)]


def main() -> int:
    """Write only this file's programs."""
    mine = {k: v for k, v in base.PROGRAMS.items() if k not in _BEFORE}
    base.PROGRAMS.clear()
    base.PROGRAMS.update(mine)
    return base.main()


if __name__ == "__main__":
    sys.exit(main())

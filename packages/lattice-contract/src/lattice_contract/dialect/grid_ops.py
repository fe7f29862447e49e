"""Lattice-only grid ops: spconv's grid bounds and its sparse-to-dense hand-off.

spconv drops every output of a strided, pooled or transposed convolution that
falls outside the layer's output spatial shape, and hands a backbone's output
to a 2D head as a dense ``(N, C, D, H, W)`` array.  Upstream's ops have no
notion of a grid, so both are explicit ops here (semantics: docs/semantics.md,
"Grid bounds and the dense hand-off"): a graph without them means what it
meant before, and a graph with them says where its support is cut.
"""

from __future__ import annotations

from typing import Annotated

from lattice_contract.dialect.op_base import Op, _Sparse, _SparseResult
from lattice_contract.dialect.rules import use
from lattice_contract.dialect.types import (
    POSITIVE_I64,
    POSITIVE_TRIPLE,
    TENSOR,
    Attribute,
    AttrKind,
    AttrSpec,
    ChannelRule,
    Result,
    StrideRule,
)

DENSE_LAYOUTS: tuple[str, ...] = ("b_c_z_y_x", "b_z_y_x_c", "b_c_x_y_z", "b_x_y_z_c", "b_cz_y_x")
"""Axis orders of ``sparse.to_dense``'s result.  ``b_c_z_y_x`` is spconv's ``dense()`` of
``(b, z, y, x)`` indices; ``b_cz_y_x`` folds depth into channels as OpenPCDet's height
compression does (channel ``c * Z + z``)."""

_AnyTriple = Annotated[Attribute, AttrSpec(AttrKind.triple)]


class SparseCrop(Op):
    """Keep the rows whose physical coordinates lie in a static box (spconv's grid bounds)."""

    __mnemonic__ = "sparse.crop"
    __stride__ = StrideRule.input
    __channels__ = ChannelRule.input
    __rules__ = (use("crop.box"), use("crop.stride"))
    input: _Sparse
    result: _SparseResult
    lower: _AnyTriple
    upper: _AnyTriple


class SparseToDense(Op):
    """Scatter a sparse value into a zero dense array of a static grid (spconv's dense())."""

    __mnemonic__ = "sparse.to_dense"
    __channels__ = ChannelRule.none
    __rules__ = (use("dense.shape"), use("dense.dtype"))
    input: _Sparse
    result: Annotated[Result, TENSOR]
    spatial_shape: Annotated[Attribute, POSITIVE_TRIPLE]
    batch_size: Annotated[Attribute, POSITIVE_I64]
    layout: Annotated[Attribute, AttrSpec(AttrKind.string, allowed=DENSE_LAYOUTS)]

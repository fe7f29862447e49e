"""What the two runtimes' user APIs share, as data and plain functions.

Above :mod:`lattice_contract.builder`.  The functional ops' declarations
(:mod:`.ops`, :mod:`.signatures`, :mod:`.op_attrs`, :mod:`.op_checks`,
:mod:`.op_errors`), the ``nn`` layers' declarations (``nn_*``), the sparse
value's rules and words (:mod:`.sparse_tensor`, :mod:`.sparse_errors`,
:mod:`.feature_names`, :mod:`.row_order`), and what each runtime's kernel
maps, point ops, occupancy utilities, casts and packed weights have in
common.  Each runtime implements its own behaviour on top of these.
"""

from __future__ import annotations

from lattice_contract.frontend import (
    grid,
    nn_activations,
    nn_convs,
    nn_features,
    nn_layers,
    occupancy,
    op_errors,
    ops,
    row_order,
    signatures,
    sparse_errors,
)
from lattice_contract.frontend.feature_names import (
    FEATS,
    feature_keyword_aliases,
    given_features,
)
from lattice_contract.frontend.float_formats import (
    FLOAT_FORMATS,
    FloatFormat,
    cast_source_error,
    cast_target_error,
)
from lattice_contract.frontend.grid import (
    check_crop_box,
    dense_axes,
    spconv_conv_out,
    spconv_transpose_out,
)
from lattice_contract.frontend.kernel_map import (
    TapPairs,
    cached_relation,
    target_key,
)
from lattice_contract.frontend.nn_args import (
    ConvParams,
)
from lattice_contract.frontend.nn_layers import (
    Layer,
)
from lattice_contract.frontend.nn_names import (
    DECLARED_LAYERS,
    NN_NAMES,
    RUNTIME_LAYER_NAMES,
)
from lattice_contract.frontend.occupancy import (
    CHILD_TAPS,
    TAP_BITS,
)
from lattice_contract.frontend.op_attrs import (
    REQUIRED,
    keyword_error,
)
from lattice_contract.frontend.op_errors import (
    check_elementwise,
)
from lattice_contract.frontend.ops import (
    OP_NAMES,
)
from lattice_contract.frontend.points import (
    DevoxelizeInputs,
    PointPrologue,
    VoxelizeInputs,
)
from lattice_contract.frontend.quant import (
    PackedWeight,
)
from lattice_contract.frontend.row_order import (
    canonical_order,
    morton_keys,
)
from lattice_contract.frontend.signatures import (
    OLD_SPELLINGS,
    Attrs,
    implement,
    trusted,
)
from lattice_contract.frontend.sparse_errors import (
    ARRAY_TYPES,
)
from lattice_contract.frontend.sparse_tensor import (
    SparseTensorBase,
)
from lattice_contract.frontend.upstream_ops import UPSTREAM_OP_NAMES, UpstreamOps

__all__ = [
    "ARRAY_TYPES",
    "CHILD_TAPS",
    "DECLARED_LAYERS",
    "FEATS",
    "FLOAT_FORMATS",
    "NN_NAMES",
    "OLD_SPELLINGS",
    "OP_NAMES",
    "REQUIRED",
    "RUNTIME_LAYER_NAMES",
    "TAP_BITS",
    "UPSTREAM_OP_NAMES",
    "Attrs",
    "ConvParams",
    "DevoxelizeInputs",
    "FloatFormat",
    "Layer",
    "PackedWeight",
    "PointPrologue",
    "SparseTensorBase",
    "TapPairs",
    "UpstreamOps",
    "VoxelizeInputs",
    "cached_relation",
    "canonical_order",
    "cast_source_error",
    "cast_target_error",
    "check_crop_box",
    "check_elementwise",
    "dense_axes",
    "feature_keyword_aliases",
    "given_features",
    "grid",
    "implement",
    "keyword_error",
    "morton_keys",
    "nn_activations",
    "nn_convs",
    "nn_features",
    "nn_layers",
    "occupancy",
    "op_errors",
    "ops",
    "row_order",
    "signatures",
    "sparse_errors",
    "spconv_conv_out",
    "spconv_transpose_out",
    "target_key",
    "trusted",
]

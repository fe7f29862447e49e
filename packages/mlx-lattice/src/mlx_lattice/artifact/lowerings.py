"""MLX lowerings of every lattice op, bound to the schema by parameter names.

Each function below is registered with :data:`MLX_LOWERINGS` through
``artifact_lowering``: its parameters are the op's operands and attributes
(checked against the schema at import time), and it calls the matching
:mod:`mlx_lattice.ops` function.  Weight operands arrive already resolved --
a dense ``mx.array`` or a :class:`~mlx_lattice.ops.quant.QuantizedWeight` --
and their shapes are checked against the consuming op by the weight specs
(``conv_weight`` etc.) before the lowering runs.

``accumulation`` is accepted and not branched on: the schema allows only
``canonical_f32``, which every MLX conv, pool and linear kernel implements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
from lattice_contract.kernel import Triple
from lattice_contract.lowering import (
    ExecutionContext,
    LoweringRegistry,
    bias_weight,
    channel_weight,
    conv_weight,
    linear_weight,
)

from mlx_lattice.ops.algebra import sparse_binary, sparse_cat, sparse_reindex
from mlx_lattice.ops.cast import cast
from mlx_lattice.ops.conv import (
    conv3d,
    conv_transpose3d,
    full_conv3d,
    generative_conv_transpose3d,
    subm_conv3d,
)
from mlx_lattice.ops.feature import (
    activation,
    batch_norm,
    layer_norm,
    linear,
    rms_norm,
    softmax,
)
from mlx_lattice.ops.points import devoxelize, voxelize
from mlx_lattice.ops.pool import full_pool3d, global_pool, pool3d
from mlx_lattice.ops.quant import QuantizedWeight
from mlx_lattice.sparse import SparseTensor

__all__ = ["MLX_LOWERINGS", "artifact_lowering"]

MLX_LOWERINGS = LoweringRegistry("mlx")
"""Every lattice op's MLX lowering and every primitive's MLX implementation."""

artifact_lowering = MLX_LOWERINGS.artifact_lowering
"""Decorator registering an MLX lowering (see ``LoweringRegistry.artifact_lowering``)."""

_MX_DTYPES = {"f16": mx.float16, "bf16": mx.bfloat16, "f32": mx.float32}

Weight = mx.array | QuantizedWeight
_CONV = {"weight": conv_weight(input="input"), "bias": bias_weight(of="weight")}


# ---------------------------------------------------------------------------
# Sparse ABI and weights.


@artifact_lowering(op="sparse.make")
def sparse_make_from_artifact(
    context: ExecutionContext,
    coords: mx.array,
    features: mx.array,
    active: mx.array,
    *,
    stride: Triple,
    coord_order: str | None = None,
) -> SparseTensor:
    """Validate the ABI arrays (``docs/artifact.md``) into a SparseTensor at the declared stride."""
    if context.trusted_sparse_inputs:
        return SparseTensor.trusted(coords, features, stride, active_rows=active)
    return SparseTensor(coords, features, stride, active_rows=active)


@artifact_lowering(op="sparse.decompose")
def sparse_decompose_from_artifact(input: SparseTensor) -> tuple[mx.array, mx.array, mx.array]:
    """The ABI arrays of a sparse value."""
    return input.coords, input.feats, input.active_rows


@artifact_lowering(op="sparse.with_features")
def sparse_with_features_from_artifact(input: SparseTensor, features: mx.array) -> SparseTensor:
    """Same support, new feature rows."""
    return input.with_feats(features)


@artifact_lowering(op="sparse.reindex")
def sparse_reindex_from_artifact(
    input: SparseTensor, target: SparseTensor, *, fill: float | None = None
) -> SparseTensor:
    """Features gathered onto the target's rows, ``fill`` (default 0) where absent."""
    return sparse_reindex(input, target, fill=0.0 if fill is None else fill)


@artifact_lowering(op="weight")
def weight_from_artifact(
    context: ExecutionContext,
    *,
    sym_name: str,
    storage_key: str,
    layout: str,
    packing: Any,
) -> Weight:
    """The weight resolved (and checked) at compile time under ``storage_key``."""
    value: Weight = context.weight(storage_key)
    return value


# ---------------------------------------------------------------------------
# Convolutions and pooling.


_CONVOLUTIONS: dict[str, Callable[..., SparseTensor]] = {
    "conv3d": conv3d,
    "full_conv3d": full_conv3d,
    "conv_transpose3d": conv_transpose3d,
    "target_conv3d": conv3d,
    "target_conv_transpose3d": conv_transpose3d,
}
"""The ``mlx_lattice.ops`` function behind each strided convolution op."""


@artifact_lowering(op=("conv3d", "full_conv3d", "conv_transpose3d"), weights=_CONV)
def conv_from_artifact(
    context: ExecutionContext,
    input: SparseTensor,
    weight: Weight,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    accumulation: str,
) -> SparseTensor:
    """Convolution, transposed convolution or support expansion over its derived support."""
    return _CONVOLUTIONS[context.op.name](
        input,
        weight,
        bias,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
    )


@artifact_lowering(op="generative_conv_transpose3d", weights=_CONV)
def generative_conv_transpose3d_from_artifact(
    input: SparseTensor,
    weight: Weight,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    accumulation: str,
) -> SparseTensor:
    """Support expansion ``o = c*s + k``."""
    return generative_conv_transpose3d(input, weight, bias, kernel_size=kernel_size, stride=stride)


@artifact_lowering(op=("target_conv3d", "target_conv_transpose3d"), weights=_CONV)
def target_conv_from_artifact(
    context: ExecutionContext,
    input: SparseTensor,
    target: SparseTensor,
    weight: Weight,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    accumulation: str,
) -> SparseTensor:
    """(Transposed) convolution evaluated at the target's rows (``coordinates=target``)."""
    return _CONVOLUTIONS[context.op.name](
        input,
        weight,
        bias,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
        coordinates=target,
    )


@artifact_lowering(op="subm_conv3d", weights=_CONV)
def subm_conv3d_from_artifact(
    input: SparseTensor,
    weight: Weight,
    bias: mx.array | None = None,
    *,
    kernel_size: Triple,
    dilation: Triple,
    accumulation: str,
) -> SparseTensor:
    """Submanifold convolution."""
    return subm_conv3d(input, weight, bias, kernel_size=kernel_size, dilation=dilation)


_POOLS = {"pool3d": pool3d, "full_pool3d": full_pool3d}


@artifact_lowering(op=("pool3d", "full_pool3d"))
def pool3d_from_artifact(
    context: ExecutionContext,
    input: SparseTensor,
    *,
    mode: str,
    kernel_size: Triple,
    stride: Triple,
    padding: Triple,
    dilation: Triple,
    accumulation: str | None = None,
) -> SparseTensor:
    """Local max / avg / sum pooling (centred on the coarsened support, or spconv's)."""
    return _POOLS[context.op.name](
        input,
        mode=mode,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
    )


@artifact_lowering(op="global_pool")
def global_pool_from_artifact(
    input: SparseTensor, *, mode: str, batch_size: int, accumulation: str | None = None
) -> mx.array:
    """Per-batch-item pooling to a dense ``(B, C)`` array (B inferred when batch_size is -1)."""
    return global_pool(input, mode=mode, batch_size=batch_size)


# ---------------------------------------------------------------------------
# Points and voxels.


@artifact_lowering(op="voxelize")
def voxelize_from_artifact(
    points: mx.array,
    features: mx.array,
    batch_indices: mx.array,
    active_rows: mx.array,
    *,
    voxel_size: tuple[float, float, float],
    origin: tuple[float, float, float],
    reduction: str,
    stride: Triple,
) -> SparseTensor:
    """The active points merged into voxels at ``stride``."""
    return voxelize(
        points,
        features,
        batch_indices,
        active_rows,
        voxel_size=voxel_size,
        origin=origin,
        reduction=reduction,
        stride=stride,
    )


@artifact_lowering(op="devoxelize")
def devoxelize_from_artifact(
    points: mx.array,
    voxels: SparseTensor,
    batch_indices: mx.array,
    point_active_rows: mx.array,
    *,
    voxel_size: tuple[float, float, float],
    origin: tuple[float, float, float],
    interpolation: str,
) -> mx.array:
    """Voxel features read back at the active points."""
    return devoxelize(
        points,
        voxels,
        batch_indices,
        point_active_rows,
        voxel_size=voxel_size,
        origin=origin,
        interpolation=interpolation,
    )


# ---------------------------------------------------------------------------
# Feature-only ops.


@artifact_lowering(
    op="linear", weights={"weight": linear_weight(input="input"), "bias": bias_weight(of="weight")}
)
def linear_from_artifact(
    input: mx.array,
    weight: Weight,
    bias: mx.array | None = None,
    *,
    accumulation: str | None = None,
) -> mx.array:
    """Dense projection of feature rows."""
    return linear(input, weight, bias)


@artifact_lowering(op="activation")
def activation_from_artifact(
    input: mx.array,
    *,
    kind: str,
    approximate: str,
    alpha: float,
    beta: float,
    threshold: float,
) -> mx.array:
    """Pointwise nonlinearity."""
    return activation(
        input, kind=kind, approximate=approximate, alpha=alpha, beta=beta, threshold=threshold
    )


_CHANNELS = {name: channel_weight(input="input") for name in ("scale", "bias", "mean", "var")}


@artifact_lowering(op="batch_norm", weights=_CHANNELS)
def batch_norm_from_artifact(
    input: mx.array,
    scale: mx.array,
    bias: mx.array,
    mean: mx.array,
    var: mx.array,
    *,
    eps: float,
) -> mx.array:
    """Frozen-statistics batch norm."""
    return batch_norm(input, scale, bias, mean, var, eps=eps)


@artifact_lowering(op="layer_norm", weights={k: _CHANNELS[k] for k in ("scale", "bias")})
def layer_norm_from_artifact(
    input: mx.array, scale: mx.array, bias: mx.array, *, eps: float
) -> mx.array:
    """Layer norm over channels."""
    return layer_norm(input, scale, bias, eps=eps)


@artifact_lowering(op="rms_norm", weights={"scale": _CHANNELS["scale"]})
def rms_norm_from_artifact(input: mx.array, scale: mx.array, *, eps: float) -> mx.array:
    """RMS norm over channels."""
    return rms_norm(input, scale, eps=eps)


@artifact_lowering(op="softmax")
def softmax_from_artifact(input: mx.array, *, axis: int | None = None) -> mx.array:
    """Softmax over channels (``axis`` -1 or 1)."""
    return softmax(input, axis=-1 if axis is None else axis)


# ---------------------------------------------------------------------------
# Sparse algebra.


@artifact_lowering(op="sparse.binary")
def sparse_binary_from_artifact(
    lhs: SparseTensor,
    rhs: SparseTensor,
    *,
    op: str,
    join: str,
    lhs_fill: float | None = None,
    rhs_fill: float | None = None,
) -> SparseTensor:
    """Coordinate-aligned elementwise op; a missing side contributes its fill (default 0)."""
    return sparse_binary(
        lhs,
        rhs,
        op=op,
        join=join,
        lhs_fill=0.0 if lhs_fill is None else lhs_fill,
        rhs_fill=0.0 if rhs_fill is None else rhs_fill,
    )


@artifact_lowering(op="sparse.cat")
def sparse_cat_from_artifact(lhs: SparseTensor, rhs: SparseTensor, *, join: str) -> SparseTensor:
    """Coordinate-aligned channel concatenation."""
    return sparse_cat(lhs, rhs, join=join)


# ---------------------------------------------------------------------------
# Element-type changes.


@artifact_lowering(op="cast")
def cast_from_artifact(context: ExecutionContext, input: mx.array, *, rounding: str) -> mx.array:
    """Exact IEEE conversion to the result's declared float type."""
    return cast(input, _MX_DTYPES[context.result_type().dtype], rounding=rounding)


@artifact_lowering(op="call")
def call_from_artifact(
    context: ExecutionContext, inputs: tuple[mx.array, ...], *, callee: str
) -> mx.array:
    """Run the registered primitive ``callee`` (its signature was type-checked)."""
    result: mx.array = context.primitive(callee)(*inputs)
    return result


@MLX_LOWERINGS.primitive("argmax")
def argmax_primitive(x: mx.array) -> mx.array:
    """Index of each row's largest channel as int32; ties pick the first."""
    return mx.argmax(x, axis=1).astype(mx.int32)


@MLX_LOWERINGS.primitive("gather_rows")
def gather_rows_primitive(x: mx.array, index: mx.array) -> mx.array:
    """Rows of ``x`` at ``index``; every index must address an existing row."""
    rows = x.shape[0]
    if index.size:
        low, high = int(mx.min(index).item()), int(mx.max(index).item())  # type: ignore[arg-type]
        if low < 0 or high >= rows:
            raise IndexError(
                f"gather_rows: index values span [{low}, {high}] but the matrix has {rows} rows"
            )
    return mx.take(x, index, axis=0)


# The normalised, upsampling and lookup ops register from their own module.
import mlx_lattice.artifact.lowerings_extra  # noqa: E402, F401

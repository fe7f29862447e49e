"""Torch lowerings of every lattice dialect op, bound to the schema.

Each function below is registered with
:meth:`lattice_contract.lowering.LoweringRegistry.artifact_lowering`, which
checks at import time that its parameters are exactly the op's operands and
attributes.  The shared interpreter (:mod:`lattice_contract.execute`) calls
it with values bound by schema name; the body only forwards to
``torch_lattice.ops``, so an artifact computes exactly what the eager model
computes with the same functional ops.

Packed (``i4``/``i8``) weights arrive as
:class:`~torch_lattice.ops.quant.QuantizedWeight`; ``torch_lattice.ops``
dequantizes them in its compute dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from lattice_contract.lowering import (
    ExecutionContext,
    LoweringRegistry,
    bias_weight,
    channel_weight,
    conv_weight,
    linear_weight,
)

from torch_lattice import ops
from torch_lattice.artifact.backend import torch_dtype
from torch_lattice.sparse import SparseTensor

__all__ = ["LOWERINGS"]

LOWERINGS = LoweringRegistry("torch")
"""The torch runtime's lowerings and primitive implementations."""

Triple = tuple[int, int, int]
_CONV = {"weight": conv_weight("input"), "bias": bias_weight("weight")}


@LOWERINGS.artifact_lowering(op="sparse.make")
def sparse_make(
    context: ExecutionContext,
    coords: torch.Tensor,
    features: torch.Tensor,
    active: torch.Tensor,
    *,
    stride: Triple,
    coord_order: str | None = None,
) -> SparseTensor:
    """Build (and, unless the caller vouched for them, validate) an input sparse value."""
    if context.trusted_sparse_inputs:
        return SparseTensor.trusted(coords, features, stride, active_rows=active)
    return SparseTensor(coords, features, stride, active_rows=active)


@LOWERINGS.artifact_lowering(op="sparse.decompose")
def sparse_decompose(input: SparseTensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ABI triple of a sparse value."""
    return input.coords, input.feats, input.active_rows


@LOWERINGS.artifact_lowering(op="sparse.with_features")
def sparse_with_features(input: SparseTensor, features: torch.Tensor) -> SparseTensor:
    """Same support, new features."""
    return input.with_feats(features)


@LOWERINGS.artifact_lowering(op="sparse.reindex")
def sparse_reindex(
    input: SparseTensor, target: SparseTensor, *, fill: float | None = None
) -> SparseTensor:
    """Features gathered onto the target's rows, ``fill`` (default 0) where absent."""
    return ops.sparse_reindex(input, target, fill=0.0 if fill is None else fill)


@LOWERINGS.artifact_lowering(op="weight")
def weight(
    context: ExecutionContext,
    *,
    sym_name: str,
    storage_key: str,
    layout: str,
    packing: Mapping[str, Any] | None,
) -> Any:
    """The weight resolved (and checked) at compile time for ``storage_key``."""
    return context.weight(storage_key)


_CONVOLUTIONS: dict[str, Callable[..., SparseTensor]] = {
    "conv3d": ops.conv3d,
    "full_conv3d": ops.full_conv3d,
    "conv_transpose3d": ops.conv_transpose3d,
    "target_conv3d": ops.conv3d,
    "target_conv_transpose3d": ops.conv_transpose3d,
}
"""The ``torch_lattice.ops`` function behind each strided convolution op."""


@LOWERINGS.artifact_lowering(op=("conv3d", "full_conv3d", "conv_transpose3d"), weights=_CONV)
def conv(
    context: ExecutionContext,
    input: SparseTensor,
    weight: Any,
    bias: torch.Tensor | None = None,
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


@LOWERINGS.artifact_lowering(op="generative_conv_transpose3d", weights=_CONV)
def generative_conv_transpose3d(
    input: SparseTensor,
    weight: Any,
    bias: torch.Tensor | None = None,
    *,
    kernel_size: Triple,
    stride: Triple,
    accumulation: str,
) -> SparseTensor:
    """Support expansion ``o = c*s + k``."""
    return ops.generative_conv_transpose3d(
        input, weight, bias, kernel_size=kernel_size, stride=stride
    )


@LOWERINGS.artifact_lowering(op=("target_conv3d", "target_conv_transpose3d"), weights=_CONV)
def target_conv(
    context: ExecutionContext,
    input: SparseTensor,
    target: SparseTensor,
    weight: Any,
    bias: torch.Tensor | None = None,
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


@LOWERINGS.artifact_lowering(op="subm_conv3d", weights=_CONV)
def subm_conv3d(
    input: SparseTensor,
    weight: Any,
    bias: torch.Tensor | None = None,
    *,
    kernel_size: Triple,
    dilation: Triple,
    accumulation: str,
) -> SparseTensor:
    """Submanifold convolution."""
    return ops.subm_conv3d(input, weight, bias, kernel_size=kernel_size, dilation=dilation)


_POOLS = {"pool3d": ops.pool3d, "full_pool3d": ops.full_pool3d}


@LOWERINGS.artifact_lowering(op=("pool3d", "full_pool3d"))
def pool3d(
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
    """Local max / mean / sum pooling (centred on the coarsened support, or spconv's)."""
    return _POOLS[context.op.name](
        input, mode=mode, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation
    )


@LOWERINGS.artifact_lowering(op="global_pool")
def global_pool(
    input: SparseTensor, *, mode: str, batch_size: int, accumulation: str | None = None
) -> Any:
    """Per-batch reduction to a dense ``(B, C)`` tensor (B inferred when batch_size is -1)."""
    return ops.global_pool(input, mode=mode, batch_size=batch_size)


@LOWERINGS.artifact_lowering(op="voxelize")
def voxelize(
    points: torch.Tensor,
    features: torch.Tensor,
    batch_indices: torch.Tensor,
    active_rows: torch.Tensor,
    *,
    voxel_size: tuple[float, float, float],
    origin: tuple[float, float, float],
    reduction: str,
    stride: Triple,
) -> SparseTensor:
    """The active points merged into voxels at ``stride``."""
    return ops.voxelize(
        points,
        features,
        batch_indices,
        active_rows,
        voxel_size=voxel_size,
        origin=origin,
        reduction=reduction,
        stride=stride,
    )


@LOWERINGS.artifact_lowering(op="devoxelize")
def devoxelize(
    points: torch.Tensor,
    voxels: SparseTensor,
    batch_indices: torch.Tensor,
    point_active_rows: torch.Tensor,
    *,
    voxel_size: tuple[float, float, float],
    origin: tuple[float, float, float],
    interpolation: str,
) -> torch.Tensor:
    """Voxel features read back at the active points."""
    return ops.devoxelize(
        points,
        voxels,
        batch_indices,
        point_active_rows,
        voxel_size=voxel_size,
        origin=origin,
        interpolation=interpolation,
    )


@LOWERINGS.artifact_lowering(
    op="linear", weights={"weight": linear_weight("input"), "bias": bias_weight("weight")}
)
def linear(
    input: torch.Tensor, weight: Any, bias: Any = None, *, accumulation: str | None = None
) -> Any:
    """Dense projection of feature rows."""
    return ops.linear(input, weight, bias)


@LOWERINGS.artifact_lowering(op="activation")
def activation(
    input: torch.Tensor,
    *,
    kind: str,
    approximate: str,
    alpha: float,
    beta: float,
    threshold: float,
) -> torch.Tensor:
    """Pointwise nonlinearity."""
    return ops.activation(
        input, kind=kind, approximate=approximate, alpha=alpha, beta=beta, threshold=threshold
    )


_CHANNEL = channel_weight("input")


@LOWERINGS.artifact_lowering(
    op="batch_norm",
    weights={"scale": _CHANNEL, "bias": _CHANNEL, "mean": _CHANNEL, "var": _CHANNEL},
)
def batch_norm(
    input: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    *,
    eps: float,
) -> torch.Tensor:
    """Frozen-statistics batch norm."""
    return ops.batch_norm(input, scale, bias, mean, var, eps=eps)


@LOWERINGS.artifact_lowering(op="layer_norm", weights={"scale": _CHANNEL, "bias": _CHANNEL})
def layer_norm(
    input: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, *, eps: float
) -> torch.Tensor:
    """Per-row normalisation over channels."""
    return ops.layer_norm(input, scale, bias, eps=eps)


@LOWERINGS.artifact_lowering(op="rms_norm", weights={"scale": _CHANNEL})
def rms_norm(input: torch.Tensor, scale: torch.Tensor, *, eps: float) -> torch.Tensor:
    """Root-mean-square normalisation."""
    return ops.rms_norm(input, scale, eps=eps)


@LOWERINGS.artifact_lowering(op="softmax")
def softmax(input: torch.Tensor, *, axis: int | None = None) -> torch.Tensor:
    """Softmax over channels (``axis`` -1 or 1)."""
    return ops.softmax(input, axis=-1 if axis is None else axis)


@LOWERINGS.artifact_lowering(op="sparse.binary")
def sparse_binary(
    lhs: SparseTensor,
    rhs: SparseTensor,
    *,
    op: str,
    join: str,
    lhs_fill: float | None = None,
    rhs_fill: float | None = None,
) -> SparseTensor:
    """Coordinate-aligned elementwise op; a missing side contributes its fill (default 0)."""
    return ops.sparse_binary(
        lhs,
        rhs,
        op=op,
        join=join,
        lhs_fill=0.0 if lhs_fill is None else lhs_fill,
        rhs_fill=0.0 if rhs_fill is None else rhs_fill,
    )


@LOWERINGS.artifact_lowering(op="sparse.cat")
def sparse_cat(lhs: SparseTensor, rhs: SparseTensor, *, join: str) -> SparseTensor:
    """Coordinate-aligned channel concatenation."""
    return ops.sparse_cat(lhs, rhs, join=join)


@LOWERINGS.artifact_lowering(op="cast")
def cast(context: ExecutionContext, input: torch.Tensor, *, rounding: str) -> torch.Tensor:
    """Float conversion to the result's declared element type, with explicit rounding."""
    return ops.cast(input, torch_dtype(context.result_type().dtype), rounding=rounding)


@LOWERINGS.artifact_lowering(op="call")
def call(
    context: ExecutionContext, inputs: tuple[torch.Tensor, ...], *, callee: str
) -> torch.Tensor:
    """A registered primitive, by name."""
    result: torch.Tensor = context.primitive(callee)(*inputs)
    return result


@LOWERINGS.primitive("argmax")
def argmax(x: torch.Tensor) -> torch.Tensor:
    """Index of the largest channel of each row (first on ties), as int32."""
    if x.shape[0] == 0:
        return torch.zeros(0, dtype=torch.int32, device=x.device)
    return torch.argmax(x, dim=1).to(torch.int32)


@LOWERINGS.primitive("gather_rows")
def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` picked by ``index``; out-of-range indices are an error."""
    n = int(x.shape[0])
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
        raise IndexError(
            f"gather_rows: indices must lie in [0, {n}); got {index.min()}..{index.max()}"
        )
    return x.index_select(0, index.to(torch.int64))


# The normalised, upsampling and lookup ops register from their own module.
import torch_lattice.artifact.lowerings_extra  # noqa: E402, F401

LOWERINGS.check_complete()

"""The standard lowering of every schema op, written once over a runtime's adapter.

:class:`StandardLowerings` holds one method per distinct op signature; each
forwards to the runtime's functional op of the same meaning through the
adapter's :class:`~lattice_contract.runtime.ops.RuntimeOps`.  A runtime
installs the whole table with :func:`standard_lowerings`, which builds its
:class:`~lattice_contract.runtime.lowering.LoweringRegistry` from one instance bound
to its adapter::

    MLX_LOWERINGS = standard_lowerings(MLX_ADAPTER)

so both runtimes run the very same lowering functions (``STANDARD_TABLE``
lists them); what differs between them is only the adapter.  Registration
goes through :meth:`LoweringRegistry.artifact_lowering`, so every method's
parameters are checked against the schema's operands and attributes at
import time, and :func:`standard_lowerings` refuses an adapter whose ops lack
any :class:`RuntimeOps` member a lowering calls (:func:`lowering_needs`).

``accumulation`` is accepted and not branched on: the schema allows only
``canonical_f32``, which every runtime's conv, pool and linear implements.
Optional ``fill`` attributes default to 0 here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from lattice_contract.dialect import Triple
from lattice_contract.runtime.lowering import (
    ExecutionContext,
    LoweringError,
    LoweringRegistry,
    WeightSpec,
    bias_weight,
    channel_weight,
    conv_weight,
    linear_weight,
)
from lattice_contract.runtime.ops import RUNTIME_OP_NAMES, RuntimeAdapter, missing_runtime_ops

__all__ = [
    "STANDARD_TABLE",
    "StandardLowerings",
    "TableEntry",
    "gather_rows_error",
    "lowering_needs",
    "standard_lowerings",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class TableEntry:
    """One method of :class:`StandardLowerings` and how it is registered.

    ``op`` is the schema op (or ops) it lowers, or None for a primitive
    (``primitive`` names it); ``dispatch`` maps each op of a shared lowering
    to the :class:`RuntimeOps` member it runs.
    """

    attribute: str
    op: str | tuple[str, ...] | None
    weights: Mapping[str, WeightSpec]
    dispatch: Mapping[str, str]
    primitive: str | None = None


_TABLE: list[TableEntry] = []


def _lowering(
    op: str | tuple[str, ...],
    weights: Mapping[str, WeightSpec] | None = None,
    dispatch: Mapping[str, str] | None = None,
) -> Callable[[F], F]:
    def mark(function: F) -> F:
        _TABLE.append(
            TableEntry(
                function.__name__,
                op,
                MappingProxyType(dict(weights or {})),
                MappingProxyType(dict(dispatch or {})),
            )
        )
        return function

    return mark


def _primitive(name: str) -> Callable[[F], F]:
    def mark(function: F) -> F:
        _TABLE.append(TableEntry(function.__name__, None, MappingProxyType({}), {}, name))
        return function

    return mark


def gather_rows_error(low: int, high: int, rows: int) -> IndexError:
    """The ``gather_rows`` out-of-range refusal, worded once for both runtimes."""
    return IndexError(
        f"gather_rows: index values span [{low}, {high}] but the matrix has {rows} rows; "
        f"indices must lie in [0, {rows})"
    )


_CONV = {"weight": conv_weight(input="input"), "bias": bias_weight(of="weight")}
_CHANNEL = channel_weight(input="input")
_STRIDED = {name: name for name in ("conv3d", "full_conv3d", "conv_transpose3d")}
_TARGETED = {"target_conv3d": "conv3d", "target_conv_transpose3d": "conv_transpose3d"}
_POOLS = {"pool3d": "pool3d", "full_pool3d": "full_pool3d"}


def _fill(value: float | None) -> float:
    return 0.0 if value is None else value


class StandardLowerings:
    """Every schema op's lowering and every primitive's implementation, over one adapter.

    Parameters are named after the op's operands and attributes (weight
    operands arrive resolved: a dense array or the runtime's packed weight,
    their shapes already checked by the weight specs).
    """

    def __init__(self, adapter: RuntimeAdapter) -> None:
        self.adapter = adapter
        self.ops = adapter.ops

    # -- sparse ABI and weights ----------------------------------------------------

    @_lowering("sparse.make")
    def sparse_make(
        self,
        context: ExecutionContext,
        coords: Any,
        features: Any,
        active: Any,
        *,
        stride: Triple,
        coord_order: str | None = None,
    ) -> Any:
        """The ABI arrays as a SparseTensor at the declared stride (validated unless trusted)."""
        return self.adapter.sparse_tensor(
            coords, features, stride, active, trusted=context.trusted_sparse_inputs
        )

    @_lowering("sparse.decompose")
    def sparse_decompose(self, input: Any) -> tuple[Any, Any, Any]:
        """The ABI arrays of a sparse value."""
        return input.coords, input.feats, input.active_rows

    @_lowering("sparse.with_features")
    def sparse_with_features(self, input: Any, features: Any) -> Any:
        """Same support, new feature rows."""
        return input.with_feats(features)

    @_lowering("sparse.reindex")
    def sparse_reindex(self, input: Any, target: Any, *, fill: float | None = None) -> Any:
        """Features gathered onto the target's rows, ``fill`` where absent."""
        return self.ops.sparse_reindex(input, target, fill=_fill(fill))

    @_lowering("sparse.crop")
    def sparse_crop(self, input: Any, *, lower: Triple, upper: Triple) -> Any:
        """The rows inside the static box ``lower <= c < upper`` (spconv's grid bounds)."""
        return self.ops.sparse_crop(input, lower=lower, upper=upper)

    @_lowering("sparse.to_dense")
    def sparse_to_dense(
        self, input: Any, *, spatial_shape: Triple, batch_size: int, layout: str
    ) -> Any:
        """The value scattered into a zero dense grid in the declared layout."""
        return self.ops.sparse_to_dense(
            input, spatial_shape=spatial_shape, batch_size=batch_size, layout=layout
        )

    @_lowering("weight")
    def weight(
        self,
        context: ExecutionContext,
        *,
        sym_name: str,
        storage_key: str,
        layout: str,
        packing: Mapping[str, Any] | None,
    ) -> Any:
        """The weight resolved (and checked) at compile time under ``storage_key``."""
        return context.weight(storage_key)

    # -- convolutions -------------------------------------------------------------

    @_lowering(tuple(_STRIDED), _CONV, _STRIDED)
    def conv(
        self,
        context: ExecutionContext,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        accumulation: str,
    ) -> Any:
        """Convolution, transposed convolution or support expansion over its derived support."""
        run = getattr(self.ops, _STRIDED[context.op.name])
        return run(
            input,
            weight,
            bias,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
        )

    @_lowering(tuple(_TARGETED), _CONV, _TARGETED)
    def target_conv(
        self,
        context: ExecutionContext,
        input: Any,
        target: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        accumulation: str,
    ) -> Any:
        """(Transposed) convolution evaluated at the target's rows."""
        run = getattr(self.ops, _TARGETED[context.op.name])
        return run(
            input,
            weight,
            bias,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            coordinates=target,
        )

    @_lowering("generative_conv_transpose3d", _CONV)
    def generative_conv_transpose3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        accumulation: str,
    ) -> Any:
        """Support expansion ``o = c*s + k``."""
        return self.ops.generative_conv_transpose3d(
            input, weight, bias, kernel_size=kernel_size, stride=stride
        )

    @_lowering("subm_conv3d", _CONV)
    def subm_conv3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        dilation: Triple,
        accumulation: str,
    ) -> Any:
        """Submanifold convolution."""
        return self.ops.subm_conv3d(input, weight, bias, kernel_size=kernel_size, dilation=dilation)

    @_lowering("normalized_subm_conv3d", _CONV)
    def normalized_subm_conv3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        dilation: Triple,
        eps: float,
        accumulation: str | None = None,
    ) -> Any:
        """Weight-normalised submanifold convolution."""
        return self.ops.normalized_subm_conv3d(
            input, weight, bias, kernel_size=kernel_size, dilation=dilation, eps=eps
        )

    @_lowering("normalized_conv_transpose3d", _CONV)
    def normalized_conv_transpose3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        eps: float,
        accumulation: str | None = None,
    ) -> Any:
        """Weight-normalised transposed convolution over its derived support."""
        return self.target_normalized_conv_transpose3d(
            input,
            None,
            weight,
            bias,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            eps=eps,
        )

    @_lowering("target_normalized_conv_transpose3d", _CONV)
    def target_normalized_conv_transpose3d(
        self,
        input: Any,
        target: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        eps: float,
        accumulation: str | None = None,
    ) -> Any:
        """Weight-normalised transposed convolution at the target's rows (or its own support)."""
        return self.ops.normalized_conv_transpose3d(
            input,
            weight,
            bias,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            eps=eps,
            coordinates=target,
        )

    @_lowering("normalized_generative_conv_transpose3d", _CONV)
    def normalized_generative_conv_transpose3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        eps: float,
        accumulation: str | None = None,
    ) -> Any:
        """Weight-normalised support expansion."""
        return self.ops.normalized_generative_conv_transpose3d(
            input, weight, bias, kernel_size=kernel_size, stride=stride, eps=eps
        )

    # -- pooling and upsampling -------------------------------------------------------

    @_lowering(tuple(_POOLS), dispatch=_POOLS)
    def pool(
        self,
        context: ExecutionContext,
        input: Any,
        *,
        mode: str,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        accumulation: str | None = None,
    ) -> Any:
        """Local max / avg / sum pooling (centred on the coarsened support, or spconv's)."""
        run = getattr(self.ops, _POOLS[context.op.name])
        return run(
            input,
            mode=mode,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
        )

    @_lowering("global_pool")
    def global_pool(
        self, input: Any, *, mode: str, batch_size: int, accumulation: str | None = None
    ) -> Any:
        """Per-batch-item pooling to a dense ``(B, C)`` array (B inferred when batch_size is -1)."""
        return self.ops.global_pool(input, mode=mode, batch_size=batch_size)

    @_lowering("pool_transpose3d")
    def pool_transpose3d(
        self,
        input: Any,
        target: Any = None,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        accumulation: str | None = None,
    ) -> Any:
        """Mean of the coarse rows reaching each fine row (the target's rows when given)."""
        return self.ops.pool_transpose3d(
            input,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            coordinates=target,
        )

    @_lowering("trilinear_upsample3d")
    def trilinear_upsample3d(self, input: Any, target: Any = None, *, stride: Triple) -> Any:
        """Renormalised trilinear upsampling (onto the target's rows when given)."""
        return self.ops.trilinear_upsample3d(input, stride=stride, coordinates=target)

    # -- points and voxels ----------------------------------------------------------

    @_lowering("voxelize")
    def voxelize(
        self,
        points: Any,
        features: Any,
        batch_indices: Any,
        active_rows: Any,
        *,
        voxel_size: tuple[float, float, float],
        origin: tuple[float, float, float],
        reduction: str,
        stride: Triple,
    ) -> Any:
        """The active points merged into voxels at ``stride``."""
        return self.ops.voxelize(
            points,
            features,
            batch_indices,
            active_rows,
            voxel_size=voxel_size,
            origin=origin,
            reduction=reduction,
            stride=stride,
        )

    @_lowering("devoxelize")
    def devoxelize(
        self,
        points: Any,
        voxels: Any,
        batch_indices: Any,
        point_active_rows: Any,
        *,
        voxel_size: tuple[float, float, float],
        origin: tuple[float, float, float],
        interpolation: str,
    ) -> Any:
        """Voxel features read back at the active points."""
        return self.ops.devoxelize(
            points,
            voxels,
            batch_indices,
            point_active_rows,
            voxel_size=voxel_size,
            origin=origin,
            interpolation=interpolation,
        )

    # -- feature-only ops -----------------------------------------------------------

    @_lowering("linear", {"weight": linear_weight(input="input"), "bias": bias_weight(of="weight")})
    def linear(
        self, input: Any, weight: Any, bias: Any = None, *, accumulation: str | None = None
    ) -> Any:
        """Dense projection of feature rows."""
        return self.ops.linear(input, weight, bias)

    @_lowering("activation")
    def activation(
        self,
        input: Any,
        *,
        kind: str,
        approximate: str,
        alpha: float,
        beta: float,
        threshold: float,
    ) -> Any:
        """Pointwise nonlinearity."""
        return self.ops.activation(
            input, kind=kind, approximate=approximate, alpha=alpha, beta=beta, threshold=threshold
        )

    @_lowering("batch_norm", dict.fromkeys(("scale", "bias", "mean", "var"), _CHANNEL))
    def batch_norm(
        self, input: Any, scale: Any, bias: Any, mean: Any, var: Any, *, eps: float
    ) -> Any:
        """Frozen-statistics batch norm."""
        return self.ops.batch_norm(input, scale, bias, mean, var, eps=eps)

    @_lowering("layer_norm", dict.fromkeys(("scale", "bias"), _CHANNEL))
    def layer_norm(self, input: Any, scale: Any, bias: Any, *, eps: float) -> Any:
        """Layer norm over channels."""
        return self.ops.layer_norm(input, scale, bias, eps=eps)

    @_lowering("rms_norm", {"scale": _CHANNEL})
    def rms_norm(self, input: Any, scale: Any, *, eps: float) -> Any:
        """RMS norm over channels."""
        return self.ops.rms_norm(input, scale, eps=eps)

    @_lowering("softmax")
    def softmax(self, input: Any, *, axis: int | None = None) -> Any:
        """Softmax over channels (``axis`` -1 or 1)."""
        return self.ops.softmax(input, axis=-1 if axis is None else axis)

    @_lowering("elementwise")
    def elementwise(self, input: Any, *, kind: str) -> Any:
        """exp or round (half to even) of f32 features."""
        return self.ops.elementwise(input, kind=kind)

    @_lowering("embedding_lookup")
    def embedding_lookup(self, indices: Any, weight: Any) -> Any:
        """Rows of the embedding table; an out-of-range index is an error naming it."""
        return self.ops.embedding_lookup(indices, weight)

    # -- sparse algebra -------------------------------------------------------------

    @_lowering("sparse.binary")
    def sparse_binary(
        self,
        lhs: Any,
        rhs: Any,
        *,
        op: str,
        join: str,
        lhs_fill: float | None = None,
        rhs_fill: float | None = None,
    ) -> Any:
        """Coordinate-aligned elementwise op; a missing side contributes its fill."""
        return self.ops.sparse_binary(
            lhs, rhs, op=op, join=join, lhs_fill=_fill(lhs_fill), rhs_fill=_fill(rhs_fill)
        )

    @_lowering("sparse.cat")
    def sparse_cat(self, lhs: Any, rhs: Any, *, join: str) -> Any:
        """Coordinate-aligned channel concatenation."""
        return self.ops.sparse_cat(lhs, rhs, join=join)

    # -- element types and primitives -------------------------------------------------

    @_lowering("cast")
    def cast(self, context: ExecutionContext, input: Any, *, rounding: str) -> Any:
        """Exact IEEE conversion to the result's declared float type."""
        dtype = self.adapter.element_dtype(context.result_type().dtype)
        return self.ops.cast(input, dtype, rounding=rounding)

    @_lowering("call")
    def call(self, context: ExecutionContext, inputs: tuple[Any, ...], *, callee: str) -> Any:
        """Run the registered primitive ``callee`` (its signature was type-checked)."""
        return context.primitive(callee)(*inputs)

    @_primitive("argmax")
    def argmax(self, x: Any) -> Any:
        """Index of each row's largest channel as int32; ties pick the first."""
        return self.adapter.argmax_rows(x)

    @_primitive("gather_rows")
    def gather_rows(self, x: Any, index: Any) -> Any:
        """Rows of ``x`` at ``index``; every index must address an existing row."""
        rows = self.adapter.shape(x)[0]
        span = self.adapter.index_span(index)
        if span is not None and (span[0] < 0 or span[1] >= rows):
            raise gather_rows_error(span[0], span[1], rows)
        return self.adapter.take_rows(x, index)


STANDARD_TABLE: tuple[TableEntry, ...] = tuple(_TABLE)
"""Every standard lowering and primitive, in definition order (one table for all runtimes)."""


def lowering_needs(entry: TableEntry) -> frozenset[str]:
    """The :class:`RuntimeOps` members one table entry calls.

    Read from the method's code (the ``self.ops.<name>`` it names, and those
    of the sibling methods it calls) plus its ``dispatch`` table, so the list
    cannot drift from what the body does.
    """
    return frozenset(_named_ops(entry.attribute, set()) | set(entry.dispatch.values()))


def _named_ops(attribute: str, seen: set[str]) -> set[str]:
    seen.add(attribute)
    names = set(getattr(StandardLowerings, attribute).__code__.co_names)
    found = names & set(RUNTIME_OP_NAMES)
    for name in names - seen:
        if callable(getattr(StandardLowerings, name, None)):
            found |= _named_ops(name, seen)
    return found


def standard_lowerings(adapter: RuntimeAdapter) -> LoweringRegistry:
    """The registry of one runtime: every :data:`STANDARD_TABLE` entry bound to ``adapter``.

    Raises :class:`~lattice_contract.runtime.lowering.LoweringError` naming the ops a
    lowering needs that ``adapter.ops`` lacks, and when the table does not
    cover every schema op.
    """
    needed = sorted(set().union(*(lowering_needs(entry) for entry in STANDARD_TABLE)))
    missing = missing_runtime_ops(adapter.ops, needed)
    if missing:
        raise LoweringError(
            f"the {adapter.name} runtime's ops lack {', '.join(missing)}, which the standard "
            "lowerings call; implement them in its ops module"
        )
    registry = LoweringRegistry(adapter.name)
    bound = StandardLowerings(adapter)
    for entry in STANDARD_TABLE:
        method = getattr(bound, entry.attribute)
        if entry.primitive is not None:
            registry.primitive(entry.primitive)(method)
        else:
            assert entry.op is not None
            registry.artifact_lowering(op=entry.op, weights=entry.weights)(method)
    registry.check_complete()
    registry.mark_standard()
    return registry

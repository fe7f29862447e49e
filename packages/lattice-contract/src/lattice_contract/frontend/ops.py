"""The functional op API both runtimes expose, declared once: names, keywords, help text.

``mlx_lattice.ops`` and ``torch_lattice.ops`` have the same public ops with
the same call syntax; only the array code differs.  What is the same lives
in the contract:

* :data:`OP_NAMES`, the public names of both ``ops`` packages (each
  runtime's ``__all__`` is this list plus its declared extras; a test checks
  both export exactly it);
* per op, a ``TypedDict`` of its keyword attributes (``Conv3dAttrs``...)
  whose docstring is the op's help text and whose fields carry the
  attribute's meaning (:class:`lattice_contract.frontend.op_attrs.Attr`);
  :func:`normalise` applies their defaults and checks;
* per op, its whole call signature (:mod:`lattice_contract.frontend.signatures`),
  from which a runtime's public function is made around its array code.

Where an attribute is a schema op's, its default is the textual builder's
(``SCHEMA_DEFAULT``), so omitting a keyword means the same in a graph built by
hand and one exported from these ops; the API's own defaults (``eps``,
``join``, ``reduction``...) are written below once.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, Required, TypedDict

from lattice_contract.dialect import (
    NORMALIZED_EPS,
    ActivationKind,
    BinaryOp,
    GeluApprox,
    Interpolation,
    Join,
    PoolMode,
    Rounding,
    VoxelReduction,
    Window,
    check_quantization,
    softmax_axis,
    voxel_grid,
)
from lattice_contract.frontend.grid import SparseCropAttrs, SparseToDenseAttrs
from lattice_contract.frontend.nn_args import activation_params
from lattice_contract.frontend.op_attrs import (
    REQUIRED,
    SCHEMA_DEFAULT,
    Attr,
    AttrDecl,
    IntOrTriple,
    Joint,
    enum_attr,
    finite_float_attr,
    keywords_doc,
    normalise_attrs,
    positive_float_attr,
    raw_attr,
    read_declaration,
    triple_attr,
)

__all__ = [
    "BINARY_FUNCTIONS",
    "DECLARATIONS",
    "NORM_EPS",
    "OP_NAMES",
    "IntOrTriple",
    "help_text",
    "keywords_type",
    "normalise",
    "window",
]

FloatOrTriple = float | Sequence[float]

NORM_EPS = 1e-5
"""Default ``eps`` of ``batch_norm``, ``layer_norm`` and ``rms_norm`` (torch.nn's)."""

# -- attribute meanings --------------------------------------------------------

_Kernel = Annotated[IntOrTriple, triple_attr(1, REQUIRED)]
_Stride = Annotated[IntOrTriple, triple_attr(1)]
_Padding = Annotated[IntOrTriple, triple_attr(0)]
_Dilation = Annotated[IntOrTriple, triple_attr(1)]
_NormalizedEps = Annotated[float, positive_float_attr(NORMALIZED_EPS)]
_NormEps = Annotated[float, positive_float_attr(NORM_EPS)]
_PoolMode = Annotated[PoolMode | str, enum_attr(PoolMode)]
_Join = Annotated[Join | str, enum_attr(Join, Join.inner)]
_Fill = Annotated[float, finite_float_attr()]
_VoxelSize = Annotated[FloatOrTriple, raw_attr("positive number or three", REQUIRED)]
_Origin = Annotated[FloatOrTriple, raw_attr("number or three numbers")]
_ActivationNumber = Annotated[float, raw_attr("finite number")]
_SOFTMAX_AXIS = Attr(
    "-1 or 1 (both the channel axis of a rank-2 tensor)",
    lambda value, name, op: softmax_axis(value, op),
    SCHEMA_DEFAULT,
)


# -- convolutions --------------------------------------------------------------


class _Window(TypedDict, total=False):
    kernel_size: Required[_Kernel]
    stride: _Stride
    padding: _Padding
    dilation: _Dilation


class Conv3dAttrs(_Window, total=False):
    """Sparse convolution on the coarsened support, output stride t*s.

    Output rows are every distinct ``floor(c / s)`` of an active input row c
    (at stride 1 exactly the input rows, in order); output o receives
    ``W[:, k, :] @ x[o*s + off_c(k) - p]`` from every active such input, with
    the centred rule ``off_c`` (``(k - K//2)*d`` for odd K, ``k*d`` for even
    K).  An odd stride-1 unpadded conv3d is therefore a ``subm_conv3d``.  This
    is upstream's (and MinkowskiEngine's) forward conv; spconv's growing
    SparseConv3d is ``full_conv3d``.  With ``coordinates=target`` the op is
    the contract's ``target_conv3d``: it is evaluated exactly at the target's
    rows (whose stride must be the input stride times ``stride``); rows no tap
    reaches get the bias alone.
    """


class FullConv3dAttrs(_Window, total=False):
    """spconv's regular sparse convolution (cross-correlation), output stride t*s.

    Output o receives ``W[:, k, :] @ x[c]`` from every active c with
    ``c = o*s - p + k*d``, and the output is every o so reached: the support
    grows even at stride 1 (unlike ``conv3d``).  ``conv_transpose3d`` with the
    same geometry is its adjoint.
    """


class SubmConv3dAttrs(TypedDict, total=False):
    """Submanifold convolution: output rows are the input rows (same order and stride).

    Tap k reads ``c + (k - floor((K-1)/2)) * d``, so even kernels lean towards
    positive offsets (K = 4 reads -1..2).  Shares the input's map cache.
    """

    kernel_size: Required[_Kernel]
    dilation: _Dilation


class ConvTranspose3dAttrs(_Window, total=False):
    """Transposed sparse convolution, output stride t/s (s must divide t).

    Output o receives ``W[:, k, :] @ x[c]`` from every active c with
    ``o = c*s - p + k*d``; without a target the output support is every such
    o.  With ``coordinates=target`` (the contract's
    ``target_conv_transpose3d``) only the target's rows are produced; when
    the target is the input of the forward conv that made this input, this is
    spconv's SparseInverseConv3d.
    """


class GenerativeConvTranspose3dAttrs(TypedDict, total=False):
    """Support expansion: every ``o = c*s + k`` for every active c and tap; stride t/s.

    Padding and dilation are implied 0 and 1 (the op has neither attribute:
    its purpose is to emit each tap's child cell, as in occupancy-upsampling
    decoders); where s < K makes two (c, k) land on one o they are summed.
    """

    kernel_size: Required[_Kernel]
    stride: _Stride


class NormalizedSubmConv3dAttrs(SubmConv3dAttrs, total=False):
    """Weight-normalised submanifold conv: output rows are the input rows, same order.

    ``y[o, j] = sum_E sum_i x[r, i] W[j, k, i] / sqrt(sum_E sum_i W[j, k, i]^2
    + eps) + bias[j]`` over the (input row, tap) pairs E reaching o, so a
    border row gets a smaller normaliser.  Tap k reads
    ``c + (k - (K-1)//2) * d``.  A 1x1x1 kernel with dilation 1 is an
    ordinary pointwise ``subm_conv3d`` (no normalisation), as upstream.
    Packed weights are refused.
    """

    eps: _NormalizedEps


class NormalizedConvTranspose3dAttrs(_Window, total=False):
    """Weight-normalised transposed conv: input c feeds ``o = c*s - p + k*d``; stride t/s.

    With ``coordinates=target`` the output is exactly the target's rows (the
    contract's ``target_normalized_conv_transpose3d``); rows no tap reaches
    get the bias alone.  Packed weights are refused.
    """

    eps: _NormalizedEps


class NormalizedGenerativeConvTranspose3dAttrs(GenerativeConvTranspose3dAttrs, total=False):
    """Weight-normalised support expansion: every ``o = c*s + k`` (p = 0, d = 1); stride t/s.

    Where s < K makes two (input, tap) pairs land on one output row, they are
    summed into that one row (numerator and normaliser alike).  Packed
    weights are refused.
    """

    eps: _NormalizedEps


# -- pooling and upsampling ----------------------------------------------------


class Pool3dAttrs(_Window, total=False):
    """Local pooling (max, mean or sum) over ``conv3d``'s support; output stride t*s.

    The output rows are the coarsened input support (every ``floor(c / s)``);
    output o reduces the active inputs ``o*s + off_c(k) - p`` over its taps
    (centred rule), the mean dividing by the number of active contributors;
    a row none of whose window is active gives 0.
    """

    mode: Required[_PoolMode]


class FullPool3dAttrs(Pool3dAttrs, total=False):
    """spconv's pools: reduce every active ``c = o*s - p + k*d`` at every o so reached.

    The output support is ``full_conv3d``'s with the same geometry.
    """


class GlobalPoolAttrs(TypedDict, total=False):
    """Per-batch-item max / mean / sum of all rows: a dense ``(B, C)`` array.

    ``batch_size=-1`` (the default) sets B to the largest batch index + 1 at
    run time, 0 gives an empty ``(0, C)`` result, a positive value fixes B.
    Batch items without rows give zeros; rows whose batch index is not below
    B are an error, not silently dropped.
    """

    mode: Required[_PoolMode]
    batch_size: Annotated[int, raw_attr("int >= 1, 0 or -1 (inferred)", -1)]


class PoolTranspose3dAttrs(_Window, total=False):
    """Unweighted mean of the coarse rows reaching each output row (``o = c*s - p + k*d``).

    Output stride t/s.  Without ``coordinates`` the support is that of
    ``conv_transpose3d`` with the same geometry; with it, the target's rows
    (a row no coarse row reaches is 0).
    """


class TrilinearUpsample3dAttrs(TypedDict, total=False):
    """Renormalised trilinear interpolation from coarse rows at ``c*s`` to fine rows; stride t/s.

    Per axis the hat weight is ``1 - |o - c*s| / s`` over coarse rows with
    ``|o - c*s| < s``; the 3-D weight is the product, renormalised over the
    coarse rows present.  Without ``coordinates`` the output is every fine row
    within ``s - 1`` of a coarse row on every axis.
    """

    stride: Required[Annotated[IntOrTriple, triple_attr(1, REQUIRED)]]


# -- points ----------------------------------------------------------------------


class VoxelizeAttrs(TypedDict, total=False):
    """Merge the active points into cells ``floor((p - origin) / voxel_size)`` per batch item.

    ``points`` (P, 3) f32, ``features`` (P, C) float, ``batch_indices`` (P,)
    int32; only the first ``active_rows`` points take part (all when None).
    ``u = (points - origin) / voxel_size`` is computed per axis in f32 by a
    true division (not a multiplication by the reciprocal), so every runtime
    floors the same values.  The result sits at ``stride`` with physical
    coordinates ``floor(u) * stride`` and one row per occupied cell, in
    first-occurrence order (the order in which the points first reach each
    cell); the features of points sharing a cell are reduced (mean, sum or
    max) in f32 and stored in the features' dtype.
    """

    voxel_size: Required[_VoxelSize]
    origin: _Origin
    reduction: Annotated[VoxelReduction | str, enum_attr(VoxelReduction, VoxelReduction.mean)]
    stride: _Stride


class DevoxelizeAttrs(TypedDict, total=False):
    """Read ``voxels``' features at the active points: dense ``(P, C)`` in their dtype.

    ``u = (p - origin) / voxel_size`` (in f32, by a true division) is in units
    of the value's cells (logical coordinates):

    - ``nearest``: the cell ``floor(u + 0.5)``;
    - ``linear``: the eight cells ``floor(u) + {0,1}^3`` weighted by
      ``prod(f or 1 - f)`` with ``f = u - floor(u)``; absent cells are dropped
      and the weights are not renormalised;
    - ``trilinear`` (Lattice's extra): cell-centred corners, ``g = u - 0.5``,
      ``b = floor(g)``, the eight cells ``b + {0,1}^3`` weighted from
      ``g - b``, renormalised over the present cells; a point whose present
      corners carry no weight reads zeros.

    Only the first ``point_active_rows`` points are read; the rest get zeros.
    """

    voxel_size: Required[_VoxelSize]
    origin: _Origin
    interpolation: Annotated[Interpolation | str, enum_attr(Interpolation, Interpolation.linear)]


# -- feature-only ops ------------------------------------------------------------


class LinearAttrs(TypedDict, total=False):
    """``x @ weight.T + bias`` over the channels, summed in f32, stored in x's dtype.

    ``weight`` is ``(C_out, C_in)`` (layout ``linear_o_i``) or a packed
    ``QuantizedWeight`` of that logical shape.
    """


class ActivationAttrs(TypedDict, total=False):
    """Pointwise nonlinearity, parameters as in ``torch.nn.functional``.

    ``alpha`` is leaky_relu's negative slope and elu's alpha; softplus is
    ``log1p(exp(beta * x)) / beta``, and ``x`` itself where
    ``beta * x > threshold``; gelu uses ``erf`` (``approximate`` ``none`` or
    ``precise``), the tanh formula, or ``fast`` ``x * sigmoid(1.702 x)``;
    hardswish is ``x * relu6(x + 3) / 6``.  Unused parameters are ignored.
    """

    kind: Required[
        Annotated[ActivationKind | str, raw_attr("ActivationKind or its value", REQUIRED)]
    ]
    approximate: Annotated[GeluApprox | str, raw_attr("GeluApprox or its value")]
    alpha: _ActivationNumber
    beta: _ActivationNumber
    threshold: _ActivationNumber


class BatchNormAttrs(TypedDict, total=False):
    """Frozen-statistics batch norm ``(x - mean) / sqrt(var + eps) * scale + bias``.

    Per-channel vectors over the last axis; the running statistics are
    inputs, never updated (deployment semantics).
    """

    eps: _NormEps


class LayerNormAttrs(TypedDict, total=False):
    """Normalise each row over its channels (biased variance), then ``* scale + bias``.

    ``scale`` or ``bias`` may be None to skip that affine part (eager use
    only: the exported ``lattice.layer_norm`` stores both).
    """

    eps: _NormEps


class RmsNormAttrs(TypedDict, total=False):
    """``x / sqrt(mean(x^2) + eps) * scale`` over the channels of each row (scale may be None)."""

    eps: _NormEps


class SoftmaxAttrs(TypedDict, total=False):
    """Softmax of each row over its channels, computed in f32."""

    axis: Annotated[int, _SOFTMAX_AXIS]


class ElementwiseAttrs(TypedDict, total=False):
    """``exp(x)`` or ``round(x)`` (half to even) of a rank-2 float32 array."""

    kind: Required[Annotated[str, raw_attr("'exp' or 'round'", REQUIRED)]]


class EmbeddingLookupAttrs(TypedDict, total=False):
    """``weight[indices]``: an ``(N, C)`` array in the table's dtype (layout ``embedding_n_c``).

    An index outside ``[0, num_embeddings)`` is an error naming the first bad
    index and its position.
    """


class CastAttrs(TypedDict, total=False):
    """Convert a float array to ``dtype`` (f16, bf16 or f32) with an IEEE rounding direction.

    ``dtype`` is the runtime's float16 / bfloat16 / float32 dtype or ``"f16"``
    / ``"bf16"`` / ``"f32"``.  Every mode is exact (integer arithmetic on bit
    patterns).  Overflow follows IEEE 754: nearest modes give infinity; a
    directed mode that rounds toward zero for that sign gives the largest
    finite value.  Subnormals, signed zeros and infinities are handled
    exactly; every NaN becomes the canonical quiet NaN with its sign.
    Conversions that cannot round (same type, or widening) are exact.
    """

    rounding: Annotated[Rounding | str, enum_attr(Rounding, Rounding.nearest_even)]


class QuantizeWeightAttrs(TypedDict, total=False):
    """Pack a float conv ``(C_out, Kx, Ky, Kz, C_in)`` or linear ``(C_out, C_in)`` weight.

    Affine int4 / int8 packing in MLX's format: C_in is padded with zeros to
    a multiple of ``group_size``; each group's scale and bias are computed in
    ``scale_dtype`` (default: the weight's dtype).
    """

    bits: Required[Annotated[int, raw_attr("4 or 8", REQUIRED)]]
    group_size: Required[Annotated[int, raw_attr("32, 64 or 128", REQUIRED)]]


# -- sparse algebra --------------------------------------------------------------


class SparseBinaryAttrs(TypedDict, total=False):
    """Elementwise ``op`` (add, sub, mul, maximum, minimum) of two coordinate-aligned values.

    Strides, channels and dtypes must match.  A row one side lacks reads that
    side's fill (``lhs_fill`` / ``rhs_fill``).  Computed in f32 and stored in
    the operands' dtype.
    """

    op: Required[Annotated[BinaryOp | str, enum_attr(BinaryOp)]]
    join: _Join
    lhs_fill: _Fill
    rhs_fill: _Fill


BINARY_FUNCTIONS: Mapping[BinaryOp, str] = MappingProxyType(
    {
        BinaryOp.add: "add",
        BinaryOp.sub: "subtract",
        BinaryOp.mul: "multiply",
        BinaryOp.maximum: "maximum",
        BinaryOp.minimum: "minimum",
    }
)
"""The elementwise function each ``sparse_binary`` op is, by its array-API name (MLX and
torch both spell them so); each runtime looks its library's function up by this name."""


class SparseCatAttrs(TypedDict, total=False):
    """Channel concatenation ``[lhs | rhs]`` of coordinate-aligned rows; a missing side is zeros."""

    join: _Join


class SparseReindexAttrs(TypedDict, total=False):
    """``input``'s features gathered onto ``target``'s exact rows (``fill`` where input has none).

    The result has target's support (and shares its kernel-map cache) with
    input's channels and dtype.  Strides must be equal.
    """

    fill: _Fill


# -- the registry ----------------------------------------------------------------

_RUNTIME_KEYWORD_DOCS: Mapping[str, str] = MappingProxyType(
    {
        "coordinates": (
            "the runtime's SparseTensor or None (default None); when given, the output "
            "is exactly its rows (the op's target form)."
        ),
        "scale_dtype": (
            "the runtime's float dtype for scales and biases, or None for the weight's "
            "(default None)."
        ),
    }
)

_TARGETED = ("coordinates",)


def _activation(attrs: dict[str, Any], op: str) -> None:
    parsed = activation_params(
        attrs["kind"], attrs["approximate"], attrs["alpha"], attrs["beta"], attrs["threshold"]
    )
    attrs.update(parsed._asdict())


def _voxel_grid(attrs: dict[str, Any], op: str) -> None:
    attrs["voxel_size"], attrs["origin"] = voxel_grid(attrs["voxel_size"], attrs["origin"], op)


def _quantization(attrs: dict[str, Any], op: str) -> None:
    attrs["bits"], attrs["group_size"] = check_quantization(attrs["bits"], attrs["group_size"])


_JOINT: Mapping[str, Joint] = MappingProxyType(
    {
        "activation": _activation,
        "devoxelize": _voxel_grid,
        "quantize_weight": _quantization,
        "voxelize": _voxel_grid,
    }
)
"""Ops whose attributes are checked together, by the shared check both the ops and the
nn modules use."""

_KEYWORDS: Mapping[str, tuple[type, tuple[str, ...]]] = MappingProxyType(
    {
        "activation": (ActivationAttrs, ()),
        "batch_norm": (BatchNormAttrs, ()),
        "cast": (CastAttrs, ()),
        "conv3d": (Conv3dAttrs, _TARGETED),
        "conv_transpose3d": (ConvTranspose3dAttrs, _TARGETED),
        "devoxelize": (DevoxelizeAttrs, ()),
        "elementwise": (ElementwiseAttrs, ()),
        "embedding_lookup": (EmbeddingLookupAttrs, ()),
        "full_conv3d": (FullConv3dAttrs, ()),
        "full_pool3d": (FullPool3dAttrs, ()),
        "generative_conv_transpose3d": (GenerativeConvTranspose3dAttrs, ()),
        "global_pool": (GlobalPoolAttrs, ()),
        "layer_norm": (LayerNormAttrs, ()),
        "linear": (LinearAttrs, ()),
        "normalized_conv_transpose3d": (NormalizedConvTranspose3dAttrs, _TARGETED),
        "normalized_generative_conv_transpose3d": (NormalizedGenerativeConvTranspose3dAttrs, ()),
        "normalized_subm_conv3d": (NormalizedSubmConv3dAttrs, ()),
        "pool3d": (Pool3dAttrs, ()),
        "pool_transpose3d": (PoolTranspose3dAttrs, _TARGETED),
        "quantize_weight": (QuantizeWeightAttrs, ("scale_dtype",)),
        "rms_norm": (RmsNormAttrs, ()),
        "softmax": (SoftmaxAttrs, ()),
        "sparse_binary": (SparseBinaryAttrs, ()),
        "sparse_cat": (SparseCatAttrs, ()),
        "sparse_crop": (SparseCropAttrs, ()),
        "sparse_reindex": (SparseReindexAttrs, ()),
        "sparse_to_dense": (SparseToDenseAttrs, ()),
        "subm_conv3d": (SubmConv3dAttrs, ()),
        "trilinear_upsample3d": (TrilinearUpsample3dAttrs, _TARGETED),
        "voxelize": (VoxelizeAttrs, ()),
    }
)

DECLARATIONS: Mapping[str, AttrDecl] = MappingProxyType(
    {
        name: read_declaration(name, td, extra, _JOINT.get(name))
        for name, (td, extra) in _KEYWORDS.items()
    }
)
"""Every public op's keywords, read from its ``TypedDict`` once at import."""

OP_NAMES: tuple[str, ...] = tuple(sorted(("QuantizedWeight", *DECLARATIONS)))
"""The public names both runtimes' ``ops`` packages export (their ``__all__`` adds only
each runtime's declared extras)."""


def normalise(op: str, attrs: Mapping[str, object]) -> dict[str, Any]:
    """``op``'s keyword attributes with defaults applied and values checked (see module note)."""
    return normalise_attrs(DECLARATIONS[op], attrs)


def window(attrs: Mapping[str, Any]) -> Window:
    """The checked geometry of normalised attributes; an op without stride, padding or
    dilation keyword has 1, 0 and 1 (``subm_conv3d``, the generative convs)."""
    return Window(
        attrs["kernel_size"],
        attrs.get("stride", (1, 1, 1)),
        attrs.get("padding", (0, 0, 0)),
        attrs.get("dilation", (1, 1, 1)),
    )


def help_text(op: str, note: str = "") -> str:
    """The docstring of a runtime's ``op``: the declared text, ``note``, the generated keywords."""
    keywords, _ = _KEYWORDS[op]
    text = inspect.cleandoc(keywords.__doc__ or "")
    if note:
        text = f"{text}\n\n{inspect.cleandoc(note)}"
    decl = DECLARATIONS[op]
    if not decl.names:
        return text
    return f"{text}\n\n{keywords_doc(decl, _RUNTIME_KEYWORD_DOCS)}"


def keywords_type(op: str) -> type:
    """The ``TypedDict`` that declares ``op``'s keyword attributes."""
    return _KEYWORDS[op][0]

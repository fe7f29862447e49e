"""The errors of the op-argument rules, in one set of words for both runtimes.

:mod:`lattice_contract.frontend.sparse_errors` words the rules of a sparse value;
this module words the rules of an op's arguments (strides and dtypes of
aligned operands, weight and parameter shapes, a dense op handed a sparse
value).  Each runtime checks its own arrays but raises what a function here
builds from plain values (shapes as tuples, strides as triples, dtypes named
without their framework's prefix), so a bad call reads the same on MLX and on
torch.  The checks that need only such plain values run here as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice_contract.dialect import (
    check_elementwise_kind,
    check_index_vector,
    check_logical_shape,
    check_quantization,
    packed_geometry,
)
from lattice_contract.frontend.sparse_errors import ARRAY_TYPES, dtype_word

__all__ = [
    "ALIGNED_STRIDE_FIX",
    "channel_count_mismatch",
    "channel_vector_shape",
    "check_aligned_pair",
    "check_elementwise",
    "check_elementwise_input",
    "check_embedding_table",
    "check_index_array",
    "check_packed_triplet",
    "check_points_and_batch",
    "conv_weight_shape",
    "dense_op_on_sparse",
    "linear_weight_shape",
    "packed_on_normalized",
    "point_features_shape",
    "point_vector_shape",
    "stride_mismatch",
    "target_stride_mismatch",
    "weight_dtype",
]

ALIGNED_STRIDE_FIX = (
    "coordinate-aligned ops need equal strides (bring one side to the other's stride first, "
    "e.g. with a strided or transposed conv)"
)


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def stride_mismatch(
    op: str, first: str, first_stride: Sequence[int], second: str, second_stride: Sequence[int]
) -> ValueError:
    """Two coordinate-aligned operands (``lhs``/``rhs``, ``input``/``target``) at other strides."""
    return ValueError(
        f"{op}: {first} has stride {tuple(first_stride)} but {second} has stride "
        f"{tuple(second_stride)}; {ALIGNED_STRIDE_FIX}"
    )


def check_aligned_pair(
    op: str,
    lhs_stride: Sequence[int],
    rhs_stride: Sequence[int],
    lhs_dtype: object,
    rhs_dtype: object,
) -> None:
    """``sparse_binary`` / ``sparse_cat`` operands: one stride, one feature dtype."""
    if tuple(lhs_stride) != tuple(rhs_stride):
        raise stride_mismatch(op, "lhs", lhs_stride, "rhs", rhs_stride)
    if dtype_word(lhs_dtype) != dtype_word(rhs_dtype):
        raise TypeError(
            f"{op}: lhs features are {dtype_word(lhs_dtype)} but rhs features are "
            f"{dtype_word(rhs_dtype)}; cast one side first (ops.cast) so both share a dtype"
        )


def channel_count_mismatch(op: str, lhs: int, rhs: int) -> ValueError:
    """An elementwise combination of operands with other channel counts."""
    return ValueError(
        f"{op}: lhs has {lhs} channels but rhs has {rhs}; elementwise ops need equal channel "
        "counts (use sparse_cat to concatenate instead)"
    )


def dense_op_on_sparse(op: str) -> TypeError:
    """A feature-only op handed a sparse value instead of its feature rows."""
    return TypeError(
        f"{op} takes dense feature rows, got a sparse tensor; apply it to x.feats and keep the "
        "support with x.with_feats(...) (the nn modules do this for you)"
    )


def channel_vector_shape(op: str, name: str, shape: Sequence[int], channels: int) -> ValueError:
    """A per-channel parameter (bias, scale, mean, ...) of the wrong shape."""
    return ValueError(
        f"{op}: {name} has shape {_shape(shape)} but the input has {channels} channels; "
        f"it must be ({channels},)"
    )


def point_vector_shape(op: str, name: str, shape: Sequence[int], points: int) -> ValueError:
    """A per-point vector (batch indices) of the wrong shape."""
    return ValueError(
        f"{op}: {name} has shape {_shape(shape)} but there are {points} points; "
        f"it must be ({points},) (one entry per point)"
    )


def weight_dtype(op: str, dtype: object) -> TypeError:
    """A conv or linear weight that is neither a float array nor a packed weight."""
    return TypeError(
        f"{op}: weight must be a float array (f32, f16 or bf16) or a QuantizedWeight, "
        f"got {dtype_word(dtype)}"
    )


def linear_weight_shape(shape: Sequence[int], c_in: int) -> ValueError:
    """A ``linear`` weight that is not ``(C_out, C_in)``."""
    return ValueError(
        f"linear: weight has shape {_shape(shape)}; it must be (C_out, {c_in}) "
        f"(layout linear_o_i) for an input with {c_in} channels"
    )


def conv_weight_shape(
    op: str, shape: Sequence[int], kernel: Sequence[int], c_in: int
) -> ValueError:
    """A conv weight that is not ``(C_out, Kx, Ky, Kz, C_in)`` for this kernel and input."""
    kx, ky, kz = (int(k) for k in kernel)
    return ValueError(
        f"{op}: weight has shape {_shape(shape)}, expected (C_out, {kx}, {ky}, {kz}, {c_in}) "
        "(layout conv3d_o_xyz_i: C_out first, C_in last, C_in = the input's channels)"
    )


def target_stride_mismatch(
    op: str, target_stride: Sequence[int], out_stride: Sequence[int], rule: str
) -> ValueError:
    """A ``coordinates=`` target at another stride than the op produces (``rule`` says how)."""
    return ValueError(
        f"{op}: the target (coordinates=) has stride {tuple(target_stride)}, but this op "
        f"produces stride {tuple(out_stride)} ({rule}); pass a target at that stride"
    )


def check_elementwise_input(dtype: object, shape: Sequence[int]) -> None:
    """``elementwise`` takes rank-2 f32 features only (the contract types it so); no promotion."""
    if len(shape) != 2:
        raise ValueError(f"elementwise: x must have shape (N, C), got {_shape(shape)}")
    if dtype_word(dtype) != "float32":
        raise TypeError(f"elementwise: x must be float32, got {dtype_word(dtype)}; cast it first")


_SCALE_WORDS = ("float16", "bfloat16", "float32")


def check_packed_triplet(
    weight: tuple[object, Sequence[int]],
    scales: tuple[object, Sequence[int]],
    biases: tuple[object, Sequence[int]],
    bits: object,
    group_size: object,
    shape: Sequence[int] | None,
) -> tuple[int, int, int]:
    """A ``QuantizedWeight``'s triplet, each part given as ``(dtype, shape)``: its geometry.

    uint32 words; f16, bf16 or f32 scales with biases of the same dtype and
    shape; the words and the groups agreeing on one padded ``C_in``
    (:func:`lattice_contract.dialect.values.packed_geometry`); and, when given, the
    logical ``shape`` fitting it.  Returns ``(K, C_out, padded C_in)``.
    """
    n_bits, group = check_quantization(bits, group_size)
    (w_dtype, w_shape), (s_dtype, s_shape), (b_dtype, b_shape) = weight, scales, biases
    if dtype_word(w_dtype) != "uint32":
        raise TypeError(f"QuantizedWeight.weight must hold uint32 words, got {dtype_word(w_dtype)}")
    if dtype_word(s_dtype) not in _SCALE_WORDS:
        raise TypeError(
            f"QuantizedWeight.scales must be f16, bf16 or f32, got {dtype_word(s_dtype)}"
        )
    if dtype_word(b_dtype) != dtype_word(s_dtype):
        raise TypeError(
            f"QuantizedWeight.biases dtype {dtype_word(b_dtype)} differs from scales dtype "
            f"{dtype_word(s_dtype)}; both must use the packing's scale_dtype"
        )
    geometry = packed_geometry(tuple(w_shape), tuple(s_shape), n_bits, group)
    if _shape(b_shape) != _shape(s_shape):
        raise ValueError(
            f"QuantizedWeight.scales {_shape(s_shape)} and biases {_shape(b_shape)} must match"
        )
    if shape is not None:
        check_logical_shape(shape, geometry, group)
    return geometry


def check_embedding_table(
    weight: object, array_type: type, float_dtypes: tuple[object, ...]
) -> None:
    """``embedding_lookup``'s weight: an ``array_type`` of one of ``float_dtypes``, rank 2."""
    if not isinstance(weight, array_type) or getattr(weight, "dtype", None) not in float_dtypes:
        kind = getattr(weight, "dtype", None) if isinstance(weight, array_type) else type(weight)
        raise TypeError(
            "embedding_lookup: weight must be a float tensor of shape (num_embeddings, C), "
            f"got {dtype_word(getattr(kind, '__name__', kind))}"
        )
    shape = tuple(getattr(weight, "shape", ()))
    if len(shape) != 2:
        raise ValueError(
            f"embedding_lookup: weight must have shape (num_embeddings, C), got {_shape(shape)}"
        )


def packed_on_normalized(op: str) -> TypeError:
    """A packed weight handed to a normalised convolution (the contract forbids it)."""
    return TypeError(
        f"{op}: packed (quantized) weights are not allowed on normalised convolutions; "
        "the normaliser needs the dense weight, so pass a float tensor"
    )


def check_points_and_batch(op: str, points: object, batch: object, array_type: type) -> None:
    """``voxelize``/``devoxelize`` inputs, arrays of the runtime's ``array_type``.

    Points are f32 ``(P, 3)`` (the contract's points type) and batch indices
    int32 ``(P,)``; nothing is promoted.
    """
    p_array, b_array = isinstance(points, array_type), isinstance(batch, array_type)
    p_dtype, p_shape = getattr(points, "dtype", None), tuple(getattr(points, "shape", ()))
    b_dtype, b_shape = getattr(batch, "dtype", None), tuple(getattr(batch, "shape", ()))
    if not p_array or dtype_word(p_dtype) != "float32":
        raise TypeError(f"{op}: points must be a float32 array of shape (P, 3)")
    if len(p_shape) != 2 or p_shape[1] != 3:
        raise ValueError(f"{op}: points must have shape (P, 3), got {_shape(p_shape)}")
    if not b_array or dtype_word(b_dtype) != "int32":
        raise TypeError(f"{op}: batch_indices must be an int32 array of shape (P,)")
    if _shape(b_shape) != (int(p_shape[0]),):
        raise point_vector_shape(op, "batch_indices", b_shape, int(p_shape[0]))


def point_features_shape(shape: Sequence[int], points: int) -> ValueError:
    """``voxelize`` features that are not one row per point."""
    return ValueError(
        f"voxelize: features must have shape ({points}, C) (one row per point), got {_shape(shape)}"
    )


def _require_array(op: str, name: str, value: object, array_type: type) -> None:
    if not isinstance(value, array_type):
        raise TypeError(
            f"{op}: {name} must be an array ({ARRAY_TYPES}), got {type(value).__name__}"
        )


def check_index_array(op: str, indices: object, array_type: type) -> None:
    """An index vector: an array of the runtime's ``array_type``, int32 (or int64), rank 1."""
    _require_array(op, "indices", indices, array_type)
    dtype = getattr(indices, "dtype", None)
    dtype_ok = dtype_word(dtype) in ("int32", "int64")
    check_index_vector(op, dtype_ok, dtype, tuple(getattr(indices, "shape", ())))


def check_elementwise(kind: object, x: object, array_type: type) -> str:
    """``elementwise``'s kind and input (rank-2 f32 of the runtime's ``array_type``); the kind."""
    checked = check_elementwise_kind(kind)
    _require_array("elementwise", "x", x, array_type)
    check_elementwise_input(getattr(x, "dtype", None), tuple(getattr(x, "shape", ())))
    return checked

"""The errors of the op-argument rules, in one set of words for both runtimes.

:mod:`lattice_contract.sparse_errors` words the rules of a sparse value;
this module words the rules of an op's arguments (strides and dtypes of
aligned operands, weight and parameter shapes, a dense op handed a sparse
value).  Each runtime checks its own arrays but raises what a function here
builds from plain values (shapes as tuples, strides as triples, dtypes named
without their framework's prefix), so a bad call reads the same on MLX and on
torch.  The checks that need only such plain values run here as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from lattice_contract.sparse_errors import dtype_word

__all__ = [
    "ALIGNED_STRIDE_FIX",
    "channel_count_mismatch",
    "channel_vector_shape",
    "check_aligned_pair",
    "check_elementwise_input",
    "conv_weight_shape",
    "dense_op_on_sparse",
    "linear_weight_shape",
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

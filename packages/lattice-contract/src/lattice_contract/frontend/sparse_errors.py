"""The errors of the sparse-value rules, in one set of words for every runtime.

A sparse value (coords, features, active count, stride) is checked by each
runtime's ``SparseTensor`` (and so at every artifact's ABI boundary).  The
checks run on each runtime's own arrays, but what a user reads when one
fails must not depend on the runtime: each function here builds the
exception (its type and its message) from plain values, and both runtimes
raise what it returns.  Dtypes are named without a framework prefix
(``float32``, ``int64``), shapes and rows as Python tuples and lists.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ARRAY_TYPES",
    "active_rows_dtype",
    "active_rows_kind",
    "active_rows_range",
    "active_rows_shape",
    "coords_dtype",
    "coords_shape",
    "dtype_word",
    "duplicate_row",
    "feats_dtype",
    "feats_shape",
    "negative_batch",
    "new_feats_shape",
    "not_an_array",
    "not_divisible",
    "row_mismatch",
]

_ACTIVE_FORMS = "an int or an int32 array of shape (1,)"
ARRAY_TYPES = "an mlx.core.array on MLX, a torch.Tensor on torch"
"""What an array input is, in words that do not depend on the runtime."""


def dtype_word(dtype: object) -> str:
    """A framework dtype named without its module: ``mlx.core.float32`` -> ``float32``."""
    return str(dtype).rsplit(".", 1)[-1]


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def not_an_array(what: str, value: object) -> TypeError:
    """``what`` (coords, feats, active_rows) is not an array of the runtime."""
    return TypeError(f"{what} must be an array ({ARRAY_TYPES}), got {type(value).__name__}")


def coords_dtype(dtype: object) -> TypeError:
    word = dtype_word(dtype)
    if word in ("float16", "bfloat16", "float32", "float64"):
        # TorchSparse's SparseTensor takes (feats, coords): float "coords" are usually the
        # features passed first, and converting them to int32 would hide the mistake.
        return TypeError(
            f"coords must be int32, got {word}: SparseTensor takes (coords, feats), coordinates "
            "first (TorchSparse's SparseTensor takes (feats, coords)); if these are the "
            "features, swap the arguments or pass feats= / coords= by name"
        )
    return TypeError(f"coords must be int32, got {word}; convert them to int32")


def coords_shape(shape: Sequence[int]) -> ValueError:
    return ValueError(
        f"coords must have shape (N, 4) with rows (batch, x, y, z), got {_shape(shape)}"
    )


def feats_shape(shape: Sequence[int]) -> ValueError:
    return ValueError(
        f"feats must have shape (N, C) (one feature row per coordinate row), got {_shape(shape)}"
    )


def feats_dtype(dtype: object) -> TypeError:
    return TypeError(
        f"feats must be float16, bfloat16 or float32, got {dtype_word(dtype)}; convert them to "
        "float32"
    )


def row_mismatch(feat_rows: int, coord_rows: int) -> ValueError:
    return ValueError(
        f"feats has {feat_rows} rows but coords has {coord_rows}; row i of feats belongs to "
        "row i of coords"
    )


def new_feats_shape(shape: Sequence[int], rows: int) -> ValueError:
    """``with_feats`` features that are not one row per row of the support."""
    return ValueError(
        f"with_feats needs features of shape ({rows}, C) to match the support, got {_shape(shape)}"
    )


def active_rows_kind(value: object) -> TypeError:
    """``active_rows`` is neither an int nor an array (a bool counts as neither)."""
    return TypeError(f"active_rows must be {_ACTIVE_FORMS}, got {type(value).__name__}")


def active_rows_dtype(dtype: object) -> TypeError:
    return TypeError(f"active_rows must be {_ACTIVE_FORMS}, got an array of {dtype_word(dtype)}")


def active_rows_shape(shape: Sequence[int]) -> ValueError:
    return ValueError(
        f"active_rows must be {_ACTIVE_FORMS}, got an int32 array of shape {_shape(shape)}"
    )


def active_rows_range(count: int, rows: int) -> ValueError:
    if count < 0:
        return ValueError(f"active_rows is {count}, which is negative; it must lie in [0, {rows}]")
    return ValueError(
        f"active_rows is {count} but only {rows} coordinate rows were given; it must lie in "
        f"[0, {rows}] (rows past it are padding)"
    )


def negative_batch(row: int, values: Sequence[int]) -> ValueError:
    """The first row with a negative batch index."""
    return ValueError(
        f"coords row {row} {list(values)} has batch index {values[0]}; batch indices must be >= 0"
    )


def not_divisible(row: int, values: Sequence[int], stride: tuple[int, int, int]) -> ValueError:
    """The first row whose spatial coordinates are not multiples of the stride."""
    return ValueError(
        f"coords row {row} {list(values)} is not divisible by the stride {stride}; "
        f"coordinates are physical, so a stride-{stride} value must carry multiples of the "
        "stride (multiply logical coordinates by it)"
    )


def duplicate_row(row: int, values: Sequence[int]) -> ValueError:
    """The first row that repeats an earlier one."""
    return ValueError(
        f"coords row {row} {list(values)} repeats an earlier row; a sparse value holds each "
        "coordinate once (merge duplicates first, e.g. with ops.voxelize)"
    )

"""Both runtimes refuse the same bad inputs with the same error type and the same words.

Each bad sparse value and each bad op call is written once against either
runtime and run on both.  The messages must be equal after the two spellings
that necessarily differ are normalised: a framework's dtype names
(``mlx.core.float16`` / ``torch.float16`` -> ``float16``) and the runtime's own
package name (``mlx_lattice`` / ``torch_lattice``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx_lattice
import mlx_lattice.ops as mo
import numpy as np
import pytest
import torch
import torch_lattice
import torch_lattice.ops as to

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cross_runtime_support import to_mx, to_torch

_DTYPE = re.compile(r"\b(?:mlx\.core|torch)\.(float16|bfloat16|float32|float64|int32|int64|int8)\b")
_PACKAGE = re.compile(r"\b(?:mlx_lattice|torch_lattice)\b")
_ARRAY = re.compile(r"\b(?:mx\.array|mlx\.core\.array|torch\.Tensor)\b")


def error_words(fn: Any) -> str:
    """``"<error class>: <message>"`` of what ``fn()`` raises, runtime spellings normalised."""
    try:
        fn()
    except (TypeError, ValueError, IndexError) as exc:
        words = _ARRAY.sub("<array>", _PACKAGE.sub("<runtime>", _DTYPE.sub(r"\1", str(exc))))
        return f"{type(exc).__name__}: {words}"  # the exact class: both raise the contract's
    except Exception as exc:
        return f"unexpected {type(exc).__name__}: {exc}"
    return "no error"


def _sparse_args(case: str) -> tuple[np.ndarray, np.ndarray, Any, Any]:
    coords = np.array([[0, 0, 0, 0], [0, 2, 2, 2], [1, 2, 0, 4]], dtype=np.int32)
    feats = np.ones((3, 2), dtype=np.float32)
    stride: Any = 2
    active: Any = None
    if case == "duplicate":
        coords[2] = coords[1]
    elif case == "negative_batch":
        coords[1, 0] = -1
    elif case == "not_divisible":
        coords[2, 3] = 3
    elif case == "coords_int64":
        coords = coords.astype(np.int64)
    elif case == "coords_rank":
        coords = coords[:, :3]
    elif case == "active_too_large":
        active = 4
    elif case == "active_negative":
        active = -1
    elif case == "row_mismatch":
        feats = feats[:2]
    elif case == "coords_float":
        coords = coords.astype(np.float32)
    elif case == "feats_int":
        feats = feats.astype(np.int32)
    elif case == "feats_rank":
        feats = feats[:, 0]
    elif case == "zero_stride":
        stride = (2, 0, 2)
    elif case == "span_too_wide":
        coords = np.array([[0, -(2**31), 0, 0], [0, 2**31 - 2, 2**31 - 2, 0], [5, 0, 0, 2**30]])
        coords = coords.astype(np.int32)
    return coords, feats, stride, active


SPARSE_BAD = [
    "duplicate",
    "negative_batch",
    "not_divisible",
    "coords_int64",
    "coords_rank",
    "active_too_large",
    "active_negative",
    "row_mismatch",
    "zero_stride",
    "coords_float",
    "feats_int",
    "feats_rank",
    "span_too_wide",
]


@pytest.mark.parametrize("case", SPARSE_BAD)
def test_both_runtimes_refuse_bad_sparse_values(case: str) -> None:
    """Checked at construction, with the same words (the span policy included)."""
    coords, feats, stride, active = _sparse_args(case)
    m_make = mlx_lattice.SparseTensor.trusted if "trusted" in case else mlx_lattice.SparseTensor
    t_make = torch_lattice.SparseTensor.trusted if "trusted" in case else torch_lattice.SparseTensor
    m_err = error_words(lambda: m_make(to_mx(coords), to_mx(feats), stride, active))
    t_err = error_words(lambda: t_make(to_torch(coords), to_torch(feats), stride, active))
    assert not m_err.startswith(("no error", "unexpected")), (case, "mlx", m_err)
    assert m_err == t_err, (case, m_err, t_err)


@pytest.mark.parametrize("case", ["int_features", "wrong_rows", "rank_one", "not_an_array"])
def test_both_runtimes_refuse_bad_new_features(case: str) -> None:
    """``with_feats`` checks new features with the contract's words on both runtimes."""
    coords, feats, stride, _ = _sparse_args("valid")
    new: Any = {
        "int_features": feats.astype(np.int32),
        "wrong_rows": feats[:2],
        "rank_one": feats[:, 0],
        "not_an_array": feats.tolist(),
    }[case]
    m_x = mlx_lattice.SparseTensor(to_mx(coords), to_mx(feats), stride)
    t_x = torch_lattice.SparseTensor(to_torch(coords), to_torch(feats), stride)
    m_new = new if isinstance(new, list) else to_mx(new)
    t_new: Any = new if isinstance(new, list) else to_torch(new)  # a list on purpose
    m_err = error_words(lambda: m_x.with_feats(m_new))
    t_err = error_words(lambda: t_x.with_feats(t_new))
    assert not m_err.startswith(("no error", "unexpected")), (case, "mlx", m_err)
    assert m_err == t_err, (case, m_err, t_err)


def _bad_op_calls(rt: Any, ops: Any, arr: Any) -> dict[str, Any]:
    """Calls SPEC §4/§5 forbid, written once against either runtime."""
    coords = np.array([[0, 0, 0, 0], [0, 2, 2, 2]], dtype=np.int32)
    feats = np.ones((2, 3), dtype=np.float32)
    x = rt.SparseTensor(arr(coords), arr(feats), 2)
    y = rt.SparseTensor(arr(coords), arr(feats), 1)
    half = rt.SparseTensor(arr(coords), arr(feats, "f16"), 2)
    narrow = rt.SparseTensor(arr(coords), arr(feats[:, :2]), 2)
    w = arr(np.ones((4, 3, 3, 3, 3), dtype=np.float32))
    vec = arr(np.ones(3, dtype=np.float32))
    points_f32 = np.zeros((2, 3), dtype=np.float32)
    points = arr(points_f32)
    return {
        "binary_dtype_mismatch": lambda: ops.sparse_binary(x, half, op="add", join="inner"),
        "binary_channel_mismatch": lambda: ops.sparse_binary(x, narrow, op="add", join="inner"),
        "dense_op_on_sparse": lambda: ops.softmax(x),
        "integer_weight": lambda: ops.subm_conv3d(
            x, arr(np.ones((4, 3, 3, 3, 3), np.int32)), kernel_size=3
        ),
        "bias_shape": lambda: ops.subm_conv3d(x, w, vec, kernel_size=3),
        "linear_shape": lambda: ops.linear(arr(feats), arr(np.ones((4, 5), np.float32))),
        "batch_norm_vector_shape": lambda: ops.batch_norm(
            arr(feats), vec, vec, vec, arr(np.ones(2, np.float32)), eps=1e-5
        ),
        "layer_norm_eps": lambda: ops.layer_norm(arr(feats), vec, vec, eps=0.0),
        "voxel_size_zero": lambda: ops.voxelize(
            points, arr(feats), arr(np.zeros(2, np.int32)), voxel_size=0.0, reduction="mean"
        ),
        "voxelize_negative_batch": lambda: ops.voxelize(
            points, arr(feats), arr(np.array([0, -1], np.int32)), voxel_size=1.0, reduction="sum"
        ),
        "devoxelize_batch_shape": lambda: ops.devoxelize(
            points, x, arr(np.zeros(3, np.int32)), voxel_size=1.0, interpolation="nearest"
        ),
        "unknown_interpolation": lambda: ops.devoxelize(
            points, x, arr(np.zeros(2, np.int32)), voxel_size=1.0, interpolation="cubic"
        ),
        "unknown_rounding": lambda: ops.cast(arr(feats), "f16", rounding="stochastic"),
        "global_pool_batch_too_small": lambda: ops.global_pool(
            rt.SparseTensor(arr(coords + np.array([3, 0, 0, 0], np.int32)), arr(feats), 2),
            mode="max",
            batch_size=2,
        ),
        "binary_stride_mismatch": lambda: ops.sparse_binary(x, y, op="add", join="inner"),
        "cat_stride_mismatch": lambda: ops.sparse_cat(x, y, join="outer"),
        "reindex_stride_mismatch": lambda: ops.sparse_reindex(x, y),
        "unknown_join": lambda: ops.sparse_binary(x, x, op="add", join="full"),
        "target_wrong_stride": lambda: ops.conv3d(x, w, kernel_size=3, stride=2, coordinates=x),
        "transpose_stride_not_dividing": lambda: ops.conv_transpose3d(
            y, w, kernel_size=3, stride=2
        ),
        "generative_padding": lambda: ops.generative_conv_transpose3d(
            x, w, kernel_size=3, stride=2, padding=1
        ),
        "weight_shape": lambda: ops.conv3d(x, w, kernel_size=2),
        "unknown_pool_mode": lambda: ops.pool3d(x, mode="median", kernel_size=2),
        "unknown_activation": lambda: ops.activation(arr(feats), kind="swish"),
        "global_pool_batch_size": lambda: ops.global_pool(x, mode="sum", batch_size=0),
        "embedding_table_rank": lambda: ops.embedding_lookup(
            arr(np.zeros(2, np.int32)), arr(np.ones(3, np.float32))
        ),
        "embedding_index_range": lambda: ops.embedding_lookup(
            arr(np.array([0, 5], np.int32)), arr(np.ones((3, 2), np.float32))
        ),
        "normalized_eps": lambda: ops.normalized_subm_conv3d(x, w, kernel_size=3, eps=0.0),
        "softmax_axis": lambda: ops.softmax(arr(feats), axis=0),
        "linear_bias_shape": lambda: ops.linear(
            arr(feats), arr(np.ones((4, 3), np.float32)), arr(np.ones(3, np.float32))
        ),
        "voxelize_f16_points": lambda: ops.voxelize(
            arr(points_f32, "f16"), arr(feats), arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        "voxelize_feature_rows": lambda: ops.voxelize(
            points, arr(feats[:1]), arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        # voxelize's feature checks are the shared point prologue's (one set of words)
        "voxelize_int_features": lambda: ops.voxelize(
            points, arr(np.ones((2, 3), np.int32)), arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        "voxelize_list_features": lambda: ops.voxelize(
            points, feats.tolist(), arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        "voxelize_sparse_features": lambda: ops.voxelize(
            points, x, arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        "voxelize_features_rank": lambda: ops.voxelize(
            points, arr(feats[:, 0]), arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        "voxelize_active_too_large": lambda: ops.voxelize(
            points, arr(feats), arr(np.zeros(2, np.int32)), 3, voxel_size=1.0
        ),
        "devoxelize_dense_voxels": lambda: ops.devoxelize(
            points, arr(feats), arr(np.zeros(2, np.int32)), voxel_size=1.0
        ),
        "cast_target": lambda: ops.cast(arr(feats), "f64"),
        "cast_integer_source": lambda: ops.cast(arr(np.ones((2, 2), np.int32)), "f16"),
        "upsample_stride_not_dividing": lambda: ops.trilinear_upsample3d(y, stride=2),
        "activation_alpha": lambda: ops.activation(arr(feats), kind="relu", alpha="x"),
        "softplus_beta_zero": lambda: ops.activation(arr(feats), kind="softplus", beta=0.0),
        "cat_dtype_mismatch": lambda: ops.sparse_cat(x, half, join="inner"),
    }


def test_both_runtimes_refuse_bad_op_calls() -> None:
    m_calls = _bad_op_calls(mlx_lattice, mo, to_mx)
    t_calls = _bad_op_calls(torch_lattice, to, to_torch)
    for name in m_calls:
        m_err, t_err = error_words(m_calls[name]), error_words(t_calls[name])
        assert not m_err.startswith(("no error", "unexpected")), (name, "mlx", m_err)
        assert m_err == t_err, (name, m_err, t_err)


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_elementwise_takes_f32_only_on_both(dtype: str) -> None:
    """The contract types ``elementwise`` on f32; neither runtime promotes another float."""
    values = np.linspace(-2.0, 2.0, 12).reshape(4, 3)
    m_x = mx.array(values).astype(getattr(mx, dtype))
    t_x = torch.from_numpy(values).to(getattr(torch, dtype))
    m_err = error_words(lambda: mo.elementwise(m_x, kind="exp"))
    t_err = error_words(lambda: to.elementwise(t_x, kind="exp"))
    assert (
        m_err == t_err == f"TypeError: elementwise: x must be float32, got {dtype}; cast it first"
    )

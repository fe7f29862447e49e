"""Shared helpers of the op-by-op cross-runtime test (mlx_lattice against torch_lattice).

Inputs are drawn once in NumPy and handed, bit for bit, to both runtimes;
results come back to NumPy for comparison.  Sparse results are aligned by the
contract's canonical order (SPEC §4), computed by each runtime's own
``canonical_order`` so that the utility itself is under test as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx_lattice
import numpy as np
import torch
import torch_lattice

MX_DTYPES = {"f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16}
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

TOLERANCE = {"f32": (1e-5, 1e-5), "f16": (1e-2, 1e-2), "bf16": (2e-2, 2e-2)}
"""(rtol, atol) of MLX against torch for a feature result stored in this dtype.

Both runtimes sum in f32, so f32 results differ only by summation order; a
half-precision result may additionally land one ulp apart after that
difference (2^-11 relative for f16, 2^-8 for bf16).
"""


# ------------------------------------------------------------- conversion


def to_mx(array: np.ndarray, dtype: str | None = None) -> mx.array:
    """A NumPy array as MLX, optionally converted to a float storage dtype."""
    out = mx.array(array)
    return out if dtype is None else out.astype(MX_DTYPES[dtype])


def to_torch(array: np.ndarray, dtype: str | None = None) -> torch.Tensor:
    """A NumPy array as torch (a copy), optionally converted to a float storage dtype."""
    out = torch.from_numpy(np.ascontiguousarray(array).copy())
    return out if dtype is None else out.to(TORCH_DTYPES[dtype])


def np_of(value: Any) -> np.ndarray:
    """Any MLX array or torch tensor as NumPy; floats widened to f32 (exact for f16/bf16)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return np.asarray(value.float().numpy() if value.is_floating_point() else value.numpy())
    if value.dtype in (mx.float16, mx.bfloat16):
        value = value.astype(mx.float32)
    return np.asarray(value)


@dataclass(frozen=True)
class Pair:
    """The same sparse value in both runtimes."""

    mx: mlx_lattice.SparseTensor
    torch: torch_lattice.SparseTensor


def sparse_pair(coords: np.ndarray, feats: np.ndarray, stride: Any, dtype: str) -> Pair:
    """Build the value in each runtime through its validating constructor."""
    return Pair(
        mlx_lattice.SparseTensor(to_mx(coords), to_mx(feats, dtype), stride),
        torch_lattice.SparseTensor(to_torch(coords), to_torch(feats, dtype), stride),
    )


# ------------------------------------------------------------ random data


def random_coords(
    rng: np.random.Generator,
    rows: int,
    *,
    batch: int = 1,
    extent: int = 6,
    stride: tuple[int, int, int] = (1, 1, 1),
    low: int = 0,
) -> np.ndarray:
    """Distinct shuffled int32 rows, logical coordinates in ``[low, low + extent)^3``."""
    b = rng.integers(0, batch, size=(rows, 1))
    xyz = rng.integers(low, low + extent, size=(rows, 3))
    logical = np.unique(np.concatenate([b, xyz], axis=1), axis=0)
    logical = logical[rng.permutation(len(logical))]
    return np.asarray(logical * np.array((1, *stride)), dtype=np.int32)


def random_feats(rng: np.random.Generator, rows: int, channels: int) -> np.ndarray:
    """Standard-normal features, exactly representable in f16 (so both sides read the same)."""
    return rng.standard_normal((rows, channels)).astype(np.float16).astype(np.float32)


def random_sparse(
    rng: np.random.Generator,
    rows: int,
    channels: int,
    dtype: str = "f32",
    **kwargs: Any,
) -> Pair:
    """A random sparse value (see :func:`random_coords`) in both runtimes."""
    stride = kwargs.get("stride", (1, 1, 1))
    coords = random_coords(rng, rows, **kwargs)
    return sparse_pair(coords, random_feats(rng, len(coords), channels), stride, dtype)


# -------------------------------------------------------------- comparison


def assert_close(actual: Any, expected: Any, dtype: str, what: str) -> None:
    """MLX result ``actual`` against torch result ``expected`` within the dtype's tolerance."""
    rtol, atol = TOLERANCE[dtype]
    a, e = np_of(actual), np_of(expected)
    assert a.shape == e.shape, f"{what}: shapes differ, mlx {a.shape} vs torch {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=what)


def canonical_rows(mx_out: mlx_lattice.SparseTensor, t_out: torch_lattice.SparseTensor) -> Any:
    """Both results' coordinates and features in canonical order, after checking the orders.

    Each runtime orders its own result with its own ``canonical_order``; the
    two utilities must also agree with each other on the same coordinates.
    """
    mx_coords, t_coords = np_of(mx_out.coords), np_of(t_out.coords)
    mx_perm = np.asarray(mlx_lattice.canonical_order(mx_out.coords)).astype(np.int64)
    t_perm = torch_lattice.canonical_order(t_out.coords).numpy().astype(np.int64)
    # the two utilities agree when handed the same coordinates (both directions)
    cross_t = torch_lattice.canonical_order(torch.from_numpy(mx_coords.copy())).numpy()
    np.testing.assert_array_equal(cross_t, mx_perm, err_msg="canonical_order differs (mlx rows)")
    cross_mx = np.asarray(mlx_lattice.canonical_order(to_mx(t_coords)))
    np.testing.assert_array_equal(cross_mx, t_perm, err_msg="canonical_order differs (torch rows)")
    return (
        mx_coords[mx_perm],
        np_of(mx_out.feats)[mx_perm],
        t_coords[t_perm],
        np_of(t_out.feats)[t_perm],
    )


def assert_sparse_match(
    mx_out: mlx_lattice.SparseTensor,
    t_out: torch_lattice.SparseTensor,
    dtype: str,
    what: str,
) -> None:
    """Same stride, dtype and support (exactly, in canonical order); features within tolerance."""
    assert isinstance(mx_out, mlx_lattice.SparseTensor), what
    assert isinstance(t_out, torch_lattice.SparseTensor), what
    assert mx_out.stride == t_out.stride, f"{what}: stride {mx_out.stride} vs {t_out.stride}"
    assert mx_out.dtype == MX_DTYPES[dtype], f"{what}: mlx dtype {mx_out.dtype}"
    assert t_out.dtype == TORCH_DTYPES[dtype], f"{what}: torch dtype {t_out.dtype}"
    assert mx_out.coords.dtype == mx.int32 and t_out.coords.dtype == torch.int32, what
    mc, mf, tc, tf = canonical_rows(mx_out, t_out)
    assert mc.shape == tc.shape, f"{what}: {len(mc)} mlx rows vs {len(tc)} torch rows"
    np.testing.assert_array_equal(mc, tc, err_msg=f"{what}: coordinates differ")
    rtol, atol = TOLERANCE[dtype]
    np.testing.assert_allclose(mf, tf, rtol=rtol, atol=atol, err_msg=f"{what}: features")


def assert_same_row_order(
    mx_out: mlx_lattice.SparseTensor, t_out: torch_lattice.SparseTensor, expected: np.ndarray
) -> None:
    """Both results carry exactly ``expected`` coordinates, row for row (no reordering)."""
    np.testing.assert_array_equal(np_of(mx_out.coords), expected, err_msg="mlx row order")
    np.testing.assert_array_equal(np_of(t_out.coords), expected, err_msg="torch row order")

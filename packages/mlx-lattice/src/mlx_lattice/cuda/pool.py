"""Sparse pools on MLX's CUDA backend: the conv's device map, reduced by ``lt_pool``.

``pool3d`` reads the map of ``conv3d`` with the same geometry and
``full_pool3d`` that of ``full_conv3d``, both from
:func:`mlx_lattice.cuda.maps.support_and_map`, memoised on the input's
support: a pool beside a conv of the same geometry builds one map, in the
same few launches as the conv's (no sort, one host read for a generated
support's size).  The semantics are the generic path's
(:mod:`mlx_lattice.ops.pool`, docs/semantics.md): reductions in f32 stored
in the input dtype, ``avg`` over the present inputs, 0 for a row with none.
Gradients come from an ``mx.custom_function`` over the map's adjoint table,
the one the conv's input gradient uses.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
from lattice_contract.dialect import Int32CoordinateError, PoolMode, Triple

from mlx_lattice.cuda import kernels, maps
from mlx_lattice.sparse import SparseTensor

__all__ = ["pool"]


def _pool_function(dmap: maps.DeviceMap, mode: str) -> Callable[[mx.array], mx.array]:
    """``f(feats) -> y`` over one map, differentiable."""

    @mx.custom_function
    def f(feats: mx.array) -> mx.array:
        return kernels.pool_rows(feats, dmap.nbr, mode)

    @f.vjp
    def f_vjp(feats: mx.array, cotangent: mx.array, output: mx.array) -> mx.array:
        return kernels.pool_grad(feats, output, cotangent, dmap.nbr, dmap.inverse(), mode)

    return f  # type: ignore[return-value]  # mx.custom_function is callable like f


def pool(
    op: str,
    x: SparseTensor,
    mode: PoolMode,
    geometry: tuple[Triple, Triple, Triple, Triple],
    out_stride: Triple,
    *,
    family: str,
) -> SparseTensor:
    """One sparse pool of ``family`` (``forward``: pool3d, ``full``: full_pool3d) on the GPU.

    ``geometry`` is ``(kernel_size, stride, padding, dilation)``, already
    checked by the caller.
    """
    try:
        gen = maps.support_and_map(family, x.cache, x.coords, x.stride, *geometry, out_stride)
    except Int32CoordinateError as err:
        raise err.with_op(op) from None
    feats = _pool_function(gen.dmap, mode.value)(x.feats)
    return SparseTensor._from_parts(gen.coords, feats, gen.stride, gen.cache)

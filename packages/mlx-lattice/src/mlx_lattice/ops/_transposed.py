"""The output rows and map of a transposed relation, for the ops built on it.

``normalized_conv_transpose3d``, ``normalized_generative_conv_transpose3d``,
``pool_transpose3d`` and ``trilinear_upsample3d`` all read the transposed
relation ``o = c*s - p + k*d``: at a ``coordinates=`` target's rows, or on the
support it generates.  This is that choice, written once, with the output
stride rule (``t / s``) and the int32 coordinate rule's error naming the op.
"""

from __future__ import annotations

from typing import NamedTuple

import mlx.core as mx
from lattice_contract.dialect import Int32CoordinateError, Triple, transposed_stride

from mlx_lattice.coords import SupportCache
from mlx_lattice.kernel_map import KernelMap, target_transpose_map, transpose_support
from mlx_lattice.ops.conv import Geometry, _target
from mlx_lattice.sparse import SparseTensor

__all__ = ["TransposedOutput", "transposed_output"]


class TransposedOutput(NamedTuple):
    """The map onto the output rows, and those rows' coords, stride and cache."""

    kmap: KernelMap
    coords: mx.array
    stride: Triple
    cache: SupportCache


def transposed_output(
    op: str, x: SparseTensor, g: Geometry, coordinates: object
) -> TransposedOutput:
    """``op``'s transposed map onto the target's rows, or onto the support it generates."""
    out_stride = transposed_stride(x.stride, g.stride, op)
    geometry = (g.kernel_size, g.stride, g.padding, g.dilation)
    if coordinates is not None:
        target = _target(coordinates, op, out_stride, "input stride / stride")
        kmap = target_transpose_map(
            x.cache, x.coords, x.stride, target.cache, target.coords, target.stride, *geometry
        )
        return TransposedOutput(kmap, target.coords, target.stride, target.cache)
    try:
        gen = transpose_support(x.cache, x.coords, x.stride, *geometry)
    except Int32CoordinateError as err:  # the kernel map serves several ops
        raise err.with_op(op) from None
    return TransposedOutput(gen.kmap, gen.coords, gen.stride, gen.cache)

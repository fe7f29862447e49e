"""mlx-lattice 0.6's per-purpose op names (``relu``, ``max_pool3d``, ``global_avg_pool``...).

Each is a contract op with one keyword fixed
(:class:`lattice_contract.frontend.UpstreamOps`), bound here to this
runtime's ops so code written for mlx-lattice 0.6 runs unchanged.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract.frontend import UpstreamOps

from mlx_lattice.ops.algebra import sparse_binary, sparse_cat
from mlx_lattice.ops.feature import activation
from mlx_lattice.ops.pool import global_pool, pool3d
from mlx_lattice.sparse import SparseTensor

_OPS: UpstreamOps[SparseTensor, mx.array] = UpstreamOps(
    activation, pool3d, global_pool, sparse_binary, sparse_cat
)

relu = _OPS.relu
gelu = _OPS.gelu
silu = _OPS.silu
sigmoid = _OPS.sigmoid
tanh = _OPS.tanh
hardswish = _OPS.hardswish
leaky_relu = _OPS.leaky_relu
elu = _OPS.elu
softplus = _OPS.softplus
max_pool3d = _OPS.max_pool3d
avg_pool3d = _OPS.avg_pool3d
sum_pool3d = _OPS.sum_pool3d
global_avg_pool = _OPS.global_avg_pool
global_max_pool = _OPS.global_max_pool
global_sum_pool = _OPS.global_sum_pool
sparse_add = _OPS.sparse_add
sparse_sub = _OPS.sparse_sub
sparse_mul = _OPS.sparse_mul
sparse_maximum = _OPS.sparse_maximum
sparse_minimum = _OPS.sparse_minimum
sparse_cat_aligned = _OPS.sparse_cat_aligned

"""mlx_lattice: sparse 3D convolutional networks on MLX.

``SparseTensor`` is the value every op takes and returns; ``mlx_lattice.ops``
holds the functional ops of the Lattice contract, ``mlx_lattice.nn`` their
module wrappers and ``mlx_lattice.artifact`` the MLIR artifact runtime.

Exact float32: on MLX's CUDA backend (and Apple M5 GPUs) float32 matrix
products run in TF32 unless ``MLX_ENABLE_TF32=0``, which would break the
contract's ``accumulation = "canonical_f32"`` (errors of about 3e-4 relative
instead of f32 rounding).  Importing ``mlx_lattice`` therefore sets
``MLX_ENABLE_TF32=0`` when the variable is unset, before any MLX op runs; a
value the user set explicitly is left alone.  Import ``mlx_lattice`` before
running MLX ops of your own, or export the variable yourself.
"""

import os

os.environ.setdefault("MLX_ENABLE_TF32", "0")

from lattice_contract.artifact import distribution_version  # after the TF32 default above

from mlx_lattice import artifact, core, nn, ops
from mlx_lattice.ops import QuantizedWeight, quantize_weight
from mlx_lattice.sparse import SparseTensor, canonical_order, inverse_permutation

__all__ = [
    "QuantizedWeight",
    "SparseTensor",
    "__version__",
    "artifact",
    "canonical_order",
    "core",
    "inverse_permutation",
    "nn",
    "ops",
    "quantize_weight",
]

__version__ = distribution_version("mlx_lattice")

"""mlx_lattice: sparse 3D convolutional networks on MLX.

``SparseTensor`` is the value every op takes and returns; ``mlx_lattice.ops``
holds the functional ops of the Lattice contract, ``mlx_lattice.nn`` their
module wrappers and ``mlx_lattice.artifact`` the MLIR artifact runtime.
"""

from lattice_contract.version import distribution_version

from mlx_lattice import nn, ops
from mlx_lattice.sparse import SparseTensor, canonical_order, inverse_permutation

__all__ = [
    "SparseTensor",
    "__version__",
    "canonical_order",
    "inverse_permutation",
    "nn",
    "ops",
]

__version__ = distribution_version("mlx_lattice")

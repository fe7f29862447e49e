"""torch_lattice: sparse 3D convolutional networks on PyTorch, and the lattice exporter.

``SparseTensor`` and ``torch_lattice.ops`` mirror ``mlx_lattice`` name for name;
``torch_lattice.nn`` holds trainable modules whose state_dict keys are the
artifact's storage keys.  Nothing here imports MLX.
"""

from __future__ import annotations

from typing import Any

from lattice_contract.artifact import distribution_version

from torch_lattice import nn, ops
from torch_lattice._algebra import cat
from torch_lattice.coords import canonical_order, inverse_permutation
from torch_lattice.ops.quant import QuantizedWeight
from torch_lattice.sparse import SparseTensor

__all__ = [
    "QuantizedWeight",
    "SparseTensor",
    "__version__",
    "canonical_order",
    "cat",
    "inverse_permutation",
    "nn",
    "ops",
]

__version__ = distribution_version("torch_lattice")


def __getattr__(name: str) -> Any:
    # The exporter lives in its own module (and pulls in the contract builder);
    # load it only when asked for.
    if name == "save_lattice_model_artifact":
        from torch_lattice import export

        return export.save_lattice_model_artifact
    raise AttributeError(f"module 'torch_lattice' has no attribute {name!r}")

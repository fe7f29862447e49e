"""Module wrappers of :mod:`mlx_lattice.ops` in the style of ``mlx.nn``.

Parameter names match the torch_lattice modules and the artifact's storage
keys one to one, so a torch_lattice ``state_dict`` (as NumPy arrays) or an
artifact's ``weights.safetensors`` loads with
:meth:`~mlx_lattice.nn.LatticeModule.load_state_dict` unchanged.
"""

from mlx_lattice.nn.conv import (
    AvgPool3d,
    Conv3d,
    ConvTranspose3d,
    GenerativeConvTranspose3d,
    GlobalPool,
    MaxPool3d,
    SubmConv3d,
    SumPool3d,
    TargetConv3d,
    TargetConvTranspose3d,
)
from mlx_lattice.nn.feature import (
    ELU,
    GELU,
    Activation,
    BatchNorm,
    Hardswish,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    ReLU,
    RMSNorm,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from mlx_lattice.nn.module import LatticeModule, Sequential, WeightedModule, map_features
from mlx_lattice.nn.normalized import (
    NormalizedConvTranspose3d,
    NormalizedGenerativeConvTranspose3d,
    NormalizedSubmConv3d,
    TargetNormalizedConvTranspose3d,
)
from mlx_lattice.nn.points import (
    Devoxelize,
    SparseAdd,
    SparseBinary,
    SparseCat,
    SparseReindex,
    Voxelize,
)
from mlx_lattice.nn.upsample import Embedding, PoolTranspose3d, TrilinearUpsample3d

__all__ = [
    "ELU",
    "GELU",
    "Activation",
    "AvgPool3d",
    "BatchNorm",
    "Conv3d",
    "ConvTranspose3d",
    "Devoxelize",
    "Embedding",
    "GenerativeConvTranspose3d",
    "GlobalPool",
    "Hardswish",
    "Identity",
    "LatticeModule",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool3d",
    "NormalizedConvTranspose3d",
    "NormalizedGenerativeConvTranspose3d",
    "NormalizedSubmConv3d",
    "PoolTranspose3d",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "SparseAdd",
    "SparseBinary",
    "SparseCat",
    "SparseReindex",
    "SubmConv3d",
    "SumPool3d",
    "Tanh",
    "TargetConv3d",
    "TargetConvTranspose3d",
    "TargetNormalizedConvTranspose3d",
    "TrilinearUpsample3d",
    "Voxelize",
    "WeightedModule",
    "map_features",
]

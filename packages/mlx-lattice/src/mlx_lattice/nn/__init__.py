"""Module wrappers of :mod:`mlx_lattice.ops` in the style of ``mlx.nn``.

Parameter names match the torch_lattice modules and the artifact's storage
keys one to one, so a torch_lattice ``state_dict`` (as NumPy arrays) or an
artifact's ``weights.safetensors`` loads with
:meth:`~mlx_lattice.nn.LatticeModule.load_state_dict` unchanged.
"""

from lattice_contract.frontend import NN_NAMES

from mlx_lattice.nn.conv import Conv3d as Conv3d
from mlx_lattice.nn.conv import ConvTranspose3d as ConvTranspose3d
from mlx_lattice.nn.conv import FullConv3d as FullConv3d
from mlx_lattice.nn.conv import GenerativeConvTranspose3d as GenerativeConvTranspose3d
from mlx_lattice.nn.conv import NormalizedConvTranspose3d as NormalizedConvTranspose3d
from mlx_lattice.nn.conv import (
    NormalizedGenerativeConvTranspose3d as NormalizedGenerativeConvTranspose3d,
)
from mlx_lattice.nn.conv import NormalizedSubmConv3d as NormalizedSubmConv3d
from mlx_lattice.nn.conv import SubmConv3d as SubmConv3d
from mlx_lattice.nn.conv import TargetConv3d as TargetConv3d
from mlx_lattice.nn.conv import TargetConvTranspose3d as TargetConvTranspose3d
from mlx_lattice.nn.conv import (
    TargetNormalizedConvTranspose3d as TargetNormalizedConvTranspose3d,
)
from mlx_lattice.nn.dense import HeightCompression as HeightCompression
from mlx_lattice.nn.dense import ToDense as ToDense
from mlx_lattice.nn.feature import BatchNorm as BatchNorm
from mlx_lattice.nn.feature import Embedding as Embedding
from mlx_lattice.nn.feature import LayerNorm as LayerNorm
from mlx_lattice.nn.feature import Linear as Linear
from mlx_lattice.nn.feature import RMSNorm as RMSNorm
from mlx_lattice.nn.layers import ELU as ELU
from mlx_lattice.nn.layers import GELU as GELU
from mlx_lattice.nn.layers import Activation as Activation
from mlx_lattice.nn.layers import AvgPool3d as AvgPool3d
from mlx_lattice.nn.layers import Devoxelize as Devoxelize
from mlx_lattice.nn.layers import FullAvgPool3d as FullAvgPool3d
from mlx_lattice.nn.layers import FullMaxPool3d as FullMaxPool3d
from mlx_lattice.nn.layers import FullSumPool3d as FullSumPool3d
from mlx_lattice.nn.layers import GlobalPool as GlobalPool
from mlx_lattice.nn.layers import Hardswish as Hardswish
from mlx_lattice.nn.layers import Identity as Identity
from mlx_lattice.nn.layers import LeakyReLU as LeakyReLU
from mlx_lattice.nn.layers import MaxPool3d as MaxPool3d
from mlx_lattice.nn.layers import PoolTranspose3d as PoolTranspose3d
from mlx_lattice.nn.layers import ReLU as ReLU
from mlx_lattice.nn.layers import Sigmoid as Sigmoid
from mlx_lattice.nn.layers import SiLU as SiLU
from mlx_lattice.nn.layers import Softmax as Softmax
from mlx_lattice.nn.layers import Softplus as Softplus
from mlx_lattice.nn.layers import SparseAdd as SparseAdd
from mlx_lattice.nn.layers import SparseBinary as SparseBinary
from mlx_lattice.nn.layers import SparseCat as SparseCat
from mlx_lattice.nn.layers import SparseReindex as SparseReindex
from mlx_lattice.nn.layers import SumPool3d as SumPool3d
from mlx_lattice.nn.layers import Tanh as Tanh
from mlx_lattice.nn.layers import TrilinearUpsample3d as TrilinearUpsample3d
from mlx_lattice.nn.layers import Voxelize as Voxelize
from mlx_lattice.nn.module import LatticeModule as LatticeModule
from mlx_lattice.nn.module import Sequential as Sequential
from mlx_lattice.nn.module import WeightedModule as WeightedModule
from mlx_lattice.nn.module import map_features as map_features
from mlx_lattice.nn.quantized import QuantizedConv3d as QuantizedConv3d
from mlx_lattice.nn.quantized import QuantizedLinear as QuantizedLinear

# The names both runtimes share are listed once (lattice_contract.frontend.nn_names);
# these are MLX's own: its module bases, the feature-row helper and mlx-lattice 0.6's
# born-packed modules (Lattice's own spelling is ``layer.quantize(bits, group_size)``).
__all__ = [
    *NN_NAMES,
    "LatticeModule",
    "QuantizedConv3d",
    "QuantizedLinear",
    "WeightedModule",
    "map_features",
]

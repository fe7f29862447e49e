"""Trainable sparse modules (``docs/export.md``) whose state_dict keys are artifact storage keys."""

from __future__ import annotations

from lattice_contract.frontend import NN_NAMES

from torch_lattice.nn.conv import Conv3d as Conv3d
from torch_lattice.nn.conv import ConvTranspose3d as ConvTranspose3d
from torch_lattice.nn.conv import FullConv3d as FullConv3d
from torch_lattice.nn.conv import GenerativeConvTranspose3d as GenerativeConvTranspose3d
from torch_lattice.nn.conv import NormalizedConvTranspose3d as NormalizedConvTranspose3d
from torch_lattice.nn.conv import (
    NormalizedGenerativeConvTranspose3d as NormalizedGenerativeConvTranspose3d,
)
from torch_lattice.nn.conv import NormalizedSubmConv3d as NormalizedSubmConv3d
from torch_lattice.nn.conv import SubmConv3d as SubmConv3d
from torch_lattice.nn.conv import TargetConv3d as TargetConv3d
from torch_lattice.nn.conv import TargetConvTranspose3d as TargetConvTranspose3d
from torch_lattice.nn.conv import (
    TargetNormalizedConvTranspose3d as TargetNormalizedConvTranspose3d,
)
from torch_lattice.nn.dense import HeightCompression as HeightCompression
from torch_lattice.nn.dense import ToDense as ToDense
from torch_lattice.nn.feature import BatchNorm as BatchNorm
from torch_lattice.nn.feature import Dropout as Dropout
from torch_lattice.nn.feature import Embedding as Embedding
from torch_lattice.nn.feature import LayerNorm as LayerNorm
from torch_lattice.nn.feature import Linear as Linear
from torch_lattice.nn.feature import RMSNorm as RMSNorm
from torch_lattice.nn.feature import Sequential as Sequential
from torch_lattice.nn.layers import ELU as ELU
from torch_lattice.nn.layers import GELU as GELU
from torch_lattice.nn.layers import Activation as Activation
from torch_lattice.nn.layers import AvgPool3d as AvgPool3d
from torch_lattice.nn.layers import Devoxelize as Devoxelize
from torch_lattice.nn.layers import FullAvgPool3d as FullAvgPool3d
from torch_lattice.nn.layers import FullMaxPool3d as FullMaxPool3d
from torch_lattice.nn.layers import FullSumPool3d as FullSumPool3d
from torch_lattice.nn.layers import GlobalPool as GlobalPool
from torch_lattice.nn.layers import Hardswish as Hardswish
from torch_lattice.nn.layers import Identity as Identity
from torch_lattice.nn.layers import LeakyReLU as LeakyReLU
from torch_lattice.nn.layers import MaxPool3d as MaxPool3d
from torch_lattice.nn.layers import PoolTranspose3d as PoolTranspose3d
from torch_lattice.nn.layers import ReLU as ReLU
from torch_lattice.nn.layers import Sigmoid as Sigmoid
from torch_lattice.nn.layers import SiLU as SiLU
from torch_lattice.nn.layers import Softmax as Softmax
from torch_lattice.nn.layers import Softplus as Softplus
from torch_lattice.nn.layers import SparseAdd as SparseAdd
from torch_lattice.nn.layers import SparseBinary as SparseBinary
from torch_lattice.nn.layers import SparseCat as SparseCat
from torch_lattice.nn.layers import SparseReindex as SparseReindex
from torch_lattice.nn.layers import SumPool3d as SumPool3d
from torch_lattice.nn.layers import Tanh as Tanh
from torch_lattice.nn.layers import TrilinearUpsample3d as TrilinearUpsample3d
from torch_lattice.nn.layers import Voxelize as Voxelize
from torch_lattice.nn.sync_batchnorm import SyncBatchNorm as SyncBatchNorm

# The names both runtimes share are listed once (lattice_contract.frontend.nn_names);
# these two are torch's own (training-only modules).
__all__ = [*NN_NAMES, "Dropout", "SyncBatchNorm"]

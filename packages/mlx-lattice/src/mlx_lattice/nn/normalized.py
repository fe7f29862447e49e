# The normalised convs' former module, kept so that imports of this path and
# pickles of whole models that name it keep working.  The classes are bound,
# with the plain convs whose constructor and parameters they share, in
# mlx_lattice.nn.conv (declared once in lattice_contract.frontend.nn_convs).
from mlx_lattice.nn.conv import NormalizedConvTranspose3d as NormalizedConvTranspose3d
from mlx_lattice.nn.conv import (
    NormalizedGenerativeConvTranspose3d as NormalizedGenerativeConvTranspose3d,
)
from mlx_lattice.nn.conv import NormalizedSubmConv3d as NormalizedSubmConv3d
from mlx_lattice.nn.conv import (
    TargetNormalizedConvTranspose3d as TargetNormalizedConvTranspose3d,
)

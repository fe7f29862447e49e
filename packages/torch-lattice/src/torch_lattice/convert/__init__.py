"""One-time conversion of TorchSparse, spconv and MinkowskiEngine checkpoints.

Each sparse-convolution library stores a kernel in its own layout and
enumerates the kernel taps in its own order, so the same trained weights mean
different things to each of them.  This package converts the kernels of an
existing state dict once, explicitly, into Lattice's single layout
``conv3d_o_xyz_i`` (``(C_out, Kx, Ky, Kz, C_in)``, taps z fastest), guided by
a kernel spec that declares each kernel key's framework, version and layout,
so that nothing has to guess a historical convention at load time.

* :mod:`.spec` -- the ``--kernel-spec`` file;
* :mod:`.layouts` -- every framework's layout and tap order;
* :mod:`.checkpoint` -- whole state dicts, files, the manifest and the CLI.

``docs/convert-checkpoint.md`` lists, per framework, version and layer kind,
which ``torch_lattice.nn`` module (and padding) reproduces the layer.
"""

from .checkpoint import (
    MANIFEST_FORMAT,
    ConversionResult,
    convert_checkpoint,
    convert_state_dict,
    default_manifest_path,
    load_state_dict,
    main,
)
from .layouts import canonical_row_permutation, convert_kernel
from .spec import (
    FRAMEWORKS,
    LEGACY_FRAMEWORKS,
    SPCONV_LAYOUTS,
    VERSIONS,
    ConversionError,
    KernelDeclaration,
    KernelSpec,
)

__all__ = [
    "FRAMEWORKS",
    "LEGACY_FRAMEWORKS",
    "MANIFEST_FORMAT",
    "SPCONV_LAYOUTS",
    "VERSIONS",
    "ConversionError",
    "ConversionResult",
    "KernelDeclaration",
    "KernelSpec",
    "canonical_row_permutation",
    "convert_checkpoint",
    "convert_kernel",
    "convert_state_dict",
    "default_manifest_path",
    "load_state_dict",
    "main",
]

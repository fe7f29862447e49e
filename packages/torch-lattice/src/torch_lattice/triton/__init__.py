"""torch_lattice on CUDA: Triton implicit-GEMM convolutions over device-built kernel maps.

``torch_lattice.ops`` dispatches here on CUDA (and wherever
``torch_lattice.ops.schedule("triton")`` forces it, which is how the tests
run these kernels under ``TRITON_INTERPRET=1`` on CPU).  The plain-torch path
in ``torch_lattice.ops.conv`` stays the CPU path and the reference these
kernels are tested against.  See ``docs/performance.md``.
"""

from __future__ import annotations

from torch_lattice.triton.capture import CapturedForward, capture_forward
from torch_lattice.triton.capture_training import CapturedTrainingStep, capture_training_step
from torch_lattice.triton.conv import SUPPORTED_DTYPES, sparse_conv
from torch_lattice.triton.fuse import FusedSequential, fuse_conv_bn_relu
from torch_lattice.triton.kernels import (
    F32_PRODUCTS,
    f32_products,
    interpreting,
    set_f32_products,
    set_tf32,
    tf32_enabled,
)
from torch_lattice.triton.maps import SlotMap, build

__all__ = [
    "F32_PRODUCTS",
    "SUPPORTED_DTYPES",
    "CapturedForward",
    "CapturedTrainingStep",
    "FusedSequential",
    "SlotMap",
    "build",
    "capture_forward",
    "capture_training_step",
    "f32_products",
    "fuse_conv_bn_relu",
    "interpreting",
    "set_f32_products",
    "set_tf32",
    "sparse_conv",
    "tf32_enabled",
]

"""mlx_lattice's own kernels for MLX's CUDA backend (``mx.fast.cuda_kernel``).

When the default device is the GPU of a CUDA build of MLX, the sparse
convolutions of :mod:`mlx_lattice.ops.conv` (every kind, dense weights) and
the local pools of :mod:`mlx_lattice.ops.pool` run here: kernel maps built on
the device by hashing, fused gather-GEMM kernels summing in f32
(:mod:`mlx_lattice.cuda.convolve`) and pooling kernels over the same maps
(:mod:`mlx_lattice.cuda.pool`).  CPU and Metal keep the generic path, which
is also the reference the kernels are tested against.  ``LATTICE_MLX_CUDA=0``
in the environment, or :func:`set_enabled`, turns the route off (the generic
path then runs on the CUDA GPU with MLX's own ops).
"""

from __future__ import annotations

import os

import mlx.core as mx

__all__ = ["available", "enabled", "routes", "set_enabled"]

_STATE = {"enabled": os.environ.get("LATTICE_MLX_CUDA", "1") != "0"}


def available() -> bool:
    """Whether this MLX build has a usable CUDA backend."""
    cuda = getattr(mx, "cuda", None)
    return bool(cuda is not None and cuda.is_available())


def enabled() -> bool:
    """Whether the CUDA route is switched on (it is by default)."""
    return _STATE["enabled"]


def set_enabled(flag: bool) -> bool:
    """Switch the CUDA route on or off; returns the previous setting."""
    previous = _STATE["enabled"]
    _STATE["enabled"] = bool(flag)
    return previous


def routes(weight: object) -> bool:
    """Whether a conv with this weight runs on the CUDA kernels.

    True when the route is on and the default device is a CUDA GPU.  Packed
    (int4/int8) weights are dequantized to f32 there (the values the generic
    path's quantized matmul multiplies with): MLX's CUDA quantized matmul has
    no kernel for many of the shapes sparse convs produce.
    """
    return _STATE["enabled"] and mx.default_device() == mx.gpu and available()


from mlx_lattice.cuda.convolve import convolve, normalized  # noqa: E402  (needs routes' module state first)
from mlx_lattice.cuda.pool import pool  # noqa: E402

__all__ += ["convolve", "normalized", "pool"]

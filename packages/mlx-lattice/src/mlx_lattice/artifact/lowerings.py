"""MLX lowerings of every lattice op: the contract's standard table bound to MLX.

The lowerings themselves are written once, in
:mod:`lattice_contract.runtime.standard_lowerings`, over the
:class:`~lattice_contract.runtime.ops.RuntimeOps` that ``mlx_lattice.ops``
satisfies; :data:`MLX_LOWERINGS` is that table bound to
:data:`~mlx_lattice.artifact.backend.MLX_BACKEND`, with the ``argmax`` and
``gather_rows`` primitives.
"""

from __future__ import annotations

from lattice_contract.runtime import standard_lowerings

from mlx_lattice.artifact.backend import MLX_BACKEND

__all__ = ["MLX_LOWERINGS", "artifact_lowering"]

MLX_LOWERINGS = standard_lowerings(MLX_BACKEND)
"""Every lattice op's MLX lowering and every primitive's MLX implementation."""

artifact_lowering = MLX_LOWERINGS.artifact_lowering
"""Decorator registering an MLX lowering (see ``LoweringRegistry.artifact_lowering``)."""

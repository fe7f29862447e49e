"""Sparse convolution modules over :mod:`mlx_lattice.ops`.

Each conv module owns ``weight`` ``(C_out, Kx, Ky, Kz, C_in)`` (layout
``conv3d_o_xyz_i``, the same for transposed convs) and an optional ``bias``
``(C_out,)``.  ``quantize()`` (from
:class:`~mlx_lattice.nn.module.WeightedModule`) swaps the dense weight for MLX's
packed affine form, stored as ``weight`` (uint32), ``scales`` and ``biases`` -- the
three safetensors entries of a packed artifact weight -- and the forward pass
then runs the quantized matmul tap by tap.  The weight-normalised convs
(``Normalized*``) refuse ``quantize()``: their normaliser needs the dense
weight, and the contract forbids packed weights on their ops.

What a module stores, its constructor, docstring, repr and op call are
declared once for both runtimes in :mod:`lattice_contract.frontend.nn_convs` and
:mod:`lattice_contract.frontend.nn_layers`; this file creates the MLX parameters.
MLX takes no factory keywords (``device=``, ``dtype=``): its arrays live in
unified memory, and a model changes dtype with ``set_dtype``.
"""

from __future__ import annotations

from typing import Never

import mlx.core as mx
from lattice_contract.frontend import ConvParams, nn_convs

from mlx_lattice.nn.module import WeightedModule

NoFactory = nn_convs.ParameterFactory[Never, Never]
"""MLX's factory keywords: none (mypy refuses ``device=`` and ``dtype=`` here)."""


class _Conv(nn_convs.ConvLayer[Never, Never], WeightedModule):
    """MLX parameters of every sparse conv: weight and optional bias, torch's default init."""

    def _create_parameters(self, params: ConvParams, bias: bool, factory: NoFactory) -> None:
        if factory:
            raise TypeError(
                f"{type(self).__name__} takes no {', '.join(f'{k}=' for k in factory)}: MLX "
                "arrays live in unified memory; change a model's dtype with set_dtype()"
            )
        bound = params.init_bound  # torch's default conv init: uniform in +-1/sqrt(fan_in)
        self.weight = mx.random.uniform(-bound, bound, params.weight_shape)
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (params.out_channels,))


class Conv3d(nn_convs.Conv3d[Never, Never], _Conv): ...


class FullConv3d(nn_convs.FullConv3d[Never, Never], _Conv): ...


class TargetConv3d(nn_convs.TargetConv3d[Never, Never], _Conv): ...


class ConvTranspose3d(nn_convs.ConvTranspose3d[Never, Never], _Conv): ...


class TargetConvTranspose3d(nn_convs.TargetConvTranspose3d[Never, Never], _Conv): ...


class SubmConv3d(nn_convs.SubmConv3d[Never, Never], _Conv): ...


class GenerativeConvTranspose3d(nn_convs.GenerativeConvTranspose3d[Never, Never], _Conv): ...


# --------------------------------------------------------------------------- normalised


class _Normalized(nn_convs.NormalizedLayer[Never, Never], _Conv):
    """An MLX conv module whose weight must stay dense."""

    def quantize(
        self, bits: int = 4, group_size: int = 32, scale_dtype: mx.Dtype | None = None
    ) -> None:
        """Refused: normalised convolutions need their dense weight."""
        raise TypeError(
            f"{type(self).__name__} cannot be quantized: its normaliser needs the dense "
            "weight (packed weights are not allowed on normalised convolutions)"
        )


class NormalizedSubmConv3d(nn_convs.NormalizedSubmConv3d[Never, Never], _Normalized): ...


class NormalizedConvTranspose3d(nn_convs.NormalizedConvTranspose3d[Never, Never], _Normalized): ...


class TargetNormalizedConvTranspose3d(
    nn_convs.TargetNormalizedConvTranspose3d[Never, Never], NormalizedConvTranspose3d
): ...


class NormalizedGenerativeConvTranspose3d(
    nn_convs.NormalizedGenerativeConvTranspose3d[Never, Never], _Normalized
): ...

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

What a module stores, its constructor, docstring and repr are declared once
for both runtimes in :mod:`lattice_contract.frontend.nn_convs`; this file
creates the MLX parameters and writes each module's ``__call__``: one call
of its :mod:`mlx_lattice.ops` function with the weight as the op takes it
(packed or dense).
MLX takes no factory keywords (``device=``, ``dtype=``): its arrays live in
unified memory, and a model changes dtype with ``set_dtype``.
"""

from __future__ import annotations

from typing import Never

import mlx.core as mx
from lattice_contract.frontend import ConvParams, nn_convs

from mlx_lattice import ops
from mlx_lattice.nn.module import WeightedModule
from mlx_lattice.sparse import SparseTensor

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


class Conv3d(nn_convs.Conv3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Convolve the sparse value ``x``."""
        return ops.conv3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )


class FullConv3d(nn_convs.FullConv3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Convolve the sparse value ``x`` over its expanded support."""
        return ops.full_conv3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )


class TargetConv3d(nn_convs.TargetConv3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        """Convolve ``x`` at ``target``'s rows (a target only lends its rows)."""
        return ops.conv3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            coordinates=target,
        )


class ConvTranspose3d(nn_convs.ConvTranspose3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Transposed convolution of ``x`` (output stride ``t / s``)."""
        return ops.conv_transpose3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )


class TargetConvTranspose3d(nn_convs.TargetConvTranspose3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        """Transposed convolution of ``x`` at ``target``'s rows."""
        return ops.conv_transpose3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            coordinates=target,
        )


class SubmConv3d(nn_convs.SubmConv3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Convolve ``x`` on its own rows."""
        return ops.subm_conv3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            dilation=self.dilation,
        )


class GenerativeConvTranspose3d(nn_convs.GenerativeConvTranspose3d[Never, Never], _Conv):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Expand ``x``'s support tap by tap."""
        return ops.generative_conv_transpose3d(
            x,
            self.weight_operand(),
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
        )


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


class NormalizedSubmConv3d(nn_convs.NormalizedSubmConv3d[Never, Never], _Normalized):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Normalised convolution of ``x`` on its own rows."""
        return ops.normalized_subm_conv3d(
            x,
            self.weight,
            self.bias_operand(),
            kernel_size=self.kernel_size,
            dilation=self.dilation,
            eps=self.eps,
        )


class NormalizedConvTranspose3d(nn_convs.NormalizedConvTranspose3d[Never, Never], _Normalized):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Normalised transposed convolution of ``x``."""
        return ops.normalized_conv_transpose3d(
            x,
            self.weight,
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            eps=self.eps,
        )


class TargetNormalizedConvTranspose3d(
    nn_convs.TargetNormalizedConvTranspose3d[Never, Never], NormalizedConvTranspose3d
):
    def __call__(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:  # type: ignore[override]
        """Normalised transposed convolution of ``x`` at ``target``'s rows."""
        return ops.normalized_conv_transpose3d(
            x,
            self.weight,
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            eps=self.eps,
            coordinates=target,
        )


class NormalizedGenerativeConvTranspose3d(
    nn_convs.NormalizedGenerativeConvTranspose3d[Never, Never], _Normalized
):
    def __call__(self, x: SparseTensor) -> SparseTensor:
        """Normalised support expansion of ``x``."""
        return ops.normalized_generative_conv_transpose3d(
            x,
            self.weight,
            self.bias_operand(),
            kernel_size=self.kernel_size,
            stride=self.stride,
            eps=self.eps,
        )

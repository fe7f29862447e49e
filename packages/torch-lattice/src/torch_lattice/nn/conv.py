"""Convolution modules: parameters ``weight`` (C_out, Kx, Ky, Kz, C_in) and optional ``bias``.

The parameter names are the artifact's storage keys (``<module path>.weight``,
``<module path>.bias``), so a state_dict maps one-to-one onto
``weights.safetensors`` and onto the ``mlx_lattice.nn`` mirror.  What a
module stores, its constructor, docstring and repr are declared once for
both runtimes in :mod:`lattice_contract.frontend.nn_convs`; this file creates
the torch parameters, on the ``device`` and in the ``dtype`` the
constructor's factory keywords name (as ``torch.nn.Conv3d``'s), and each
module's ``forward``: one call of its :mod:`torch_lattice.ops` function, in
the autocast dtype under ``torch.autocast`` (:mod:`torch_lattice.nn._amp`).

The weight-normalised convs (``Normalized*``, the reference system's layers)
have the same parameters and ``eps``, the normaliser's floor (default 1e-8,
upstream's): each output row is divided by the root of the squared weight
mass its own support reaches (see :mod:`torch_lattice.ops.normalized`).  They
cannot be exported with packed weights: the normaliser needs the dense values.
"""

from __future__ import annotations

import torch
from lattice_contract.frontend import ConvParams, nn_convs

from torch_lattice import ops
from torch_lattice.nn._amp import autocast_operands
from torch_lattice.nn.base import Weighted
from torch_lattice.sparse import SparseTensor

Device = torch.device | str | int | None
"""What ``device=`` takes (torch's own device spellings)."""

DType = torch.dtype | None
"""What ``dtype=`` takes."""

Factory = nn_convs.ParameterFactory[Device, DType]
"""torch's factory keywords, ``device=`` and ``dtype=``."""


class _ConvBase(nn_convs.ConvLayer[Device, DType], Weighted):
    """Torch parameters of every sparse conv: torch's kaiming-uniform default init."""

    def _create_parameters(self, params: ConvParams, bias: bool, factory: Factory) -> None:
        self._init_bound = params.init_bound
        self.weight = torch.nn.Parameter(torch.empty(params.weight_shape, **factory))
        self.bias: torch.nn.Parameter | None
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(params.out_channels, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ``±1/sqrt(fan_in)`` with fan_in = C_in * kernel volume (torch's default)."""
        bound = self._init_bound
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)


class Conv3d(nn_convs.Conv3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Convolve the sparse value ``x``."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.conv3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
            )


class FullConv3d(nn_convs.FullConv3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Convolve the sparse value ``x`` over its expanded support."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.full_conv3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
            )


class TargetConv3d(nn_convs.TargetConv3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        """Convolve ``x`` at ``target``'s rows (a target only lends its rows)."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.conv3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
                coordinates=target,
            )


class ConvTranspose3d(nn_convs.ConvTranspose3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Transposed convolution of ``x`` (output stride ``t / s``)."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.conv_transpose3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
            )


class TargetConvTranspose3d(nn_convs.TargetConvTranspose3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:
        """Transposed convolution of ``x`` at ``target``'s rows."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.conv_transpose3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
                coordinates=target,
            )


class SubmConv3d(nn_convs.SubmConv3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Convolve ``x`` on its own rows."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.subm_conv3d(
                x, weight, bias, kernel_size=self.kernel_size, dilation=self.dilation
            )


class GenerativeConvTranspose3d(nn_convs.GenerativeConvTranspose3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Expand ``x``'s support tap by tap."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.generative_conv_transpose3d(
                x, weight, bias, kernel_size=self.kernel_size, stride=self.stride
            )


# --------------------------------------------------------------------------- normalised


class NormalizedSubmConv3d(nn_convs.NormalizedSubmConv3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Normalised convolution of ``x`` on its own rows."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.normalized_subm_conv3d(
                x, weight, bias, kernel_size=self.kernel_size, dilation=self.dilation, eps=self.eps
            )


class NormalizedConvTranspose3d(nn_convs.NormalizedConvTranspose3d[Device, DType], _ConvBase):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Normalised transposed convolution of ``x``."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.normalized_conv_transpose3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
                eps=self.eps,
            )


class TargetNormalizedConvTranspose3d(
    nn_convs.TargetNormalizedConvTranspose3d[Device, DType], NormalizedConvTranspose3d
):
    def forward(self, x: SparseTensor, target: SparseTensor) -> SparseTensor:  # type: ignore[override]
        """Normalised transposed convolution of ``x`` at ``target``'s rows."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.normalized_conv_transpose3d(
                x,
                weight,
                bias,
                kernel_size=self.kernel_size,
                stride=self.stride,
                padding=self.padding,
                dilation=self.dilation,
                eps=self.eps,
                coordinates=target,
            )


class NormalizedGenerativeConvTranspose3d(
    nn_convs.NormalizedGenerativeConvTranspose3d[Device, DType], _ConvBase
):
    def forward(self, x: SparseTensor) -> SparseTensor:
        """Normalised support expansion of ``x``."""
        with autocast_operands(x, self.weight, self.bias) as (x, weight, bias):
            return ops.normalized_generative_conv_transpose3d(
                x, weight, bias, kernel_size=self.kernel_size, stride=self.stride, eps=self.eps
            )

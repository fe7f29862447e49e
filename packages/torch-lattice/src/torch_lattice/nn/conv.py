"""Convolution modules: parameters ``weight`` (C_out, Kx, Ky, Kz, C_in) and optional ``bias``.

The parameter names are the artifact's storage keys (``<module path>.weight``,
``<module path>.bias``), so a state_dict maps one-to-one onto
``weights.safetensors`` and onto the ``mlx_lattice.nn`` mirror.  What a
module stores, its constructor, docstring, repr and op call are declared
once for both runtimes in :mod:`lattice_contract.frontend.nn_convs`; this file
creates the torch parameters, on the ``device`` and in the ``dtype`` the
constructor's factory keywords name (as ``torch.nn.Conv3d``'s).

The weight-normalised convs (``Normalized*``, the reference system's layers)
have the same parameters and ``eps``, the normaliser's floor (default 1e-8,
upstream's): each output row is divided by the root of the squared weight
mass its own support reaches (see :mod:`torch_lattice.ops.normalized`).  They
cannot be exported with packed weights: the normaliser needs the dense values.
"""

from __future__ import annotations

import torch
from lattice_contract.frontend import ConvParams, nn_convs

from torch_lattice.nn.base import Weighted

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


class Conv3d(nn_convs.Conv3d[Device, DType], _ConvBase): ...


class FullConv3d(nn_convs.FullConv3d[Device, DType], _ConvBase): ...


class TargetConv3d(nn_convs.TargetConv3d[Device, DType], _ConvBase): ...


class ConvTranspose3d(nn_convs.ConvTranspose3d[Device, DType], _ConvBase): ...


class TargetConvTranspose3d(nn_convs.TargetConvTranspose3d[Device, DType], _ConvBase): ...


class SubmConv3d(nn_convs.SubmConv3d[Device, DType], _ConvBase): ...


class GenerativeConvTranspose3d(nn_convs.GenerativeConvTranspose3d[Device, DType], _ConvBase): ...


# --------------------------------------------------------------------------- normalised


class NormalizedSubmConv3d(nn_convs.NormalizedSubmConv3d[Device, DType], _ConvBase): ...


class NormalizedConvTranspose3d(nn_convs.NormalizedConvTranspose3d[Device, DType], _ConvBase): ...


class TargetNormalizedConvTranspose3d(
    nn_convs.TargetNormalizedConvTranspose3d[Device, DType], NormalizedConvTranspose3d
): ...


class NormalizedGenerativeConvTranspose3d(
    nn_convs.NormalizedGenerativeConvTranspose3d[Device, DType], _ConvBase
): ...

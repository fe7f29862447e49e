"""Convolution modules: parameters ``weight`` (C_out, Kx, Ky, Kz, C_in) and optional ``bias``.

The parameter names are the artifact's storage keys (``<module path>.weight``,
``<module path>.bias``), so a state_dict maps one-to-one onto
``weights.safetensors`` and onto the ``mlx_lattice.nn`` mirror.  What a
module stores, its docstring, repr and op call are declared once for both
runtimes in :mod:`lattice_contract.nn_convs`; this file creates the torch
parameters.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract import nn_convs
from lattice_contract.shared_nn import conv_params

from torch_lattice.nn.base import Weighted

Triple = tuple[int, int, int]


class _ConvBase(nn_convs.ConvLayer, Weighted):
    """Torch parameters of every sparse conv: torch's kaiming-uniform default init.

    ``kernel_size, stride, padding, dilation`` are positional in that order, as
    in ``torch.nn.Conv3d`` (``Conv3d(4, 8, 2, 2)`` is a 2x2x2 stride-2 conv), so
    code written for torch, spconv or TorchSparse reads the same here.
    ``SubmConv3d`` keeps ``dilation`` keyword-only: it has no stride or
    padding, and a fourth positional argument there would mean stride to a
    torch reader.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        stride: int | Triple = 1,
        padding: int | Triple = 0,
        dilation: int | Triple = 1,
        *,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        params = conv_params(in_channels, out_channels, kernel_size, stride, padding, dilation)
        self._configure(params)
        self._init_bound = params.init_bound
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(
            torch.empty(out_channels, *self.kernel_size, in_channels, **factory)
        )
        self.bias: torch.nn.Parameter | None
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_channels, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Uniform in ``±1/sqrt(fan_in)`` with fan_in = C_in * kernel volume (torch's default)."""
        bound = self._init_bound
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)


class Conv3d(nn_convs.Conv3d, _ConvBase): ...


class FullConv3d(nn_convs.FullConv3d, _ConvBase): ...


class TargetConv3d(nn_convs.TargetConv3d, _ConvBase): ...


class ConvTranspose3d(nn_convs.ConvTranspose3d, _ConvBase): ...


class TargetConvTranspose3d(nn_convs.TargetConvTranspose3d, _ConvBase): ...


class SubmConv3d(nn_convs.SubmConv3d, _ConvBase):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        dilation: int | Triple = 1,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            dilation=dilation,
            bias=bias,
            device=device,
            dtype=dtype,
        )


class GenerativeConvTranspose3d(nn_convs.GenerativeConvTranspose3d, _ConvBase):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        stride: int | Triple = 1,
        *,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            bias=bias,
            device=device,
            dtype=dtype,
        )

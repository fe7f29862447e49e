"""Sparse convolution modules over :mod:`mlx_lattice.ops`.

Each conv module owns ``weight`` ``(C_out, Kx, Ky, Kz, C_in)`` (layout
``conv3d_o_xyz_i``, the same for transposed convs) and an optional ``bias``
``(C_out,)``.  ``quantize()`` (from
:class:`~mlx_lattice.nn.module.WeightedModule`) swaps the dense weight for MLX's
packed affine form, stored as ``weight`` (uint32), ``scales`` and ``biases`` -- the
three safetensors entries of a packed artifact weight -- and the forward pass
then runs the quantized matmul tap by tap.

What a module stores, its docstring, repr and op call are declared once for
both runtimes in :mod:`lattice_contract.nn_convs` and
:mod:`lattice_contract.nn_layers`; this file creates the MLX parameters.
"""

from __future__ import annotations

import mlx.core as mx
from lattice_contract import nn_convs
from lattice_contract.shared_nn import conv_params

from mlx_lattice.nn.module import WeightedModule
from mlx_lattice.ops.conv import IntOrTriple


class _Conv(nn_convs.ConvLayer, WeightedModule):
    """MLX parameters of every sparse conv: weight and optional bias, torch's default init."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
        bias: bool = True,
    ) -> None:
        super().__init__()
        params = conv_params(in_channels, out_channels, kernel_size, stride, padding, dilation)
        self._configure(params)
        c_in, c_out, bound = params.in_channels, params.out_channels, params.init_bound
        # torch's default conv init: uniform in +-1/sqrt(fan_in).
        self.weight = mx.random.uniform(-bound, bound, (c_out, *self.kernel_size, c_in))
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (c_out,))


class Conv3d(nn_convs.Conv3d, _Conv): ...


class FullConv3d(nn_convs.FullConv3d, _Conv): ...


class TargetConv3d(nn_convs.TargetConv3d, _Conv): ...


class ConvTranspose3d(nn_convs.ConvTranspose3d, _Conv): ...


class TargetConvTranspose3d(nn_convs.TargetConvTranspose3d, _Conv): ...


class SubmConv3d(nn_convs.SubmConv3d, _Conv):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        dilation: IntOrTriple = 1,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation, bias=bias)


class GenerativeConvTranspose3d(nn_convs.GenerativeConvTranspose3d, _Conv):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        bias: bool = True,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, bias=bias)

"""Weight-normalised sparse convolution modules (the reference system's ``Normalized*`` layers).

Parameters are those of the plain conv modules (``weight`` (C_out, Kx, Ky,
Kz, C_in), optional ``bias``), so state_dict keys are artifact storage keys;
``eps`` is the normaliser's floor (default 1e-8, upstream's).  Each output
row is divided by the root of the squared weight mass its own support reaches
(see :mod:`torch_lattice.ops.normalized`); a 1x1x1 ``NormalizedSubmConv3d``
is an ordinary pointwise conv, as upstream.  These layers cannot be exported
with packed weights: the normaliser needs the dense values.
"""

from __future__ import annotations

from typing import Any

import torch
from lattice_contract import nn_convs
from lattice_contract.op_rules import NORMALIZED_EPS

from torch_lattice.nn.conv import _ConvBase

Triple = tuple[int, int, int]


class _Normalized(nn_convs.NormalizedLayer, _ConvBase):
    """A torch conv module with an ``eps`` for its support-dependent weight normaliser."""


class NormalizedSubmConv3d(nn_convs.NormalizedSubmConv3d, _Normalized):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        dilation: int | Triple = 1,
        eps: float = NORMALIZED_EPS,
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
        self._set_eps(eps)


class NormalizedConvTranspose3d(nn_convs.NormalizedConvTranspose3d, _Normalized):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        stride: int | Triple = 1,
        padding: int | Triple = 0,
        dilation: int | Triple = 1,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self._set_eps(eps)


class TargetNormalizedConvTranspose3d(
    nn_convs.TargetNormalizedConvTranspose3d, NormalizedConvTranspose3d
): ...


class NormalizedGenerativeConvTranspose3d(
    nn_convs.NormalizedGenerativeConvTranspose3d, _Normalized
):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Triple,
        *,
        stride: int | Triple = 1,
        eps: float = NORMALIZED_EPS,
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
        self._set_eps(eps)

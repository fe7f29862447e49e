"""The backend-neutral half of both runtimes' convolution modules, declared once.

Every sparse conv module owns ``weight`` ``(C_out, Kx, Ky, Kz, C_in)`` (layout
``conv3d_o_xyz_i``, transposed convs too) and an optional ``bias``
``(C_out,)``; the names are the artifact's storage keys.  What the modules
share is declared here (see :mod:`lattice_contract.nn_layers` for the
pattern): the checked channel counts and geometry, the repr, the docstring
and the functional op each one calls with its keywords.  A runtime's conv
base creates and initialises the parameters (its constructor signature
follows its library's conventions, e.g. torch's ``device=``/``dtype=``) and
provides ``_with_weights``: how the weight and bias reach the op (MLX: a
packed ``QuantizedWeight`` when quantized; torch: cast under autocast).
"""

from __future__ import annotations

from typing import Any, ClassVar

from lattice_contract.nn_layers import Weighted, Windowed
from lattice_contract.options import positive_float
from lattice_contract.shared_nn import ConvParams, conv_repr

__all__ = [
    "Conv3d",
    "ConvLayer",
    "ConvTranspose3d",
    "FullConv3d",
    "GenerativeConvTranspose3d",
    "NormalizedConvTranspose3d",
    "NormalizedGenerativeConvTranspose3d",
    "NormalizedLayer",
    "NormalizedSubmConv3d",
    "SubmConv3d",
    "TargetConv3d",
    "TargetConvTranspose3d",
    "TargetNormalizedConvTranspose3d",
]


class ConvLayer(Windowed, Weighted):
    """Shared state of every sparse conv: channel counts, geometry, the runtime's weight hook."""

    _geometry_keys: ClassVar[tuple[str, ...]] = ("kernel_size", "stride", "padding", "dilation")
    """The geometry attributes the functional op takes (and the repr shows)."""

    in_channels: int
    out_channels: int

    def _configure(self, params: ConvParams) -> None:
        """Store the checked channel counts and geometry (see :func:`conv_params`)."""
        self.in_channels, self.out_channels = params.in_channels, params.out_channels
        self.kernel_size, self.stride, self.padding, self.dilation = params[2:6]

    def extra_repr(self) -> str:
        geometry = {name: getattr(self, name) for name in self._geometry_keys}
        return conv_repr(self.in_channels, self.out_channels, geometry, self._has_bias())


class Conv3d(ConvLayer):
    """Sparse conv on the coarsened support (``lattice.conv3d``; upstream's and ME's conv).

    Output rows are every ``floor(c / s)`` of an input row (at stride 1 the
    input rows); odd kernels are centred on the output; the output stride is
    ``t * s``.  For spconv's SparseConv3d, whose support grows, use
    :class:`FullConv3d`.
    """

    def forward(self, x: Any) -> Any:
        """Convolve the sparse value ``x``."""
        return self._with_weights(x, lambda v, w, b: self._ops.conv3d(v, w, b, **self._window()))


class FullConv3d(ConvLayer):
    """spconv's regular sparse conv (``lattice.full_conv3d``): every o an input reaches.

    Input c reaches o through tap k when ``c = o*s - p + k*d``; the support
    grows even at stride 1.
    """

    def forward(self, x: Any) -> Any:
        """Convolve the sparse value ``x`` over its expanded support."""
        return self._with_weights(
            x, lambda v, w, b: self._ops.full_conv3d(v, w, b, **self._window())
        )


class TargetConv3d(ConvLayer):
    """Sparse conv at a target's rows (``lattice.target_conv3d``); call ``m(x, target)``."""

    def forward(self, x: Any, target: Any) -> Any:
        """Convolve ``x`` at ``target``'s rows (a target only lends its rows)."""
        return self._with_weights(
            x, lambda v, w, b: self._ops.conv3d(v, w, b, **self._window(), coordinates=target)
        )


class SubmConv3d(ConvLayer):
    """Submanifold conv (``lattice.subm_conv3d``): output rows are the input rows."""

    _geometry_keys = ("kernel_size", "dilation")

    def forward(self, x: Any) -> Any:
        """Convolve ``x`` on its own rows."""
        return self._with_weights(
            x,
            lambda v, w, b: self._ops.subm_conv3d(
                v, w, b, kernel_size=self.kernel_size, dilation=self.dilation
            ),
        )


class ConvTranspose3d(ConvLayer):
    """Transposed sparse conv over its derived support (``lattice.conv_transpose3d``)."""

    def forward(self, x: Any) -> Any:
        """Transposed convolution of ``x`` (output stride ``t / s``)."""
        return self._with_weights(
            x, lambda v, w, b: self._ops.conv_transpose3d(v, w, b, **self._window())
        )


class TargetConvTranspose3d(ConvLayer):
    """Transposed conv at a target's rows (``lattice.target_conv_transpose3d``): ``m(x, target)``.

    With the target being the input of the paired strided conv this is
    spconv's SparseInverseConv3d, the usual U-Net decoder step.
    """

    def forward(self, x: Any, target: Any) -> Any:
        """Transposed convolution of ``x`` at ``target``'s rows."""
        return self._with_weights(
            x,
            lambda v, w, b: self._ops.conv_transpose3d(
                v, w, b, **self._window(), coordinates=target
            ),
        )


class GenerativeConvTranspose3d(ConvLayer):
    """Support expansion ``o = c*s + k`` (``lattice.generative_conv_transpose3d``).

    Every tap of every input row is an output row (padding 0, dilation 1).
    """

    _geometry_keys = ("kernel_size", "stride")

    def forward(self, x: Any) -> Any:
        """Expand ``x``'s support tap by tap."""
        return self._with_weights(
            x,
            lambda v, w, b: self._ops.generative_conv_transpose3d(
                v, w, b, kernel_size=self.kernel_size, stride=self.stride
            ),
        )


# --------------------------------------------------------------------------- normalised


class NormalizedLayer(ConvLayer):
    """A conv with a support-dependent weight normaliser and its floor ``eps``.

    Each output row is divided by the root of the squared weight mass its
    own support reaches; the layers cannot hold packed weights (the
    normaliser needs the dense values).
    """

    eps: float

    def _set_eps(self, eps: float) -> None:
        self.eps = positive_float(eps, "eps", type(self).__name__)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, eps={self.eps}"


class NormalizedSubmConv3d(NormalizedLayer):
    """Weight-normalised submanifold conv (``lattice.normalized_subm_conv3d``).

    A 1x1x1 kernel is an ordinary pointwise conv, as upstream's.
    """

    _geometry_keys = ("kernel_size", "dilation")

    def forward(self, x: Any) -> Any:
        """Normalised convolution of ``x`` on its own rows."""
        return self._with_weights(
            x,
            lambda v, w, b: self._ops.normalized_subm_conv3d(
                v, w, b, kernel_size=self.kernel_size, dilation=self.dilation, eps=self.eps
            ),
        )


class NormalizedConvTranspose3d(NormalizedLayer):
    """Weight-normalised transposed conv over its derived support."""

    def forward(self, x: Any) -> Any:
        """Normalised transposed convolution of ``x``."""
        return self._normalized_transpose(x, None)

    def _normalized_transpose(self, x: Any, target: Any) -> Any:
        return self._with_weights(
            x,
            lambda v, w, b: self._ops.normalized_conv_transpose3d(
                v, w, b, **self._window(), eps=self.eps, coordinates=target
            ),
        )


class TargetNormalizedConvTranspose3d(NormalizedConvTranspose3d):
    """Weight-normalised transposed conv at a target's rows: ``m(x, target)``."""

    def forward(self, x: Any, target: Any) -> Any:  # type: ignore[override]
        """Normalised transposed convolution of ``x`` at ``target``'s rows."""
        return self._normalized_transpose(x, target)


class NormalizedGenerativeConvTranspose3d(NormalizedLayer):
    """Weight-normalised support expansion ``o = c*s + k``."""

    _geometry_keys = ("kernel_size", "stride")

    def forward(self, x: Any) -> Any:
        """Normalised support expansion of ``x``."""
        return self._with_weights(
            x,
            lambda v, w, b: self._ops.normalized_generative_conv_transpose3d(
                v, w, b, kernel_size=self.kernel_size, stride=self.stride, eps=self.eps
            ),
        )

"""The backend-neutral half of both runtimes' convolution modules, declared once.

Every sparse conv module owns ``weight`` ``(C_out, Kx, Ky, Kz, C_in)`` (layout
``conv3d_o_xyz_i``, transposed convs too) and an optional ``bias``
``(C_out,)``; the names are the artifact's storage keys.  What the modules
share is declared here (see :mod:`lattice_contract.frontend.nn_layers` for the
pattern): each constructor (signature, defaults, checks), the repr, the
docstring and the name of the functional op each one calls.  A runtime's
conv base supplies ``_create_parameters``, which makes ``weight`` and
``bias`` with its array library (torch's take the factory keywords
``device=`` and ``dtype=``, see :class:`ParameterFactory`); each runtime
class writes its own ``forward`` (MLX: ``__call__``), which passes the
weight as its op takes it (MLX: a packed ``QuantizedWeight`` when
quantized; torch: cast under autocast) with the layer's geometry.

The signatures are the reference system's (upstream torch-lattice's conv
modules): the geometry is positional, in ``torch.nn.Conv3d``'s order
``kernel_size, stride, padding, dilation`` for the convs with a full window
(``Conv3d(4, 8, 2, 2)`` is a 2x2x2 stride-2 conv), ``kernel_size, dilation``
for the submanifold convs (they have no stride or padding) and
``kernel_size, stride`` for the generative ones (padding 0, dilation 1).
``bias``, ``eps`` and the factory keywords are keyword-only: a seventh
positional argument of ``torch.nn.Conv3d`` is ``groups``, and upstream's
normalised convs take ``bias`` before ``eps``, so a positional value there
would mean something else to a reader coming from either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypedDict, TypeVar, Unpack

from lattice_contract.dialect import NORMALIZED_EPS, positive_float
from lattice_contract.frontend.nn_args import ConvParams, conv_params, conv_repr
from lattice_contract.frontend.nn_layers import Weighted, Windowed
from lattice_contract.frontend.ops import IntOrTriple

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
    "ParameterFactory",
    "SubmConv3d",
    "TargetConv3d",
    "TargetConvTranspose3d",
    "TargetNormalizedConvTranspose3d",
]


DeviceT = TypeVar("DeviceT")
DTypeT = TypeVar("DTypeT")


class ParameterFactory(TypedDict, Generic[DeviceT, DTypeT], total=False):
    """The keywords a runtime's conv constructor passes on to its parameter creation.

    torch's are its factory keywords (``device=``, ``dtype=``, as
    ``torch.nn.Conv3d`` takes them); MLX takes neither (its arrays live in
    unified memory and its modules are cast with ``set_dtype``), so it binds
    both to ``Never`` and mypy refuses them there.
    """

    device: DeviceT
    dtype: DTypeT


_FACTORY_KEYS = ParameterFactory.__required_keys__ | ParameterFactory.__optional_keys__


def _factory_only(layer: Any, factory: Mapping[str, object]) -> None:
    """Refuse a keyword that is not a factory keyword.

    ``**factory`` would otherwise take any keyword: a misspelt one
    (``stide=``) would reach the runtime's array constructor, and a geometry
    keyword the conv does not have (``SubmConv3d(..., stride=2)``, an spconv
    habit) would land in the base constructor's parameter of that name and
    be silently ignored by the op.
    """
    unknown = sorted(set(factory) - _FACTORY_KEYS)
    if "transposed" in unknown or "generative" in unknown:
        # TorchSparse's spnn.Conv3d(c_in, c_out, 2, 2, transposed=True) goes back onto the
        # rows its encoder cached at the finer stride; a module alone cannot know them.
        raise TypeError(
            f"{type(layer).__name__}() has no transposed=/generative= flag (TorchSparse's "
            "spnn.Conv3d spelling): for TorchSparse's transposed conv back onto the finer rows "
            "use nn.TargetConvTranspose3d(c_in, c_out, k, stride) called as m(x, target) with "
            "the encoder's tensor at the finer stride (torch_lattice.port.from_torchsparse "
            "does this for a whole model); nn.ConvTranspose3d instead creates every row the "
            "kernel reaches (8 per row for k=2, s=2), and nn.GenerativeConvTranspose3d is "
            "MinkowskiEngine's generative one"
        )
    if unknown:
        name = type(layer).__name__
        raise TypeError(
            f"{name}() got an unexpected keyword argument {unknown[0]!r}; its geometry is "
            f"{', '.join(layer._geometry_keys)}, and its other keywords are bias, "
            f"{'eps, ' if isinstance(layer, NormalizedLayer) else ''}and the runtime's "
            "parameter keywords (torch: device, dtype)"
        )


class ConvLayer(Windowed, Weighted, Generic[DeviceT, DTypeT]):
    """Shared state of every sparse conv: channel counts, geometry, parameter creation."""

    owns_parameters = False  # the constructor is declared here; the runtime only fills it

    _create_parameters: Callable[[ConvParams, bool, ParameterFactory[DeviceT, DTypeT]], None]
    """``_create_parameters(params, bias, factory)``: the runtime makes ``weight``
    ``params.weight_shape`` (and ``bias`` ``(C_out,)`` when ``bias``), initialised as torch's
    convs are: uniform in ``+-params.init_bound``."""

    _geometry_keys: ClassVar[tuple[str, ...]] = ("kernel_size", "stride", "padding", "dilation")
    """The geometry attributes the functional op takes (and the repr shows)."""

    in_channels: int
    out_channels: int

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
        *,
        bias: bool = True,
        **factory: Unpack[ParameterFactory[DeviceT, DTypeT]],
    ) -> None:
        """Check the channel counts and geometry, then create ``weight`` and ``bias``.

        The geometry is positional (``kernel_size`` first, then this conv's
        own window attributes), ``eps`` and ``bias`` are keyword-only, and
        ``**factory`` are the runtime's parameter keywords: torch's
        ``device=`` and ``dtype=``; none on MLX (cast a model with
        ``set_dtype``).  Every conv's constructor follows these rules (and
        delegates here), so ``help()`` shows this text for each.
        """
        _factory_only(self, factory)
        super().__init__()
        params = conv_params(in_channels, out_channels, kernel_size, stride, padding, dilation)
        self.in_channels, self.out_channels = params.in_channels, params.out_channels
        self.kernel_size, self.stride, self.padding, self.dilation = params[2:6]
        self._create_parameters(params, bias, factory)

    def extra_repr(self) -> str:
        geometry = {name: getattr(self, name) for name in self._geometry_keys}
        return conv_repr(self.in_channels, self.out_channels, geometry, self._has_bias())


class Conv3d(ConvLayer[DeviceT, DTypeT]):
    """Sparse conv on the coarsened support (``lattice.conv3d``; upstream's and ME's conv).

    Output rows are every ``floor(c / s)`` of an input row (at stride 1 the
    input rows); odd kernels are centred on the output; the output stride is
    ``t * s``.  For spconv's SparseConv3d, whose support grows, use
    :class:`FullConv3d`.
    """

    functional_op = "conv3d"


class FullConv3d(ConvLayer[DeviceT, DTypeT]):
    """spconv's regular sparse conv (``lattice.full_conv3d``): every o an input reaches.

    Input c reaches o through tap k when ``c = o*s - p + k*d``; the support
    grows even at stride 1.
    """

    functional_op = "full_conv3d"


class TargetConv3d(ConvLayer[DeviceT, DTypeT]):
    """Sparse conv at a target's rows (``lattice.target_conv3d``); call ``m(x, target)``."""

    functional_op = "conv3d"


class SubmConv3d(ConvLayer[DeviceT, DTypeT]):
    """Submanifold conv (``lattice.subm_conv3d``): output rows are the input rows."""

    functional_op = "subm_conv3d"

    _geometry_keys = ("kernel_size", "dilation")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        dilation: IntOrTriple = 1,
        *,
        bias: bool = True,
        **factory: Unpack[ParameterFactory[DeviceT, DTypeT]],
    ) -> None:
        _factory_only(self, factory)
        super().__init__(
            in_channels, out_channels, kernel_size, dilation=dilation, bias=bias, **factory
        )


class ConvTranspose3d(ConvLayer[DeviceT, DTypeT]):
    """Transposed sparse conv over its derived support (``lattice.conv_transpose3d``).

    Every row a coarse row's kernel reaches becomes an output row (a k=2, s=2
    conv turns each row into 8), so it does *not* return to an encoder's
    finer rows as TorchSparse's ``Conv3d(..., transposed=True)`` and spconv's
    ``SparseInverseConv3d`` do: for those use :class:`TargetConvTranspose3d`
    with the finer tensor as target.
    """

    functional_op = "conv_transpose3d"


class TargetConvTranspose3d(ConvLayer[DeviceT, DTypeT]):
    """Transposed conv at a target's rows (``lattice.target_conv_transpose3d``): ``m(x, target)``.

    With the target being the input of the paired strided conv this is
    spconv's SparseInverseConv3d, the usual U-Net decoder step.
    """

    functional_op = "conv_transpose3d"


class GenerativeConvTranspose3d(ConvLayer[DeviceT, DTypeT]):
    """Support expansion ``o = c*s + k`` (``lattice.generative_conv_transpose3d``).

    Every tap of every input row is an output row (padding 0, dilation 1).
    """

    functional_op = "generative_conv_transpose3d"

    _geometry_keys = ("kernel_size", "stride")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        *,
        bias: bool = True,
        **factory: Unpack[ParameterFactory[DeviceT, DTypeT]],
    ) -> None:
        _factory_only(self, factory)
        super().__init__(in_channels, out_channels, kernel_size, stride, bias=bias, **factory)


# --------------------------------------------------------------------------- normalised


class NormalizedLayer(ConvLayer[DeviceT, DTypeT]):
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


class NormalizedSubmConv3d(NormalizedLayer[DeviceT, DTypeT]):
    """Weight-normalised submanifold conv (``lattice.normalized_subm_conv3d``).

    A 1x1x1 kernel is an ordinary pointwise conv, as upstream's.
    """

    functional_op = "normalized_subm_conv3d"

    _geometry_keys = ("kernel_size", "dilation")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        dilation: IntOrTriple = 1,
        *,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        **factory: Unpack[ParameterFactory[DeviceT, DTypeT]],
    ) -> None:
        _factory_only(self, factory)
        super().__init__(
            in_channels, out_channels, kernel_size, dilation=dilation, bias=bias, **factory
        )
        self._set_eps(eps)


class NormalizedConvTranspose3d(NormalizedLayer[DeviceT, DTypeT]):
    """Weight-normalised transposed conv over its derived support."""

    functional_op = "normalized_conv_transpose3d"

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
        *,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        **factory: Unpack[ParameterFactory[DeviceT, DTypeT]],
    ) -> None:
        _factory_only(self, factory)
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, bias=bias, **factory
        )
        self._set_eps(eps)


class TargetNormalizedConvTranspose3d(NormalizedConvTranspose3d[DeviceT, DTypeT]):
    """Weight-normalised transposed conv at a target's rows: ``m(x, target)``."""


class NormalizedGenerativeConvTranspose3d(NormalizedLayer[DeviceT, DTypeT]):
    """Weight-normalised support expansion ``o = c*s + k``."""

    functional_op = "normalized_generative_conv_transpose3d"

    _geometry_keys = ("kernel_size", "stride")

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTriple,
        stride: IntOrTriple = 1,
        *,
        eps: float = NORMALIZED_EPS,
        bias: bool = True,
        **factory: Unpack[ParameterFactory[DeviceT, DTypeT]],
    ) -> None:
        _factory_only(self, factory)
        super().__init__(in_channels, out_channels, kernel_size, stride, bias=bias, **factory)
        self._set_eps(eps)

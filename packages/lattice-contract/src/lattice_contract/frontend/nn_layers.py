"""The layers both runtimes' ``nn`` modules share, declared once as data and constructors.

``mlx_lattice.nn`` and ``torch_lattice.nn`` offer the same modules under the
same names.  What a module is before any array exists is declared here, once,
as a *layer* class: its constructor (signature, defaults, argument
normalisation and the errors for bad arguments), the attributes it stores,
its docstring, its repr text, and :attr:`Layer.functional_op`, the name of the
functional op it computes with.  A layer class holds no ``forward``: each
runtime's public class puts its own module base behind the layer and writes
the call of its own functional op itself, in its own file::

    class MaxPool3d(nn_layers.MaxPool3d, Module):  # torch_lattice/nn/layers.py
        def forward(self, x):
            return ops.pool3d(x, mode=..., kernel_size=self.kernel_size, ...)

(MLX's classes write ``__call__``, as ``mlx.nn``'s layers do.)  The layer
class comes first among the bases, so its ``__init__`` and ``extra_repr``
are the module's; the module base behind it initialises after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypedDict

from lattice_contract.dialect import (
    BinaryOp,
    Interpolation,
    Join,
    PoolMode,
    Triple,
    VoxelReduction,
    as_enum,
    as_triple,
    dense_layout,
    positive_int,
    resolve_batch_size,
    voxel_grid,
    window,
)

__all__ = [
    "AvgPool3d",
    "Devoxelize",
    "FullAvgPool3d",
    "FullMaxPool3d",
    "FullSumPool3d",
    "GlobalPool",
    "HeightCompression",
    "Layer",
    "MaxPool3d",
    "PoolTranspose3d",
    "Softmax",
    "SparseAdd",
    "SparseBinary",
    "SparseCat",
    "SparseReindex",
    "SumPool3d",
    "ToDense",
    "TrilinearUpsample3d",
    "Voxelize",
    "Weighted",
    "Window",
    "Windowed",
    "layer_classes",
]

IntOrTriple = int | tuple[int, int, int]
FloatOrTriple = float | tuple[float, float, float]


class Layer:
    """Base of every declared layer: argument storage, repr and docstring, no computation.

    A runtime's public class inherits the layer first and the runtime's
    module base second, and writes its own ``forward`` / ``__call__``.
    ``__init_subclass__`` gives each runtime class the docstring of the layer
    it declares (``help()``, Sphinx and ``__doc__`` show the one text).
    """

    functional_op: ClassVar[str]
    """The functional op the runtime's ``forward`` (MLX: ``__call__``) calls, by its
    ``ops`` name; the shared bases (:class:`Weighted`, :class:`Windowed`) have none."""

    owns_parameters: ClassVar[bool] = False
    """Whether the runtime writes the constructor (it creates parameters with its library)."""

    def __init__(self) -> None:
        # The constructor is the declaration's (a layer without arguments takes
        # none); the runtime's module base initialises after it.
        super().__init__()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__ is None:
            for base in cls.__mro__[1:]:
                if issubclass(base, Layer) and base.__doc__:
                    cls.__doc__ = base.__doc__
                    break

    def extra_repr(self) -> str:
        """The text between the parentheses of the module's repr."""
        return ""


class Weighted(Layer):
    """A layer with parameters: the runtime's constructor creates them with its library.

    The declaration keeps the checked sizes and the repr; the runtime's
    forward passes the weight as its op takes it (MLX: a packed
    ``QuantizedWeight`` when quantized; torch: cast under autocast).
    """

    owns_parameters = True

    weight: Any

    bias_operand: Callable[[], Any]
    """The ``bias`` parameter, or None when the module was made without one."""

    def _has_bias(self) -> bool:
        return self.bias_operand() is not None


class Window(TypedDict):
    """The four window attributes of a conv or pool, as the functional ops take them."""

    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple


class Windowed(Layer):
    """A layer with a kernel window: its checked geometry, as keywords and as repr text."""

    kernel_size: Triple
    stride: Triple
    padding: Triple
    dilation: Triple

    def _window(self) -> Window:
        return Window(
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )

    def _window_repr(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self._window().items())


class _Unweighted(Windowed):
    """A windowed layer without weights; ``stride`` defaults to ``kernel_size`` as in torch."""

    def __init__(
        self,
        kernel_size: IntOrTriple,
        stride: IntOrTriple | None = None,
        padding: IntOrTriple = 0,
        dilation: IntOrTriple = 1,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = window(
            kernel_size, stride, padding, dilation
        )

    def extra_repr(self) -> str:
        return self._window_repr()


# --------------------------------------------------------------------------- pooling


class _Pool3d(_Unweighted):
    """Local sparse pooling; ``stride`` defaults to ``kernel_size`` as in ``torch.nn`` pools."""

    functional_op = "pool3d"
    mode: ClassVar[PoolMode]


class MaxPool3d(_Pool3d):
    """Max over each window's active inputs on the coarsened support (``lattice.pool3d``).

    The stride defaults to the kernel size, as in torch; windows follow the
    centred rule of ``conv3d``.
    """

    mode = PoolMode.max


class AvgPool3d(_Pool3d):
    """Mean over each window's active inputs (divided by their count); ``lattice.pool3d``."""

    mode = PoolMode.avg


class SumPool3d(_Pool3d):
    """Sum over each window's active inputs; ``lattice.pool3d``."""

    mode = PoolMode.sum


class FullMaxPool3d(MaxPool3d):
    """spconv's max pool (``lattice.full_pool3d``): the indexed relation, growing support."""

    functional_op = "full_pool3d"


class FullAvgPool3d(AvgPool3d):
    """spconv-style mean pool (``lattice.full_pool3d``): the indexed relation."""

    functional_op = "full_pool3d"


class FullSumPool3d(SumPool3d):
    """spconv-style sum pool (``lattice.full_pool3d``): the indexed relation."""

    functional_op = "full_pool3d"


class GlobalPool(Layer):
    """Per-batch-item reduction of a sparse value to a dense ``(B, C)`` array.

    ``batch_size=-1`` (the default; ``None`` means the same) infers B as the
    largest batch index + 1 at call time, and is what an exported artifact
    records, so one artifact serves any batch.  A positive value fixes B; 0
    gives an empty result.  A call may override it: ``m(x, batch_size=4)``.
    """

    functional_op = "global_pool"

    def __init__(self, mode: PoolMode | str = PoolMode.avg, batch_size: int | None = -1) -> None:
        super().__init__()
        self.mode = as_enum(mode, PoolMode, "mode")
        self.batch_size = -1 if batch_size is None else batch_size
        resolve_batch_size(self.batch_size, None, "GlobalPool")

    def extra_repr(self) -> str:
        return f"mode={self.mode.value}, batch_size={self.batch_size}"


class PoolTranspose3d(_Unweighted):
    """Mean of the coarse rows reaching each fine row (``lattice.pool_transpose3d``).

    ``stride`` defaults to the kernel size (the inverse of a non-overlapping
    pool).  Called as ``m(x, target)`` it produces exactly the target's rows,
    as ``m(x)`` its derived support.
    """

    functional_op = "pool_transpose3d"


class TrilinearUpsample3d(Layer):
    """Renormalised trilinear upsampling by ``stride`` (``lattice.trilinear_upsample3d``).

    Called as ``m(x, target)`` it produces exactly the target's rows.
    """

    functional_op = "trilinear_upsample3d"

    def __init__(self, stride: IntOrTriple) -> None:
        super().__init__()
        self.stride: Triple = window(1, stride).stride

    def extra_repr(self) -> str:
        return f"stride={self.stride}"


class Softmax(Layer):
    """Softmax over the channels of each row (``lattice.softmax``)."""

    functional_op = "softmax"


# --------------------------------------------------------------------------- points


class Voxelize(Layer):
    """Points to a sparse value: ``m(points, features, batch)`` (``lattice.voxelize``).

    Points are (P, 3) f32; cells ``floor((p - origin) / voxel_size)``.  The
    result sits at ``stride`` (coordinates ``cell * stride``), rows in
    first-occurrence order.
    """

    functional_op = "voxelize"

    def __init__(
        self,
        voxel_size: FloatOrTriple,
        reduction: VoxelReduction | str = VoxelReduction.mean,
        *,
        origin: FloatOrTriple = 0.0,
        stride: IntOrTriple = 1,
    ) -> None:
        super().__init__()
        self.voxel_size, self.origin = voxel_grid(voxel_size, origin, "Voxelize")
        self.reduction = as_enum(reduction, VoxelReduction, "reduction")
        self.stride = as_triple(stride, "stride")

    def extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, reduction={self.reduction.value}"


class Devoxelize(Layer):
    """Sparse features read back at points: ``m(x, points, batch)`` -> dense ``(P, C)``.

    Nearest, linear or trilinear interpolation (``lattice.devoxelize``).
    """

    functional_op = "devoxelize"

    def __init__(
        self,
        voxel_size: FloatOrTriple,
        interpolation: Interpolation | str = Interpolation.linear,
        *,
        origin: FloatOrTriple = 0.0,
    ) -> None:
        super().__init__()
        self.voxel_size, self.origin = voxel_grid(voxel_size, origin, "Devoxelize")
        self.interpolation = as_enum(interpolation, Interpolation, "interpolation")

    def extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, interpolation={self.interpolation.value}"


# --------------------------------------------------------------------------- algebra


class SparseBinary(Layer):
    """Coordinate-aligned elementwise op of two sparse values: ``m(lhs, rhs)``.

    A row missing on one side reads zeros there.  The modules default to the
    outer join (every row of both sides survives); the functional op
    defaults to inner.
    """

    functional_op = "sparse_binary"

    def __init__(self, op: BinaryOp | str, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.op = as_enum(op, BinaryOp, "op")
        self.join = as_enum(join, Join, "join")

    def extra_repr(self) -> str:
        return f"op={self.op.value}, join={self.join.value}"


class SparseAdd(SparseBinary):
    """``lhs + rhs`` on aligned rows (a residual connection when supports match)."""

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__(BinaryOp.add, join)


class SparseCat(Layer):
    """Channel concatenation ``[lhs | rhs]`` of aligned rows: ``m(lhs, rhs)`` (default outer).

    Skip connections; a row missing on one side reads zeros there.
    """

    functional_op = "sparse_cat"

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.join = as_enum(join, Join, "join")

    def extra_repr(self) -> str:
        return f"join={self.join.value}"


class SparseReindex(Layer):
    """``x``'s features moved onto a target's rows (zeros where absent): ``m(x, target)``."""

    functional_op = "sparse_reindex"


# --------------------------------------------------------------------- dense hand-off


class ToDense(Layer):
    """The sparse value as a zero-filled dense array of a static grid (spconv's ``ToDense``).

    A sparse backbone ends where a 2D head begins: spconv's ``dense()`` writes
    the rows into a zero array.  ``spatial_shape`` is the grid's (X, Y, Z) in
    cells of the value's stride and ``batch_size`` its batch items; ``layout``
    orders the result (``"b_c_z_y_x"``, spconv's ``dense()`` of ``(b, z, y, x)``
    indices, is the default).  A row outside the grid is an error, as in
    spconv.  Exports as ``lattice.sparse.to_dense``.
    """

    functional_op = "sparse_to_dense"

    def __init__(
        self, spatial_shape: IntOrTriple, batch_size: int, layout: str = "b_c_z_y_x"
    ) -> None:
        super().__init__()
        self.spatial_shape: Triple = as_triple(spatial_shape, "spatial_shape")
        self.batch_size = positive_int(batch_size, "batch_size")
        self.layout = dense_layout(layout, type(self).__name__)

    def extra_repr(self) -> str:
        grid = f"spatial_shape={self.spatial_shape}, batch_size={self.batch_size}"
        return f"{grid}, layout={self.layout!r}"


class HeightCompression(ToDense):
    """OpenPCDet's map-to-BEV: ``dense()`` then ``(N, C, Z, Y, X) -> (N, C * Z, Y, X)``.

    The 2D detection head reads a bird's-eye-view map, so depth is folded into
    channels: channel ``c * Z + z`` of the result is channel c at height z, as
    OpenPCDet's ``view`` gives.  ``spatial_shape`` is (X, Y, Z) as for
    :class:`ToDense`.
    """

    def __init__(self, spatial_shape: IntOrTriple, batch_size: int) -> None:
        super().__init__(spatial_shape, batch_size, layout="b_cz_y_x")

    def extra_repr(self) -> str:
        return f"spatial_shape={self.spatial_shape}, batch_size={self.batch_size}"


def layer_classes(namespace: dict[str, Any]) -> dict[str, type[Layer]]:
    """The public module layers declared in a module's namespace, by name.

    A module layer is a public :class:`Layer` subclass defined there that
    names its functional op (:attr:`Layer.functional_op`; the shared bases, such as
    :class:`Windowed`, name none).
    """
    return {
        name: value
        for name, value in namespace.items()
        if isinstance(value, type)
        and issubclass(value, Layer)
        and isinstance(getattr(value, "functional_op", None), str)
        and not name.startswith("_")
        and value.__module__ == namespace.get("__name__")
    }

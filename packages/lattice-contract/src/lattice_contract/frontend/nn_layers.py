"""The backend-neutral half of both runtimes' ``nn`` modules, declared once.

``mlx_lattice.nn`` and ``torch_lattice.nn`` offer the same modules under the
same names.  Everything a module does that needs no array library is
declared here, once, as a *layer* class: its constructor (signature,
defaults, attribute normalisation and the errors for bad arguments), its
docstring, its repr text, and which functional op its ``forward`` calls with
which keywords.  A runtime's public class is then a real class that puts its
own ``Module`` base behind the layer::

    class MaxPool3d(nn_layers.MaxPool3d, Module): ...

and supplies only what differs between array libraries, through the hooks
declared on :class:`Layer`:

* ``_ops``: the runtime's functional ops, typed as the contract's
  :class:`~lattice_contract.runtime.ops.RuntimeOps` (so mypy checks every
  keyword a layer passes);
* ``_rows(x, fn)``: apply a row-wise feature map to a dense array or to a
  sparse value's features (keeping its support);
* for layers with parameters (:class:`Weighted`: the convs of
  :mod:`lattice_contract.frontend.nn_convs`, the feature layers of
  :mod:`lattice_contract.frontend.nn_features`), ``_with_weights`` and
  ``bias_operand``, and what creates the parameters: for the convs a
  ``_create_parameters`` hook behind the declared constructor, for the
  feature layers the constructor itself.

The layer class comes first among the bases, so its ``__init__``,
``forward`` and ``extra_repr`` are the module's; torch's
``torch.nn.Module.__call__`` runs ``forward`` (hooks included), and the MLX
base's ``__call__`` does the same.  The hooks are only *annotated* here,
never defined, so the runtime base behind the layer provides them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the injected ops; removed when layers own their forward
    from lattice_contract.runtime.ops import RuntimeOps

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
    resolve_batch_size,
    voxel_grid,
    window,
)

__all__ = [
    "AvgPool3d",
    "Call",
    "Devoxelize",
    "FullAvgPool3d",
    "FullMaxPool3d",
    "FullSumPool3d",
    "GlobalPool",
    "Layer",
    "MaxPool3d",
    "PoolTranspose3d",
    "Softmax",
    "SparseAdd",
    "SparseBinary",
    "SparseCat",
    "SparseReindex",
    "SumPool3d",
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
    """Base of every declared layer: the runtime hooks it relies on.

    A runtime's public class inherits the layer first and the runtime's
    module base second; the base provides the hooks annotated here.
    ``__init_subclass__`` gives each runtime class the docstring of the layer
    it declares (``help()``, Sphinx and ``__doc__`` show the one text).
    """

    _ops: ClassVar[RuntimeOps]
    """The runtime's functional ops (its ``ops`` module)."""

    _rows: Callable[[Any, Callable[[Any], Any]], Any]
    """``_rows(x, fn)``: ``fn`` on a dense array, or on a sparse value's features."""

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


Call = Callable[[Any, Any, Any], Any]
"""``call(input, weight, bias)``: a functional op with the layer's attributes bound."""


class Weighted(Layer):
    """A layer with parameters: the runtime's constructor creates them with its library.

    The declaration keeps what the parameters do: checked sizes, repr, op call.
    """

    owns_parameters = True

    weight: Any

    _with_weights: Callable[[Any, Call], Any]
    """``_with_weights(x, call)``: ``call(x, weight, bias)`` with the runtime's weight operands
    (MLX: a packed ``QuantizedWeight`` when quantized; torch: cast under autocast)."""

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

    mode: ClassVar[PoolMode]
    full: ClassVar[bool] = False
    """Whether the layer pools over the indexed relation (``lattice.full_pool3d``)."""

    def forward(self, x: Any) -> Any:
        """Pool ``x`` (a sparse value) window by window."""
        op = self._ops.full_pool3d if self.full else self._ops.pool3d
        return op(x, mode=self.mode.value, **self._window())


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

    full = True


class FullAvgPool3d(AvgPool3d):
    """spconv-style mean pool (``lattice.full_pool3d``): the indexed relation."""

    full = True


class FullSumPool3d(SumPool3d):
    """spconv-style sum pool (``lattice.full_pool3d``): the indexed relation."""

    full = True


class GlobalPool(Layer):
    """Per-batch-item reduction of a sparse value to a dense ``(B, C)`` array.

    ``batch_size=-1`` (the default; ``None`` means the same) infers B as the
    largest batch index + 1 at call time, and is what an exported artifact
    records, so one artifact serves any batch.  A positive value fixes B; 0
    gives an empty result.  A call may override it: ``m(x, batch_size=4)``.
    """

    def __init__(self, mode: PoolMode | str = PoolMode.avg, batch_size: int | None = -1) -> None:
        super().__init__()
        self.mode = as_enum(mode, PoolMode, "mode")
        self.batch_size = -1 if batch_size is None else batch_size
        resolve_batch_size(self.batch_size, None, "GlobalPool")

    def forward(self, x: Any, batch_size: int | None = None) -> Any:
        """Reduce ``x``'s rows per batch item."""
        size = self.batch_size if batch_size is None else batch_size
        return self._ops.global_pool(x, mode=self.mode.value, batch_size=size)

    def extra_repr(self) -> str:
        return f"mode={self.mode.value}, batch_size={self.batch_size}"


class PoolTranspose3d(_Unweighted):
    """Mean of the coarse rows reaching each fine row (``lattice.pool_transpose3d``).

    ``stride`` defaults to the kernel size (the inverse of a non-overlapping
    pool).  Called as ``m(x, target)`` it produces exactly the target's rows,
    as ``m(x)`` its derived support.
    """

    def forward(self, x: Any, target: Any = None) -> Any:
        """Upsample ``x`` (onto ``target``'s rows when given)."""
        return self._ops.pool_transpose3d(x, **self._window(), coordinates=target)


class TrilinearUpsample3d(Layer):
    """Renormalised trilinear upsampling by ``stride`` (``lattice.trilinear_upsample3d``).

    Called as ``m(x, target)`` it produces exactly the target's rows.
    """

    def __init__(self, stride: IntOrTriple) -> None:
        super().__init__()
        self.stride: Triple = window(1, stride).stride

    def forward(self, x: Any, target: Any = None) -> Any:
        """Upsample ``x`` (onto ``target``'s rows when given)."""
        return self._ops.trilinear_upsample3d(x, stride=self.stride, coordinates=target)

    def extra_repr(self) -> str:
        return f"stride={self.stride}"


class Softmax(Layer):
    """Softmax over the channels of each row (``lattice.softmax``)."""

    def forward(self, x: Any) -> Any:
        """Softmax of a dense array's rows, or of a sparse value's features."""
        return self._rows(x, lambda f: self._ops.softmax(f, axis=-1))


# --------------------------------------------------------------------------- points


class Voxelize(Layer):
    """Points to a sparse value: ``m(points, features, batch)`` (``lattice.voxelize``).

    Points are (P, 3) f32; cells ``floor((p - origin) / voxel_size)``.  The
    result sits at ``stride`` (coordinates ``cell * stride``), rows in
    first-occurrence order.
    """

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

    def forward(self, points: Any, features: Any, batch: Any, active_rows: Any = None) -> Any:
        """Merge the active points into voxels."""
        return self._ops.voxelize(
            points,
            features,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            reduction=self.reduction.value,
            stride=self.stride,
        )

    def extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, reduction={self.reduction.value}"


class Devoxelize(Layer):
    """Sparse features read back at points: ``m(x, points, batch)`` -> dense ``(P, C)``.

    Nearest, linear or trilinear interpolation (``lattice.devoxelize``).
    """

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

    def forward(self, x: Any, points: Any, batch: Any, active_rows: Any = None) -> Any:
        """Interpolate ``x``'s features at the active points."""
        return self._ops.devoxelize(
            points,
            x,
            batch,
            active_rows,
            voxel_size=self.voxel_size,
            origin=self.origin,
            interpolation=self.interpolation.value,
        )

    def extra_repr(self) -> str:
        return f"voxel_size={self.voxel_size}, interpolation={self.interpolation.value}"


# --------------------------------------------------------------------------- algebra


class SparseBinary(Layer):
    """Coordinate-aligned elementwise op of two sparse values: ``m(lhs, rhs)``.

    A row missing on one side reads zeros there.  The modules default to the
    outer join (every row of both sides survives); the functional op
    defaults to inner.
    """

    def __init__(self, op: BinaryOp | str, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.op = as_enum(op, BinaryOp, "op")
        self.join = as_enum(join, Join, "join")

    def forward(self, lhs: Any, rhs: Any) -> Any:
        """Combine the aligned rows of ``lhs`` and ``rhs``."""
        return self._ops.sparse_binary(
            lhs, rhs, op=self.op.value, join=self.join.value, lhs_fill=0.0, rhs_fill=0.0
        )

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

    def __init__(self, join: Join | str = Join.outer) -> None:
        super().__init__()
        self.join = as_enum(join, Join, "join")

    def forward(self, lhs: Any, rhs: Any) -> Any:
        """Concatenate the aligned rows' channels."""
        return self._ops.sparse_cat(lhs, rhs, join=self.join.value)

    def extra_repr(self) -> str:
        return f"join={self.join.value}"


class SparseReindex(Layer):
    """``x``'s features moved onto a target's rows (zeros where absent): ``m(x, target)``."""

    def forward(self, x: Any, target: Any) -> Any:
        """Gather ``x``'s features at ``target``'s rows."""
        return self._ops.sparse_reindex(x, target, fill=0.0)


def layer_classes(namespace: dict[str, Any]) -> dict[str, type[Layer]]:
    """The public module layers declared in a module's namespace, by name.

    A module layer is a public :class:`Layer` subclass defined there with a
    ``forward`` (the shared bases, such as :class:`Windowed`, have none).
    """
    return {
        name: value
        for name, value in namespace.items()
        if isinstance(value, type)
        and issubclass(value, Layer)
        and callable(getattr(value, "forward", None))
        and not name.startswith("_")
        and value.__module__ == namespace.get("__name__")
    }

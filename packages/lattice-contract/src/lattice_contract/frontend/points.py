"""The argument prologue of ``voxelize`` / ``devoxelize``, written once for both runtimes.

Both runtimes' ``ops.voxelize`` and ``ops.devoxelize`` start the same way:
points (f32 ``(P, 3)``) and batch indices (int32 ``(P,)``, non-negative),
finite points, features one float row per point, everything on one device,
and the active-point count.  :class:`PointPrologue` runs those checks in
that order and raises the contract's errors (one set of words, so the same
bad call fails alike on MLX and on torch); a runtime subclasses it with the
two facts only its array library can compute (:meth:`~PointPrologue.value_facts`,
:meth:`~PointPrologue.device`).  The rules themselves and their words are in
:mod:`lattice_contract.frontend.op_checks` and :mod:`lattice_contract.frontend.op_errors`;
the voxel arithmetic after the prologue stays each runtime's array code.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import lattice_contract.frontend.op_errors as op_errors
from lattice_contract.dialect import Interpolation, Triple, VoxelReduction
from lattice_contract.frontend.op_checks import PointRules
from lattice_contract.frontend.signatures import Attrs
from lattice_contract.frontend.sparse_errors import ARRAY_TYPES, dtype_word
from lattice_contract.frontend.sparse_tensor import SparseArray

__all__ = [
    "DevoxelizeInputs",
    "PointPrologue",
    "VoxelGrid",
    "VoxelizeInputs",
    "point_features_type",
]


class _SparseValue(Protocol):
    @property
    def feats(self) -> Any:
        """The feature rows (where the value lives)."""


ArrayT = TypeVar("ArrayT", bound=SparseArray)
SparseT = TypeVar("SparseT", bound=_SparseValue)
ResultT = TypeVar("ResultT")


class VoxelGrid(NamedTuple):
    """Where the voxels lie: cell ``floor((p - origin) / voxel_size)`` holds point p."""

    voxel_size: tuple[float, float, float]
    origin: tuple[float, float, float]


class VoxelizeInputs(NamedTuple, Generic[ArrayT]):
    """``voxelize``'s checked arguments, cut to the active points, and its attributes."""

    points: ArrayT
    batch: ArrayT
    features: ArrayT
    grid: VoxelGrid
    stride: Triple
    reduction: VoxelReduction


class DevoxelizeInputs(NamedTuple, Generic[ArrayT, SparseT]):
    """``devoxelize``'s checked arguments (all points: the inactive ones read zeros)."""

    points: ArrayT
    batch: ArrayT
    voxels: SparseT
    active: int
    """How many leading points take part."""
    grid: VoxelGrid
    interpolation: Interpolation


def _grid(attrs: Attrs) -> VoxelGrid:
    return VoxelGrid(attrs["voxel_size"], attrs["origin"])


def point_features_type(value: object) -> TypeError:
    """``voxelize`` features that are not a float array of the runtime."""
    dtype = getattr(value, "dtype", None)
    got = type(value).__name__ if dtype is None else f"an array of {dtype_word(dtype)}"
    return TypeError(
        f"voxelize: features must be a float array ({ARRAY_TYPES}) of shape (P, C), got {got}; "
        + (
            "pass its .feats (features per point, not a sparse value)"
            if hasattr(value, "feats")
            else "cast them to float32 first"
            if dtype is not None
            else "pass one array with a row per point"
        )
    )


class PointPrologue(Generic[ArrayT, SparseT]):
    """The checks before any point arithmetic, over one runtime's arrays.

    Made once per runtime with its array class, int32 dtype, SparseTensor
    class and feature dtypes; :attr:`rules` is the runtime's
    :class:`~lattice_contract.frontend.op_checks.PointRules` (its cell-range check
    is for the voxel arithmetic that follows).
    """

    def __init__(
        self,
        array_type: type[ArrayT],
        int32: Any,
        sparse_type: type[SparseT],
        feature_dtypes: tuple[Any, ...],
    ) -> None:
        self.array_type = array_type
        self.sparse_type = sparse_type
        self.feature_dtypes = feature_dtypes
        self.rules = PointRules(array_type, int32)

    # -- the runtime's facts ----------------------------------------------------

    def value_facts(self, points: ArrayT, batch: ArrayT) -> tuple[bool, bool]:
        """``(some batch index is negative, every point is finite)`` (an empty set: no, yes)."""
        raise NotImplementedError(f"{type(self).__name__} must implement value_facts")

    def single_batch(self, points: ArrayT) -> ArrayT:
        """Batch index 0 for every point, int32 ``(P,)`` (``batch_indices`` left out)."""
        raise NotImplementedError(f"{type(self).__name__} must implement single_batch")

    def inferred_batch(self, op: str, points: object, voxels: object = None) -> Any:
        """The batch column when the caller gave none: every point in batch item 0.

        mlx-lattice 0.6 inferred it; Lattice does so only where there is one
        answer (one batch item), and otherwise asks for ``batch_indices``.
        """
        batch_size = int(getattr(voxels, "batch_size", 0))
        if batch_size > 1:
            raise ValueError(
                f"{op}: batch_indices left out but the voxels hold {batch_size} batch items; "
                f"pass batch_indices (int32, one batch index per point)"
            )
        if not isinstance(points, self.array_type) or points.ndim != 2:
            op_errors.check_points_and_batch(op, points, None, self.array_type)
        return self.single_batch(points)  # type: ignore[arg-type]  # checked above

    def device(self, array: ArrayT) -> object:
        """Where an array lives (None for a library with one memory, as MLX's)."""
        return None

    # -- the prologue -------------------------------------------------------------

    def colocated(self, op: str, first: tuple[str, Any], second: tuple[str, Any]) -> None:
        """Refuse two named arrays (or sparse values) that live on different devices."""
        (first_name, a), (second_name, b) = first, second
        where_a, where_b = self.device(a), self.device(b)
        if where_a != where_b:
            raise ValueError(
                f"{op}: {first_name} are on {where_a} but {second_name} on {where_b}; "
                "move them to one device"
            )

    def points_and_batch(self, op: str, points: object, batch: object) -> tuple[ArrayT, ArrayT]:
        """Points f32 ``(P, 3)`` and finite, batch indices int32 ``(P,)`` and >= 0."""
        op_errors.check_points_and_batch(op, points, batch, self.array_type)
        p: ArrayT = points  # type: ignore[assignment]  # checked above
        b: ArrayT = batch  # type: ignore[assignment]
        self.colocated(op, ("points", p), ("batch_indices", b))
        negative, finite = self.value_facts(p, b)
        self.rules.check_values(op, batch_negative=negative, points_finite=finite)
        return p, b

    def voxelize_inputs(
        self, points: object, features: object, batch: object, active_rows: object, attrs: Attrs
    ) -> VoxelizeInputs[ArrayT]:
        """``voxelize``'s arguments checked, cut to the ``active_rows`` leading points."""
        if batch is None:
            batch = self.inferred_batch("voxelize", points)
        p, b = self.points_and_batch("voxelize", points, batch)
        num_points = int(p.shape[0])
        found = getattr(features, "dtype", None)
        if not isinstance(features, self.array_type) or found not in self.feature_dtypes:
            raise point_features_type(features)
        f: Any = features
        if f.ndim != 2 or f.shape[0] != num_points:
            raise op_errors.point_features_shape(f.shape, num_points)
        self.colocated("voxelize", ("features", f), ("points", p))
        n = self.rules.active_count(active_rows, num_points, "voxelize", "active_rows")
        if n != num_points:
            p, b, f = p[:n], b[:n], f[:n]
        return VoxelizeInputs(p, b, f, _grid(attrs), attrs["stride"], attrs["reduction"])

    def devoxelize_inputs(
        self,
        points: object,
        voxels: object,
        batch: object,
        point_active_rows: object,
        attrs: Attrs,
    ) -> DevoxelizeInputs[ArrayT, SparseT]:
        """``devoxelize``'s arguments checked; the points are not cut (inactive ones read 0)."""
        if not isinstance(voxels, self.sparse_type):
            got = "a dense array" if isinstance(voxels, self.array_type) else type(voxels).__name__
            raise TypeError(f"devoxelize: voxels must be a SparseTensor, got {got}")
        if batch is None:
            batch = self.inferred_batch("devoxelize", points, voxels)
        p, b = self.points_and_batch("devoxelize", points, batch)
        self.colocated("devoxelize", ("points", p), ("voxels", voxels.feats))
        num_points = int(p.shape[0])
        n = self.rules.active_count(
            point_active_rows, num_points, "devoxelize", "point_active_rows"
        )
        return DevoxelizeInputs(p, b, voxels, n, _grid(attrs), attrs["interpolation"])

    # -- the ops' entry points, for ``api_signatures.implement`` ---------------------

    def voxelize(self, body: Callable[[VoxelizeInputs[ArrayT]], ResultT]) -> Callable[..., ResultT]:
        """``voxelize`` as ``implement`` takes it: this prologue, then ``body`` (the array code)."""

        def voxelize(
            points: Any, features: Any, batch_indices: Any, active_rows: Any, attrs: Attrs
        ) -> ResultT:
            return body(self.voxelize_inputs(points, features, batch_indices, active_rows, attrs))

        return _returning(voxelize, body)

    def devoxelize(
        self, body: Callable[[DevoxelizeInputs[ArrayT, SparseT]], ResultT]
    ) -> Callable[..., ResultT]:
        """``devoxelize`` as ``implement`` takes it: this prologue, then ``body``."""

        def devoxelize(
            points: Any, voxels: Any, batch_indices: Any, point_active_rows: Any, attrs: Attrs
        ) -> ResultT:
            args = self.devoxelize_inputs(points, voxels, batch_indices, point_active_rows, attrs)
            return body(args)

        return _returning(devoxelize, body)


def _returning(entry: Callable[..., ResultT], body: Callable[..., Any]) -> Callable[..., ResultT]:
    """``entry`` annotated with ``body``'s resolved result type, which ``help()`` then shows."""
    entry.__annotations__ = {
        **entry.__annotations__,
        "return": typing.get_type_hints(body).get("return", Any),
    }
    return entry

"""mlx-lattice 0.6's graph-builder API: typed arguments, ``return_`` and ``to_mlir``.

A thin face over :class:`lattice_contract.builder.MLIRModuleBuilder` (the one
builder; every op method is the schema-generated one): 0.6 declared entry
arguments with type objects and finished a module with ``return_(...)`` and
``to_mlir()``; Lattice spells these ``add_sparse_input`` / ``add_input``,
``add_output`` and ``build``.  Both spellings work on the same builder::

    from lattice_contract.mlir import MLIRModuleBuilder, SparseTensorType

    b = MLIRModuleBuilder()
    x = b.argument("x", SparseTensorType(channels=16, dtype="f16"))
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f16", shape=(16, 3, 3, 3, 16))
    b.return_(b.subm_conv3d(input=x, weight=w, kernel_size=3))
    text = b.to_mlir()

A sparse argument's coordinates are physical at the declared ``stride``
(never pre-divided), as in every Lattice artifact.  ``argument(None, ...)``
names a module's only sparse input ``coords``, ``features``, ``active``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lattice_contract.builder import BuilderError, Value, tensor_type
from lattice_contract.builder import MLIRModuleBuilder as _Builder

__all__ = ["MLIRModuleBuilder", "SparseTensorType", "TensorType", "Value"]


@dataclass(frozen=True)
class SparseTensorType:
    """A sparse entry argument: ``channels`` feature columns of ``dtype`` at ``stride``."""

    channels: int
    dtype: str = "f32"
    stride: int | tuple[int, int, int] = 1


@dataclass(frozen=True)
class TensorType:
    """A dense entry argument: a builtin ranked tensor (``None`` or -1: a dynamic dimension)."""

    shape: Sequence[int | None]
    dtype: str = "f32"


class MLIRModuleBuilder(_Builder):
    """The Lattice builder with mlx-lattice 0.6's ``argument``, ``return_`` and ``to_mlir``."""

    def argument(self, name: str | None, type: SparseTensorType | TensorType) -> Value:
        """Add an entry argument of ``type`` (a sparse one adds its three ABI arrays)."""
        if isinstance(type, SparseTensorType):
            return self.add_sparse_input(
                name, channels=type.channels, dtype=type.dtype, stride=type.stride
            )
        if isinstance(type, TensorType):
            if name is None:
                raise BuilderError("argument: a tensor argument needs a name")
            return self.add_input(name, tensor_type(list(type.shape), type.dtype))
        raise BuilderError(f"argument: type must be a SparseTensorType or TensorType, got {type!r}")

    def return_(self, *values: Value, names: Sequence[str] | None = None) -> None:
        """Return ``values`` from ``@forward`` as ``names`` (default ``output``, ``output1``...)."""
        if not values:
            raise BuilderError("return_: give at least one value to return")
        if names is None:
            names = ["output" if i == 0 else f"output{i}" for i in range(len(values))]
        if len(names) != len(values):
            raise BuilderError(
                f"return_: {len(values)} value(s) but {len(names)} name(s); name each output"
            )
        for name, value in zip(names, values, strict=True):
            self.add_output(name, value)

    def to_mlir(self) -> str:
        """The module as MLIR text (:meth:`build`)."""
        return self.build()

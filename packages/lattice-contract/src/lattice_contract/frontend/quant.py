"""The packed affine weight both runtimes' ``QuantizedWeight`` are: fields, checks and geometry.

``mlx_lattice.ops.QuantizedWeight`` and ``torch_lattice.ops.QuantizedWeight``
hold the same triplet in the same stored layout (upstream's: ``weight``
``(K, C_out, words)`` when K = 1 else ``(K, words, C_out)``, ``scales`` and
``biases`` ``(K, C_out, groups)`` or ``(K, groups, C_out)``) and answer the
same questions about it; only decoding the words is array code.  This is the
shared part, generic in the runtime's array type: a runtime subclasses
:class:`PackedWeight` with its array class and adds its dequantization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import lattice_contract.frontend.op_errors as op_errors
from lattice_contract.dialect import check_logical_shape, packed_geometry

__all__ = ["PackedWeight"]


class _Array(Protocol):
    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...


A = TypeVar("A", bound=_Array)


@dataclass(frozen=True)
class PackedWeight(Generic[A]):
    """A packed affine int4 / int8 weight in the stored layout: ``weight``, ``scales``, ``biases``.

    ``shape`` is the logical (unpacked) shape when known (``(C_out, Kx, Ky,
    Kz, C_in)`` or ``(C_out, C_in)``).  Construction checks the triplet
    (dtypes, rank 3, the packed and grouped widths agreeing on one padded
    ``C_in``, and ``shape`` against it), so a malformed safetensors triplet is
    rejected before any op runs.
    """

    weight: A
    scales: A
    biases: A
    bits: int
    group_size: int
    shape: tuple[int, ...] | None = None

    array_type: ClassVar[type]
    """The runtime's array class (each subclass sets it)."""
    array_name: ClassVar[str]
    """How messages name it (``an mx.array``, ``a torch.Tensor``)."""

    def __post_init__(self) -> None:
        for name in ("weight", "scales", "biases"):
            if not isinstance(getattr(self, name), self.array_type):
                raise TypeError(f"QuantizedWeight.{name} must be {self.array_name}")
        w, s, b = self.weight, self.scales, self.biases
        op_errors.check_packed_triplet(
            (w.dtype, w.shape), (s.dtype, s.shape), (b.dtype, b.shape),
            self.bits, self.group_size, self.shape,
        )  # fmt: skip

    def geometry(self) -> tuple[int, int, int]:
        """``(K, C_out, padded C_in)`` of the stored triplet."""
        return packed_geometry(
            tuple(self.weight.shape), tuple(self.scales.shape), self.bits, self.group_size
        )

    @property
    def taps(self) -> int:
        """K: the number of tap matrices (1 for a linear weight)."""
        return int(self.weight.shape[0])

    @property
    def out_channels(self) -> int:
        """C_out."""
        return self.geometry()[1]

    @property
    def padded_in_channels(self) -> int:
        """C_in rounded up to the group size (the width the codes cover)."""
        return self.geometry()[2]

    def check_shape(self, shape: tuple[int, ...], op: str) -> None:
        """Raise ValueError (naming ``op``) unless this packing holds the logical ``shape``."""
        try:
            check_logical_shape(shape, self.geometry(), self.group_size)
        except ValueError as error:
            raise ValueError(f"{op}: {error}") from None

    def logical_shape(self) -> tuple[int, ...]:
        """The recorded logical shape, or a ValueError saying how to give one."""
        if self.shape is None:
            raise ValueError(
                "this packed weight does not record its logical shape (it was read from a "
                "file); use dequantize_as(shape) with the shape the consuming op expects"
            )
        return self.shape

"""The torch sparse value: physical coordinates, row features, an active count and a stride.

A :class:`SparseTensor` is the runtime form of the contract's sparse value
(``docs/semantics.md``).  Construction validates everything the contract forbids, so that no
kernel ever sees a malformed value; :meth:`SparseTensor.trusted` skips only the
two expensive checks (divisibility and duplicates) for callers that guarantee
them, such as our own ops, whose outputs are valid by construction.

The coordinates, stride and every kernel map built over them live in a
:class:`Support` object.  Values that share rows (``with_feats``, the output of
a submanifold conv, a left join) share the support, so a network that applies
several layers to one support builds each kernel map once per forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import torch
from lattice_contract.frontend import SparseTensorBase, given_features, sparse_errors

from torch_lattice._trace import traced
from torch_lattice.coords import CoordinateTable, canonical_order, inverse_permutation

__all__ = [
    "FLOAT_DTYPES",
    "SparseTensor",
    "Support",
    "canonical_order",
    "inverse_permutation",
]

Triple = tuple[int, int, int]

FLOAT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)
"""Feature dtypes the torch runtime accepts.

Artifacts carry f16, bf16 or f32; float64 is accepted here so that gradients
can be checked with ``torch.autograd.gradcheck``.
"""


class Support:
    """The rows of a sparse value (coordinates at a stride) and the maps built over them.

    ``maps`` is keyed by ``(op kind, kernel, stride, dilation, padding, target
    support)``, the target named by a weak reference (see ``kernel_map``).

    ``active`` is None for an ordinary support.  A captured call
    (:mod:`torch_lattice.triton.capture`) sizes every support to a fixed bound
    so that one CUDA graph serves every frame; there ``active`` is an int32
    ``(1,)`` device tensor holding how many leading rows are real, the rest
    being padding that the Triton map builders and conv kernels skip.  Such a
    support has no coordinate table (the reference path would read the
    padding as rows).
    """

    __slots__ = ("__weakref__", "_logical", "_table", "active", "coords", "maps", "stride")

    def __init__(
        self, coords: torch.Tensor, stride: Triple, active: torch.Tensor | None = None
    ) -> None:
        self.coords = coords
        self.stride = stride
        self.active = active
        self.maps: dict[tuple[Any, ...], Any] = {}
        self._logical: torch.Tensor | None = None
        self._table: CoordinateTable | None = None

    @property
    def num_rows(self) -> int:
        """Number of rows."""
        return int(self.coords.shape[0])

    @property
    def logical(self) -> torch.Tensor:
        """int64 (N, 4) rows ``(batch, x/sx, y/sy, z/sz)``."""
        self.require_unpadded("this layer needs the rows' coordinates as a table")
        if self._logical is None:
            c = self.coords.to(torch.int64)
            if self.stride != (1, 1, 1):
                s = torch.tensor((1, *self.stride), dtype=torch.int64, device=c.device)
                c = torch.div(c, s, rounding_mode="floor")
            self._logical = c
        return self._logical

    @property
    def table(self) -> CoordinateTable:
        """The sorted lookup table of this support's logical coordinates."""
        self.require_unpadded("this layer needs the rows' coordinates as a table")
        if self._table is None:
            self._table = CoordinateTable(self.logical)
        return self._table

    def require_unpadded(self, what: str) -> None:
        """Refuse a padded support (``active`` set) to ``what``, which would read its padding."""
        if self.active is not None:
            raise ValueError(
                f"{what}, which a captured call (torch_lattice.triton.capture_forward, "
                "capture_training_step) cannot do: its supports are padded to a fixed bound; "
                "only the Triton path's convolutions, window pools, batch norms and row-wise "
                "layers can be captured, so run this model eagerly"
            )

    @staticmethod
    def from_logical(logical: torch.Tensor, stride: Triple) -> Support:
        """A support from int64 logical rows (physical = logical * stride)."""
        s = torch.tensor((1, *stride), dtype=torch.int64, device=logical.device)
        coords = (logical * s).to(torch.int32)
        support = Support(coords, stride)
        support._logical = logical
        return support


def _read_active(value: object) -> int | None:
    """The entry of an int32 ``(1,)`` tensor; None for anything that is not a tensor."""
    if not isinstance(value, torch.Tensor):
        return None
    if value.dtype != torch.int32:
        raise sparse_errors.active_rows_dtype(value.dtype)
    if tuple(value.shape) != (1,):
        raise sparse_errors.active_rows_shape(value.shape)
    return int(value.item())


class SparseTensor(SparseTensorBase[torch.Tensor, torch.dtype]):
    """A sparse value: int32 (N, 4) physical coordinates, (N, C) features, a stride.

    ``SparseTensor(coords, feats, stride=1, active_rows=None)`` keeps only the
    first ``active_rows`` rows (all of them by default) after checking the contract's rules:
    dtypes and ranks, matching row counts, non-negative batch, every spatial
    coordinate divisible by the stride, and no duplicate rows.

    ``features`` and ``with_features`` are the same as ``feats`` and
    ``with_feats``, and the constructors take ``features=`` for ``feats``:
    the contract's (and spconv's) spelling (:mod:`lattice_contract.frontend.feature_names`).
    The rules of the parts and the plain views (``coords``, ``feats``,
    ``stride``, ``num_rows``, ``num_channels``, ``dtype``) are the contract's
    (:class:`~lattice_contract.frontend.sparse_tensor.SparseTensorBase`), shared with MLX;
    the coordinates and stride are the :class:`Support`'s, held here too so
    that each view is one attribute read.
    """

    __slots__ = ("_support",)

    FEATURE_DTYPES = FLOAT_DTYPES
    INDEX_DTYPE = torch.int32
    _read_active = staticmethod(_read_active)

    # Two overloads: the features are required, as feats (second, or feats=)
    # or as features=, so a type checker refuses SparseTensor(coords) as the
    # constructor does at run time.
    @overload
    def __init__(
        self,
        coords: torch.Tensor,
        feats: torch.Tensor,
        stride: int | Sequence[int] = 1,
        active_rows: int | torch.Tensor | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self,
        coords: torch.Tensor,
        *,
        features: torch.Tensor,
        stride: int | Sequence[int] = 1,
        active_rows: int | torch.Tensor | None = None,
    ) -> None: ...

    def __init__(
        self,
        coords: torch.Tensor,
        feats: torch.Tensor | None = None,
        stride: int | Sequence[int] = 1,
        active_rows: int | torch.Tensor | None = None,
        *,
        features: torch.Tensor | None = None,
    ) -> None:
        given = given_features(feats, features)
        support, checked = self._validate(coords, given, stride, active_rows, trusted=False)
        self._hold(support, checked)

    @overload
    @classmethod
    def trusted(
        cls,
        coords: torch.Tensor,
        feats: torch.Tensor,
        stride: int | Sequence[int] = 1,
        active_rows: int | torch.Tensor | None = None,
    ) -> SparseTensor: ...

    @overload
    @classmethod
    def trusted(
        cls,
        coords: torch.Tensor,
        *,
        features: torch.Tensor,
        stride: int | Sequence[int] = 1,
        active_rows: int | torch.Tensor | None = None,
    ) -> SparseTensor: ...

    @classmethod
    def trusted(
        cls,
        coords: torch.Tensor,
        feats: torch.Tensor | None = None,
        stride: int | Sequence[int] = 1,
        active_rows: int | torch.Tensor | None = None,
        *,
        features: torch.Tensor | None = None,
    ) -> SparseTensor:
        """Build without the divisibility and duplicate checks (the caller guarantees them)."""
        given = given_features(feats, features)
        support, checked = cls._validate(coords, given, stride, active_rows, trusted=True)
        return cls._make(support, checked)

    @classmethod
    def _make(cls, support: Support, feats: torch.Tensor) -> SparseTensor:
        """Internal constructor for op outputs (no checks): every op's result is made here."""
        obj = cls.__new__(cls)
        obj._hold(support, feats)
        return obj

    def _hold(self, support: Support, feats: torch.Tensor) -> None:
        """Hold the support and, for one-read views, its coordinates and stride."""
        self._support = support
        self._coords = support.coords
        self._stride = support.stride
        self._feats = feats

    @staticmethod
    def _as_array(value: object, name: str) -> torch.Tensor:
        """``value`` itself when it is a tensor (nothing is converted)."""
        if not isinstance(value, torch.Tensor):
            raise sparse_errors.not_an_array(name, value)
        return value

    @classmethod
    def _validate(
        cls, coords: Any, feats: Any, stride: Any, active_rows: Any, *, trusted: bool
    ) -> tuple[Support, torch.Tensor]:
        coords, feats, triple = cls._checked_parts(coords, feats, stride, active_rows)
        if feats.device != coords.device:
            raise ValueError(
                f"coords are on {coords.device} but feats on {feats.device}; "
                "move both to one device"
            )
        n = int(coords.shape[0])
        coords = coords.contiguous()
        support = Support(coords, triple)
        if n == 0:
            return support, feats
        if int(coords[:, 0].amin()) < 0:  # one reduction and one read (the contract's check)
            row = int((coords[:, 0] < 0).nonzero()[0].item())
            raise sparse_errors.negative_batch(row, coords[row].tolist())
        if trusted:
            return support, feats
        if triple != (1, 1, 1):
            s = torch.tensor(triple, dtype=torch.int32, device=coords.device)
            bad = (torch.remainder(coords[:, 1:], s) != 0).any(dim=1)
            if bool(bad.any()):
                row = int(bad.nonzero()[0].item())
                raise sparse_errors.not_divisible(row, coords[row].tolist(), triple)
        dup = support.table.duplicate_rows()
        if dup.numel():
            row = int(dup[0].item())
            raise sparse_errors.duplicate_row(row, coords[row].tolist())
        return support, feats

    # ------------------------------------------------------------------ attributes

    @property
    def support(self) -> Support:
        """The rows and their cached kernel maps (shared by values with the same rows)."""
        return self._support

    @property
    def active_rows(self) -> torch.Tensor:
        """int32 tensor of shape (1,) equal to the number of rows (values are exact)."""
        return torch.tensor([self.num_rows], dtype=torch.int32, device=self.device)

    @property
    def device(self) -> torch.device:
        """Device of coordinates and features."""
        return self._feats.device

    @property
    def batch_size(self) -> int:
        """One more than the largest batch index (0 when empty)."""
        if self.num_rows == 0:
            return 0
        return int(self.coords[:, 0].max().item()) + 1

    # ------------------------------------------------------------------ derived values

    @traced("sparse.with_features")
    def with_feats(self, feats: torch.Tensor) -> SparseTensor:
        """Same rows (and kernel-map cache), new features of shape (N, C')."""
        feats = self._checked_feats(feats)
        if feats.device != self.device:
            raise ValueError(f"feats are on {feats.device}, the value on {self.device}")
        return SparseTensor._make(self._support, feats)

    def to(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> SparseTensor:
        """Move to a device and/or convert the features (the map cache stays behind)."""
        coords = self.coords if device is None else self.coords.to(device)
        feats = self._feats
        if device is not None:
            feats = feats.to(device)
        if dtype is not None:
            if dtype not in FLOAT_DTYPES:
                raise TypeError(f"features must stay floating point, got {dtype}")
            feats = feats.to(dtype)
        if coords is self.coords:
            return SparseTensor._make(self._support, feats)
        return SparseTensor._make(Support(coords, self.stride), feats)

    def canonical(self) -> SparseTensor:
        """The same value with rows in canonical (batch, Morton) order."""
        perm = canonical_order(self.coords)
        return SparseTensor._make(Support(self.coords[perm], self.stride), self._feats[perm])

    def __add__(self, other: object) -> SparseTensor:
        """``x + y`` of coordinate-aligned values (same stride); see ``torch_lattice.cat``."""
        if not isinstance(other, SparseTensor):
            return NotImplemented
        from torch_lattice._algebra import add

        return add(self, other)

    def __repr__(self) -> str:
        return (
            f"SparseTensor(rows={self.num_rows}, channels={self.num_channels}, "
            f"stride={self.stride}, dtype={self.dtype}, device={self.device})"
        )

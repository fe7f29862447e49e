"""What both runtimes' kernel maps share: the tap-grouped pair table and the relation cache.

``mlx_lattice.kernel_map`` and ``torch_lattice.kernel_map`` build their maps
with their own array code (sorted packed keys on MLX, a coordinate table on
torch), but the result has one form, :class:`TapPairs`, and is memoised the
same way: in a support's dict of relations, under a key that names the
geometry and, for the target forms, the target support by a weak reference
(:func:`target_key`), through :func:`cached_relation`.

A weak reference keeps a cached map from holding another support alive, so
an encoder's and a decoder's supports form no reference cycle and are freed
by reference counting as soon as no value uses them.  A dead reference
equals only itself, so a new support at a recycled address never hits a
stale map.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["TapPairs", "cached_relation", "target_key"]

ArrayT = TypeVar("ArrayT")
BuiltT = TypeVar("BuiltT")
KeyT = TypeVar("KeyT", bound=Hashable)


@dataclass(frozen=True)
class TapPairs(Generic[ArrayT]):
    """Input/output row pairs of one op, grouped by tap (a runtime's ``KernelMap`` base).

    Pairs of tap k are ``in_idx[starts[k]:starts[k+1]]`` /
    ``out_idx[starts[k]:starts[k+1]]`` (taps in :mod:`lattice_contract.dialect.kernel`
    order).  ``identity_tap``, when set, is a tap whose pairs are every row
    onto itself (the centre of an odd submanifold kernel); they are not
    stored, and the executor applies that tap as one dense matmul.
    """

    in_idx: ArrayT
    out_idx: ArrayT
    starts: tuple[int, ...]
    num_in: int
    num_out: int
    identity_tap: int | None = None

    @property
    def volume(self) -> int:
        """Number of taps."""
        return len(self.starts) - 1

    def tap(self, k: int) -> tuple[ArrayT, ArrayT]:
        """``(input rows, output rows)`` of tap k (empty for the identity tap)."""
        a, b = self.starts[k], self.starts[k + 1]
        return self.in_idx[a:b], self.out_idx[a:b]  # type: ignore[index]

    def tap_count(self, k: int) -> int:
        """Number of pairs of tap k (every row for the identity tap)."""
        if k == self.identity_tap:
            return self.num_out
        return self.starts[k + 1] - self.starts[k]

    @property
    def num_pairs(self) -> int:
        """Stored pairs plus the implicit identity pairs."""
        return self.starts[-1] + (self.num_out if self.identity_tap is not None else 0)


def target_key(kind: str, target: object, *geometry: Hashable) -> tuple[Hashable, ...]:
    """The cache key of a relation onto ``target``: ``(kind, *geometry, weakref(target))``."""
    return (kind, *geometry, weakref.ref(target))


def cached_relation(
    relations: MutableMapping[KeyT, Any],
    key: KeyT,
    kind: type[BuiltT],
    build: Callable[[], BuiltT],
) -> BuiltT:
    """The ``kind`` cached under ``key``, else ``build()``, stored there first.

    ``kind`` also tells apart entries of other shapes that a runtime stores
    in the same dict (a generated support next to a plain map).
    """
    found = relations.get(key)
    if isinstance(found, kind):
        return found
    built = build()
    relations[key] = built
    return built

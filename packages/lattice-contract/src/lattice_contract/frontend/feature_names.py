"""The two spellings of a sparse value's features, declared once for both runtimes.

The contract's own spelling is ``features``: the schema's ``sparse.make`` and
``sparse.with_features`` operands, the ABI names ``<name>_features`` and the
program call keyword ``features=``.  The runtimes' ``SparseTensor`` grew up
with TorchSparse's ``feats`` (``x.feats``, ``x.with_feats(...)``,
``SparseTensor(coords, feats)``), while spconv and MinkowskiEngine users
expect ``x.features``.  Rather than rename either, both runtimes accept both
spellings wherever a user meets one of them:

* ``SparseTensor.features`` is ``SparseTensor.feats`` and
  ``with_features(...)`` is ``with_feats(...)`` (:class:`FeatureSpellings`,
  mixed into both runtimes' ``SparseTensor``);
* ``SparseTensor(coords, features=f)`` is ``SparseTensor(coords, f)`` (the
  constructors take ``features=`` where they take ``feats``,
  :func:`given_features`);
* a program call takes ``feats=`` where it takes ``features=``, and
  ``<name>_feats=`` where it takes ``<name>_features=``
  (:func:`feature_keyword_aliases`, used by
  :func:`lattice_contract.runtime.execute.bind_call`).

The canonical spelling is what the product prints (ABI names, messages,
``output_names``); the alias only ever reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "FEATS",
    "FEATURES",
    "FeatureSpellings",
    "feature_keyword_aliases",
    "given_features",
]

FEATURES = "features"
"""The contract's spelling (schema operands, ABI suffix ``_features``, call keywords)."""

FEATS = "feats"
"""TorchSparse's spelling, the runtimes' ``SparseTensor`` attribute; an accepted alias."""

A = TypeVar("A")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class _WithFeats(Protocol[T_co]):
    def with_feats(self, feats: Any) -> T_co: ...


class FeatureSpellings(Generic[A]):
    """``features`` / ``with_features``: the contract's spelling of ``feats`` / ``with_feats``.

    A mixin (no state, empty ``__slots__``) for a runtime's ``SparseTensor``,
    whose ``feats`` property and ``with_feats`` method it reads.
    """

    __slots__ = ()

    @property
    def feats(self) -> A:  # pragma: no cover - every runtime's SparseTensor overrides it
        """Features ``(N, C)``, row i belonging to coordinate row i."""
        raise NotImplementedError

    @property
    def features(self) -> A:
        """The same array as :attr:`feats`, under spconv's and MinkowskiEngine's name."""
        return self.feats

    def with_features(self: _WithFeats[T], features: Any) -> T:
        """:meth:`with_feats` under the contract's spelling (``sparse.with_features``)."""
        return self.with_feats(features)


def feature_keyword_aliases(canonical_names: Iterable[str], taken: Iterable[str]) -> dict[str, str]:
    """``{alias: canonical}`` for every name spelled with ``features`` (``feats=``, ``x_feats=``).

    ``canonical_names`` are the keywords a call takes (ABI names such as
    ``x_features`` and the one-input alias ``features``); an alias that is
    itself taken by another name of the call (``taken``) is left out, so an
    alias never shadows a real input.
    """
    used = set(taken)
    aliases: dict[str, str] = {}
    for name in canonical_names:
        if name == FEATURES:
            alias = FEATS
        elif name.endswith("_" + FEATURES):
            alias = name[: -len(FEATURES)] + FEATS
        else:
            continue
        if alias not in used:
            aliases[alias] = name
    return aliases


def given_features(feats: Any, features: Any) -> Any:
    """The features of a ``SparseTensor`` constructor call, given as ``feats`` or ``features=``.

    Exactly one of the two spellings must be given; giving both (even the same
    array) or neither is a ``TypeError`` naming the fix.
    """
    if features is None:
        if feats is None:
            raise TypeError(
                "SparseTensor needs its features: pass them second, as feats=, or as features="
            )
        return feats
    if feats is not None:
        raise TypeError(
            "feats and features= are two spellings of one argument; pass the features once"
        )
    return features

"""The kernel-map table and relation cache both runtimes share (shared_kernel_map)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
from lattice_contract.frontend import TapPairs, cached_relation, target_key


class _Support:
    """Something a weak reference can name, as a runtime's support is."""


def test_tap_pairs_slices_each_tap_and_counts_the_identity_tap() -> None:
    pairs = TapPairs(np.array([0, 1, 2]), np.array([1, 2, 0]), (0, 2, 2, 3), 3, 3, identity_tap=1)
    ins, outs = pairs.tap(0)
    assert ins.tolist() == [0, 1] and outs.tolist() == [1, 2]
    assert [pairs.tap_count(k) for k in range(pairs.volume)] == [2, 3, 1]
    assert pairs.num_pairs == 6


def test_cached_relation_builds_once_and_rebuilds_for_another_kind() -> None:
    relations: dict[tuple[object, ...], object] = {}
    calls: list[int] = []

    def build() -> list[int]:
        calls.append(1)
        return [len(calls)]

    first = cached_relation(relations, ("subm",), list, build)
    assert cached_relation(relations, ("subm",), list, build) is first
    relations[("conv",)] = "an entry of another shape"
    assert cached_relation(relations, ("conv",), list, build) == [2]
    assert len(calls) == 2


def test_target_keys_name_the_target_weakly() -> None:
    target = _Support()
    key = target_key("target_conv", target, (3, 3, 3), (1, 1, 1))
    assert key[:3] == ("target_conv", (3, 3, 3), (1, 1, 1))
    assert key == target_key("target_conv", target, (3, 3, 3), (1, 1, 1))
    alive = weakref.ref(target)
    del target
    gc.collect()
    assert alive() is None, "the key (still held here) kept its target alive"
    # A dead reference equals only itself: a new support never hits the old entry.
    assert key != target_key("target_conv", _Support(), (3, 3, 3), (1, 1, 1))

"""Checked attributes are remembered per op and typed value, and never mixed up.

A network call checks the same layer attributes dozens of times, so
``normalise_attrs`` keeps what passed.  What compares equal in Python but
means something else to the contract (``True`` and ``1``, ``-0.0`` and
``0.0``) must not share an entry, a list the caller may change later must
not be remembered, and a caller changing the returned dict must not change
the next call's.
"""

from __future__ import annotations

import math

import pytest
from lattice_contract.frontend import ops
from lattice_contract.frontend.op_attrs import normalise_attrs

CONV = ops.DECLARATIONS["conv3d"]
REINDEX = ops.DECLARATIONS["sparse_reindex"]


def test_the_same_attributes_give_equal_fresh_dicts() -> None:
    first = normalise_attrs(CONV, {"kernel_size": 3, "stride": (2, 2, 1)})
    first["stride"] = "changed by the caller"
    second = normalise_attrs(CONV, {"kernel_size": 3, "stride": (2, 2, 1)})
    assert second == {
        "kernel_size": (3, 3, 3),
        "stride": (2, 2, 1),
        "padding": (0, 0, 0),
        "dilation": (1, 1, 1),
    }
    assert second is not first


def test_a_bool_is_refused_after_the_equal_int_passed() -> None:
    normalise_attrs(CONV, {"kernel_size": 3, "stride": 1})
    with pytest.raises(TypeError, match="got a bool"):
        normalise_attrs(CONV, {"kernel_size": 3, "stride": True})
    with pytest.raises(ValueError, match=r"got \(1, True, 1\)"):
        normalise_attrs(CONV, {"kernel_size": (3, 3, 3), "stride": (1, True, 1)})
    normalise_attrs(CONV, {"kernel_size": (3, 3, 3), "stride": (1, 1, 1)})


def test_negative_zero_keeps_its_sign() -> None:
    zero = normalise_attrs(REINDEX, {"fill": 0.0})["fill"]
    negative = normalise_attrs(REINDEX, {"fill": -0.0})["fill"]
    assert math.copysign(1.0, zero) == 1.0
    assert math.copysign(1.0, negative) == -1.0


def test_a_list_is_checked_again_on_every_call() -> None:
    kernel = [3, 3, 3]
    assert normalise_attrs(CONV, {"kernel_size": kernel})["kernel_size"] == (3, 3, 3)
    kernel[1] = 0
    with pytest.raises(ValueError, match="kernel_size"):
        normalise_attrs(CONV, {"kernel_size": kernel})


def test_a_failed_check_is_not_remembered() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="kernel_size"):
            normalise_attrs(CONV, {"kernel_size": (3, 0, 3)})

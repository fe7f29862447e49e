"""The option checks both runtimes share (enum keywords, counts, geometry, eps, packing)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from lattice_contract.dialect import (
    GROUP_SIZES,
    QUANT_BITS,
    Join,
    PoolMode,
    Window,
    as_enum,
    check_quantization,
    int_triple,
    positive_float,
    positive_int,
    window,
)


def test_as_enum_takes_member_or_value() -> None:
    assert as_enum("max", PoolMode, "mode") is PoolMode.max
    assert as_enum(PoolMode.avg, PoolMode, "mode") is PoolMode.avg
    for bad in ("mean", PoolMode.max.name.upper(), 1, None, Join.inner):
        with pytest.raises(ValueError, match=r"mode must be one of 'max', 'avg', 'sum' \(or Pool"):
            as_enum(bad, PoolMode, "mode")


def test_positive_int() -> None:
    assert positive_int(3, "in_channels") == 3
    for bad in (0, -1, 2.0, True, "4", None):
        with pytest.raises(ValueError, match=r"in_channels must be a positive int, got"):
            positive_int(bad, "in_channels")


def test_int_triple_and_window() -> None:
    assert int_triple(2, "stride", minimum=1) == (2, 2, 2)
    assert int_triple([0, 1, 2], "padding", minimum=0) == (0, 1, 2)
    with pytest.raises(ValueError, match=r"stride must be >= 1 on every axis, got \(1, 0, 1\)"):
        int_triple((1, 0, 1), "stride", minimum=1)
    with pytest.raises(ValueError):
        int_triple((1, 2), "kernel_size", minimum=1)
    with pytest.raises(TypeError):
        int_triple(True, "kernel_size", minimum=1)

    assert window(3) == Window((3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1))
    # stride=None is a pooling module's "same as the kernel".
    assert window((2, 3, 1), None, 1, 2) == Window((2, 3, 1), (2, 3, 1), (1, 1, 1), (2, 2, 2))
    with pytest.raises(ValueError, match=r"padding must be >= 0"):
        window(3, 1, -1)
    with pytest.raises(ValueError, match=r"dilation must be >= 1"):
        window(3, 1, 0, 0)
    with pytest.raises(ValueError, match=r"kernel_size must be >= 1"):
        window(0)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0.0, ValueError),
        (-1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (True, TypeError),
        ("1e-5", TypeError),
        (None, TypeError),
    ],
)
def test_positive_float_rejects(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"layer_norm: eps must be a positive finite number"):
        positive_float(value, "eps", "layer_norm")


def test_positive_float_accepts() -> None:
    assert positive_float(1e-5, "eps", "batch_norm") == 1e-5
    value = positive_float(2, "voxel_size", "voxelize")
    assert value == 2.0 and isinstance(value, float)


def test_check_quantization() -> None:
    for bits in QUANT_BITS:
        for group in GROUP_SIZES:
            assert check_quantization(bits, group) == (bits, group)
    bad_bits: tuple[object, ...] = (3, 16, True, 4.0, "4")
    for bad in bad_bits:
        with pytest.raises(ValueError, match=r"bits must be 4 or 8"):
            check_quantization(bad, 32)
    bad_groups: tuple[object, ...] = (16, 48, 0, True, 32.0)
    for bad in bad_groups:
        with pytest.raises(ValueError, match=r"group_size must be one of 32, 64, 128"):
            check_quantization(4, bad)

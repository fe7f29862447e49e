"""SparseTensor: SPEC §4 validation one bad input at a time, canonical order, helpers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch_lattice import SparseTensor, canonical_order, inverse_permutation
from torch_lattice.coords import morton_keys
from torch_lattice.ops.reference import available_devices

DEVICES = available_devices()


def _good() -> tuple[torch.Tensor, torch.Tensor]:
    coords = torch.tensor([[0, 0, 0, 0], [0, 2, 4, 6], [1, -2, 0, 2]], dtype=torch.int32)
    return coords, torch.randn(3, 5)


def test_valid_value_and_attributes() -> None:
    coords, feats = _good()
    x = SparseTensor(coords, feats, stride=2)
    assert x.stride == (2, 2, 2) and x.num_rows == 3 and x.num_channels == 5
    assert x.active_rows.dtype == torch.int32 and x.active_rows.tolist() == [3]
    assert x.dtype == torch.float32 and x.batch_size == 2
    y = x.with_feats(torch.zeros(3, 7))
    assert y.support is x.support and y.num_channels == 7
    wide: Any = np.int64(2)  # deliberate: a NumPy integer where the annotation says int
    assert SparseTensor(coords, feats, stride=wide).stride == (2, 2, 2)  # as the ops accept it


def test_active_rows_keeps_prefix_only() -> None:
    coords, feats = _good()
    coords = torch.cat([coords, coords[:1]])  # a duplicate in the padding is never read
    feats = torch.cat([feats, feats[:1]])
    x = SparseTensor(coords, feats, stride=2, active_rows=torch.tensor([3], dtype=torch.int32))
    assert x.num_rows == 3 and torch.equal(x.coords, coords[:3])


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda c, f, kw: (c.long(), f, kw), TypeError, "int32"),
        (lambda c, f, kw: (c[:, :3], f, kw), ValueError, r"\(N, 4\)"),
        (lambda c, f, kw: (c, f.int(), kw), TypeError, "float"),
        (lambda c, f, kw: (c, f[:, 0], kw), ValueError, r"\(N, C\)"),
        (lambda c, f, kw: (c, f[:2], kw), ValueError, "rows"),
        (lambda c, f, kw: (c.tolist(), f, kw), TypeError, "torch.Tensor"),
        (
            lambda c, f, kw: (torch.cat([c, c[:1]]), torch.cat([f, f[:1]]), kw),
            ValueError,
            "duplicate",
        ),
        (
            lambda c, f, kw: (c * torch.tensor([-1, 1, 1, 1], dtype=torch.int32), f, kw),
            ValueError,
            "batch",
        ),
        (
            lambda c, f, kw: (c + torch.tensor([0, 1, 0, 0], dtype=torch.int32), f, kw),
            ValueError,
            "divisible",
        ),
        (lambda c, f, kw: (c, f, {**kw, "active_rows": 4}), ValueError, "active_rows"),
        (lambda c, f, kw: (c, f, {**kw, "active_rows": -1}), ValueError, "active_rows"),
        (lambda c, f, kw: (c, f, {**kw, "active_rows": torch.tensor([1])}), TypeError, "int32"),
        (
            lambda c, f, kw: (c, f, {**kw, "active_rows": torch.tensor([1, 2], dtype=torch.int32)}),
            ValueError,  # the same type as on MLX: an int32 array, of the wrong shape
            "shape",
        ),
        (lambda c, f, kw: (c, f, {**kw, "stride": 0}), ValueError, "stride"),
        (lambda c, f, kw: (c, f, {**kw, "stride": (1, 2)}), ValueError, "stride"),
        (lambda c, f, kw: (c, f, {**kw, "stride": (2, 0, 2)}), ValueError, ">= 1 on every axis"),
        (lambda c, f, kw: (c, f, {**kw, "stride": True}), TypeError, "an int or three ints"),
    ],
)
def test_bad_inputs_are_rejected_with_clear_errors(mutate, error, match) -> None:
    coords, feats = _good()
    c, f, kw = mutate(coords, feats, {"stride": 2})
    with pytest.raises(error, match=match):
        SparseTensor(c, f, **kw)


def test_trusted_skips_only_divisibility_and_duplicates() -> None:
    coords, feats = _good()
    odd = coords + torch.tensor([0, 1, 0, 0], dtype=torch.int32)
    SparseTensor.trusted(odd, feats, stride=2)  # the caller vouches for divisibility
    with pytest.raises(ValueError, match="batch"):
        SparseTensor.trusted(coords * torch.tensor([-1, 1, 1, 1], dtype=torch.int32), feats)
    with pytest.raises(TypeError, match="int32"):
        SparseTensor.trusted(coords.long(), feats)


def _reference_morton(row: list[int]) -> tuple[int, int]:
    x, y, z = ((v + (1 << 31)) & 0xFFFFFFFF for v in row[1:])
    code = 0
    for bit in range(31, -1, -1):
        code = (code << 3) | (((x >> bit) & 1) << 2) | (((y >> bit) & 1) << 1) | ((z >> bit) & 1)
    return row[0], code


@pytest.mark.parametrize("device", DEVICES)
def test_canonical_order_is_batch_then_morton(device: str) -> None:
    g = torch.Generator().manual_seed(0)
    coords = torch.randint(-(2**31), 2**31 - 1, (500, 4), generator=g, dtype=torch.int64)
    coords[:, 0] = torch.randint(0, 3, (500,), generator=g)
    coords[:50, 1:] = torch.randint(-3, 3, (50, 3), generator=g)  # many near the origin
    coords = coords.to(torch.int32)
    perm = canonical_order(coords.to(device)).cpu()
    expected = sorted(range(500), key=lambda i: _reference_morton(coords[i].tolist()))
    assert [_reference_morton(coords[i].tolist()) for i in perm.tolist()] == [
        _reference_morton(coords[i].tolist()) for i in expected
    ]
    inv = inverse_permutation(perm)
    assert torch.equal(perm[inv], torch.arange(500))
    high, low = morton_keys(coords[:1])
    ref = _reference_morton(coords[0].tolist())[1]
    assert (int(high) << 48) | int(low) == ref


@pytest.mark.parametrize("device", DEVICES)
def test_to_device_and_canonical(device: str) -> None:
    coords, feats = _good()
    x = SparseTensor(coords, feats, stride=2).to(device)
    assert x.device.type == device and x.coords.device.type == device
    c = x.canonical()
    assert torch.equal(c.coords.cpu(), coords[canonical_order(coords)])
    with pytest.raises(TypeError):
        x.to(dtype=torch.int32)

"""torch's device canonical order against the contract's NumPy reference.

``torch_lattice.canonical_order`` runs on the tensor's device (GPU included);
``lattice_contract.frontend.row_order`` is the one definition.  Both must give the
same permutation and the same Morton key halves, at the int32 limits too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lattice_contract.frontend import row_order
from torch_lattice import canonical_order
from torch_lattice.coords import morton_keys

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def _coords(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    wide = torch.randint(-(2**31), 2**31 - 1, (600, 4), generator=g, dtype=torch.int64)
    wide[:, 0] = torch.randint(0, 4, (600,), generator=g)
    near = torch.randint(-5, 5, (200, 4), generator=g)
    near[:, 0] = near[:, 0].abs() % 2
    limits = torch.tensor(
        [[0, -(2**31), -(2**31), -(2**31)], [0, 2**31 - 1, 2**31 - 1, 2**31 - 1], [2, 0, 0, 0]]
    )
    return torch.cat([wide, near, limits, near[:7]]).to(torch.int32)  # repeats: ties


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1])
def test_device_order_equals_the_reference(device: str, seed: int) -> None:
    coords = _coords(seed)
    got = canonical_order(coords.to(device)).cpu().numpy()
    np.testing.assert_array_equal(got, row_order.canonical_order(coords.numpy()))
    high, low = morton_keys(coords.to(device))
    _, ref_high, ref_low = row_order.morton_keys(coords.numpy())
    np.testing.assert_array_equal(high.cpu().numpy().astype(np.uint64), ref_high)
    np.testing.assert_array_equal(low.cpu().numpy().astype(np.uint64), ref_low)

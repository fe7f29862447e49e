"""torch CPU convolutions give bitwise-identical results at 1, 2 and 16 threads.

spconv cannot promise this; we do.  Two things used to break it: the schedule
(tap-major, output-major, segmented) was picked by thread count, and MKL's
sgemm splits a long reduction axis across threads (the output-major GEMM's K
is ``volume * C_in``, a weight gradient's the row count).  The tests run every
conv kind under every schedule, forward and backward, at each thread count
and compare bits; ``_fixed_mm`` is also checked against a float64 product.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch_lattice import SparseTensor, ops
from torch_lattice.ops.conv import _fixed_mm, schedule
from torch_lattice.ops.reference import random_sparse

THREADS = (1, 2, 16)


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _per_thread(run: Callable[[], list[torch.Tensor]]) -> dict[int, list[torch.Tensor]]:
    out = {}
    for threads in THREADS:
        torch.set_num_threads(threads)
        out[threads] = run()
    return out


def _assert_bitwise(results: dict[int, list[torch.Tensor]]) -> None:
    first = results[THREADS[0]]
    for threads in THREADS[1:]:
        for a, b in zip(first, results[threads], strict=True):
            assert torch.equal(a, b), f"{threads} threads differ from {THREADS[0]}"


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        (1, 256, 32),
        (64, 1728, 64),
        (606, 3456, 16),
        (8, 20000, 64),
        # a few rows at a short K: MKL's remainder rows follow the thread count on AMD EPYC
        (5, 64, 32),
        (19, 128, 16),
        (27, 16, 64),
    ],
)
def test_fixed_mm_is_thread_invariant_and_accurate(m: int, k: int, n: int) -> None:
    g = torch.Generator().manual_seed(k)
    a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    results = _per_thread(lambda: [_fixed_mm(a, b)])
    _assert_bitwise(results)
    exact = a.double() @ b.double()
    assert torch.allclose(results[1][0].double(), exact, atol=1e-3 * k**0.5, rtol=1e-5)


def _conv(kind: str, x: SparseTensor, w: torch.Tensor) -> SparseTensor:
    if kind == "subm":
        return ops.subm_conv3d(x, w, kernel_size=3)
    if kind == "conv_s2":
        return ops.conv3d(x, w, kernel_size=3, stride=2, padding=1)
    if kind == "transpose":
        return ops.conv_transpose3d(x, w, kernel_size=3, stride=1, padding=1)
    return ops.generative_conv_transpose3d(x, w, kernel_size=2, stride=1)


@pytest.mark.parametrize("mode", ["auto", "tap_major", "output_major", "segmented"])
@pytest.mark.parametrize("kind", ["subm", "conv_s2", "transpose", "generative"])
def test_every_conv_is_bitwise_equal_across_thread_counts(kind: str, mode: str) -> None:
    g = torch.Generator().manual_seed(7)
    x = random_sparse(g, 200, 64, batch=2, extent=8)  # K = 27 * 64 in output-major
    size = 2 if kind == "generative" else 3
    w = torch.randn(32, size, size, size, 64, generator=g) * 0.1

    def run() -> list[torch.Tensor]:
        feats = x.feats.clone().requires_grad_(True)
        weight = w.clone().requires_grad_(True)
        with schedule(mode):
            y = _conv(kind, x.with_feats(feats), weight)
            # A fixed upstream gradient: a loss computed here would add torch's own
            # thread-dependent reductions (mv, sum) to what is being tested.
            upstream = torch.randn(y.feats.shape, generator=torch.Generator().manual_seed(1))
            y.feats.backward(upstream)
        assert feats.grad is not None and weight.grad is not None
        return [y.coords, y.feats.detach(), feats.grad, weight.grad]

    _assert_bitwise(_per_thread(run))


def test_half_features_are_bitwise_equal_across_thread_counts() -> None:
    g = torch.Generator().manual_seed(3)
    x = random_sparse(g, 500, 64, extent=10, dtype=torch.float16)
    w = (torch.randn(64, 3, 3, 3, 64, generator=g) * 0.05).half()
    _assert_bitwise(_per_thread(lambda: [ops.subm_conv3d(x, w, kernel_size=3).feats]))

"""SyncBatchNorm under ``torch.autocast`` over two gloo ranks: half activations, global statistics.

One ``torchrun --nproc_per_node=2`` run of this file (bounded in time) puts
each case's rows on two CPU ranks, split unevenly (a rank with no rows, one
with one row), and trains one step of :class:`SyncBatchNorm` on them.  The
test compares it with one process running :class:`BatchNorm` on all the
rows under the same autocast (itself bit-equal to ``torch.nn.BatchNorm1d``
there): outputs and their dtype, input gradients, the summed weight and
bias gradients, and the running statistics (also checked against their
definitions in float64).  It counts the bytes autograd saves on each rank
with ``torch.autograd.graph.saved_tensors_hooks``: the half input and
per-channel vectors, no float32 (N, C) tensor -- the old path kept the
centred and the normalised rows in f32, four times the bf16 input's bytes,
and fails here.  Float32 features without autocast and float64 features
run the same comparison more tightly, and fewer than two rows over all
ranks fails on both ranks.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from ddp_worker import launch_two_ranks
from torch_lattice.nn import BatchNorm, SyncBatchNorm

HERE = Path(__file__).resolve()
TIMEOUT_S = 180
BF16, F16, F32, F64 = torch.bfloat16, torch.float16, torch.float32, torch.float64

# name -> (autocast dtype or None, feature dtype, rows on rank 0, rows on rank 1, channels)
CASES: dict[str, tuple[torch.dtype | None, torch.dtype, int, int, int]] = {
    "bf16-0-37": (BF16, BF16, 0, 37, 5),
    "bf16-1-36": (BF16, BF16, 1, 36, 5),
    "bf16-9-28": (BF16, BF16, 9, 28, 5),
    "bf16-600-400": (BF16, BF16, 600, 400, 32),
    "f16-1-36": (F16, F16, 1, 36, 5),
    "f16-0-37": (F16, F16, 0, 37, 5),
    "f16-600-400": (F16, F16, 600, 400, 32),
    # f32 features under autocast stay f32, as with BatchNorm
    "bf16-f32-features-9-28": (BF16, F32, 9, 28, 5),
    "f32-9-28": (None, F32, 9, 28, 5),
    "f32-0-37": (None, F32, 0, 37, 5),
    "f64-1-36": (None, F64, 1, 36, 5),
}


def _data(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """All ranks' rows of case ``name`` (far from zero mean) and the upstream gradient."""
    _, dtype, n0, n1, c = CASES[name]
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    x = torch.randn(n0 + n1, c, generator=g, dtype=F64) * 3.0 + torch.linspace(-4.0, 6.0, c)
    upstream = torch.randn(n0 + n1, c, generator=g, dtype=F64)
    return x.to(dtype), upstream.to(dtype)


def _norm(kind: type[BatchNorm], c: int, dtype: torch.dtype) -> BatchNorm:
    """A norm with f32 masters (f64 for f64 features) and non-trivial weight and bias."""
    norm = kind(c, momentum=0.3, dtype=F64 if dtype == F64 else F32)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, c))
        norm.bias.copy_(torch.linspace(-1.0, 1.0, c))
        norm.running_mean.fill_(0.5)
        norm.running_var.fill_(2.0)
    return norm


def _step(norm: BatchNorm, name: str, rows: slice) -> dict[str, Any]:
    """One training step on ``rows`` of the case: output, gradients, statistics, saved bytes."""
    autocast, *_ = CASES[name]
    x, upstream = _data(name)
    local = x[rows].clone().requires_grad_(True)
    params = {p.untyped_storage().data_ptr() for p in norm.parameters()}
    saved: list[tuple[torch.dtype, tuple[int, ...], int]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in params:
            saved.append((t.dtype, tuple(t.shape), t.untyped_storage().nbytes()))
        return t

    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with hooks, torch.autocast("cpu", dtype=autocast or BF16, enabled=autocast is not None):
        y = norm(local)
    (y.to(F64) * upstream[rows].to(F64)).sum().backward()
    assert local.grad is not None and norm.weight.grad is not None and norm.bias.grad is not None
    return {
        "y": y.detach(),
        "dx": local.grad,
        "dweight": norm.weight.grad.clone(),
        "dbias": norm.bias.grad.clone(),
        "running_mean": norm.running_mean.clone(),
        "running_var": norm.running_var.clone(),
        "saved": saved,
    }


def _rank_rows(name: str, rank: int) -> slice:
    _, _, n0, n1, _ = CASES[name]
    return slice(0, n0) if rank == 0 else slice(n0, n0 + n1)


def worker(out: Path) -> None:
    """One rank of the torchrun launch: every case's step, and the too-few-rows error."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    result: dict[str, Any] = {}
    for name, (_, dtype, _, _, c) in CASES.items():
        step = _step(_norm(SyncBatchNorm, c, dtype), name, _rank_rows(name, rank))
        for key in ("dweight", "dbias"):  # the ranks' shares, as DDP adds them
            dist.all_reduce(step[key])
        result[name] = step
    try:  # one row over both ranks: both raise, neither hangs
        SyncBatchNorm(3)(torch.ones(rank, 3, dtype=BF16))
        result["too_few"] = None
    except ValueError as exc:
        result["too_few"] = str(exc)
    torch.save(result, out / f"rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Launch the 2-rank run once for the module and collect both ranks' results."""
    out = tmp_path_factory.mktemp("syncbn_amp")
    launch_two_ranks(HERE, out, TIMEOUT_S)
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(2)]


def _close(got: torch.Tensor, want: torch.Tensor, ulps: float, what: str) -> None:
    """``got`` within ``ulps`` units of ``want``'s dtype, relative to the largest entry."""
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    unit = {BF16: 2.0**-8, F16: 2.0**-11, F32: 2.0**-24, F64: 2.0**-53}[want.dtype]
    scale = max(float(want.abs().max()), 1.0) if want.numel() else 1.0
    worst = float((got.to(F64) - want.to(F64)).abs().max()) if want.numel() else 0.0
    assert worst <= ulps * unit * scale, f"{what}: max |difference| {worst:.3g}"


@pytest.mark.parametrize("name", list(CASES))
def test_sync_batchnorm_equals_one_batchnorm_over_all_rows(
    ranks: list[dict[str, Any]], name: str
) -> None:
    autocast, dtype, n0, n1, c = CASES[name]
    want = _step(_norm(BatchNorm, c, dtype), name, slice(0, n0 + n1))
    rank0, rank1 = ranks[0][name], ranks[1][name]
    assert rank0["y"].shape == (n0, c) and rank1["y"].shape == (n1, c)
    # Half rows: the f32 arithmetic in another order, rounded once -- a unit or two.
    # f32 / f64 rows: sums over the ranks in another order.
    half = dtype in (BF16, F16)
    for key in ("y", "dx"):
        got = torch.cat([rank0[key], rank1[key]])
        assert got.dtype == dtype == want[key].dtype, key  # the features' dtype
        _close(got, want[key], 2.0 if half else 64.0, f"{name} {key}")
    for rank in (rank0, rank1):
        for key in ("dweight", "dbias", "running_mean", "running_var"):
            # f32 (or f64) masters and buffers, whatever the features' dtype
            assert rank[key].dtype == want[key].dtype == (F64 if dtype == F64 else F32)
            _close(rank[key], want[key], 64.0, f"{name} {key}")
    # An independent oracle for the statistics: their definitions in float64 over the
    # rows as stored, with the momentum 0.3 update of (0.5, 2.0).
    x = _data(name)[0].to(F64)
    mean, var = x.mean(0), x.var(0, unbiased=True)
    tol = 1e-12 if dtype == F64 else 1e-5
    for rank in (rank0, rank1):
        for key, want_stat in (
            ("running_mean", 0.35 + 0.3 * mean),
            ("running_var", 1.4 + 0.3 * var),
        ):
            torch.testing.assert_close(rank[key].to(F64), want_stat, atol=tol, rtol=tol)
    if autocast is None:
        return
    # The bytes autograd keeps on each rank: the rows as they came and per-channel vectors.
    for r, rank in enumerate((rank0, rank1)):
        rows = _rank_rows(name, r)
        n = rows.stop - rows.start
        plain = _step(_norm(BatchNorm, c, dtype), name, rows) if n >= 2 else None
        wide = [s for s in rank["saved"] if s[0] in (F32, F64) and len(s[1]) >= 2]
        if dtype == F32:
            # f32 features: the input itself is the only (N, C) tensor kept
            assert [s[1] for s in wide] == [(n, c)], rank["saved"]
            continue
        assert not wide, (name, r, rank["saved"])
        by_dtype = {t: sum(b for d, _, b in rank["saved"] if d == t) for t in (dtype, F32)}
        assert by_dtype[dtype] == n * c * dtype.itemsize, rank["saved"]
        assert by_dtype[F32] <= 4 * c * 4, rank["saved"]  # a few (C,) vectors
        if plain is not None:  # the half bytes BatchNorm (torch's kernel) keeps too
            assert by_dtype[dtype] == sum(b for d, _, b in plain["saved"] if d == dtype)


def test_fewer_than_two_rows_over_all_ranks_fails_on_every_rank(
    ranks: list[dict[str, Any]],
) -> None:
    for rank in ranks:
        assert rank["too_few"] is not None and "at least 2 rows over all ranks" in rank["too_few"]


if __name__ == "__main__":
    worker(Path(sys.argv[1]))

"""A captured training step (torch_lattice.triton.capture_training_step) against eager steps.

The oracle is a copy of the same model trained eagerly on the unpadded
batches with the same optimizer: a captured step pads every support to a
bound, counts the live rows only in its batch norms and gives the loss a
mask of the real rows, so after every step its loss, parameters, optimizer
state and batch norm statistics must be the eager copy's.  The network makes
supports every way a U-Net does (submanifold, 2x2x2 stride 2, centred 3x3x3
stride 2, transposed convs back onto a skip's rows) and trains a linear head
through batch norms, ReLUs, a residual sum and a concatenation.  Batches
fill the capture, hold two rows or a third of it, have negative coordinates
and two batch items; one reaches int32's edge and must change nothing.

On CPU the kernels run under ``TRITON_INTERPRET=1`` on small batches and
the padded step runs without graphs; with CUDA the same tests record and
replay the two graphs at full size, in f32 and under f16 autocast.
"""

from __future__ import annotations

import copy
import importlib.util
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from capture_helpers import HostReads, box_rows, sort_every_padded_map
from lattice_contract.dialect import Int32CoordinateError
from torch_lattice import SparseTensor, nn
from torch_lattice.ops.conv import schedule

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

from torch_lattice.triton import CapturedTrainingStep, capture_training_step

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
ROWS, EXTENT, C, CLASSES = (20000, 40, 16, 5) if CUDA else (40, 6, 3, 3)


def _block(conv: torch.nn.Module, c: int) -> nn.Sequential:
    return nn.Sequential(conv, nn.BatchNorm(c), nn.ReLU())


class SegNet(torch.nn.Module):
    """A small U-Net: every support-making layer of one, a linear head on the input's rows."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = _block(nn.SubmConv3d(C, 8, 3), 8)
        self.down = _block(nn.Conv3d(8, 12, 2, 2, bias=False), 12)
        self.mid = _block(nn.SubmConv3d(12, 12, 3), 12)
        self.centred = _block(nn.Conv3d(12, 12, 3, 2), 12)
        self.back = nn.TargetConvTranspose3d(12, 12, 2, 2, bias=False)
        self.up = _block(nn.TargetConvTranspose3d(12, 8, 2, 2, bias=False), 8)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x: SparseTensor) -> Any:
        a = self.stem(x)
        b = self.mid(self.down(a))
        b = b.with_feats(b.feats + self.back(self.centred(b), b).feats)  # residual
        up = self.up[0](b, a)
        up = self.up[2](self.up[1](up))
        return self.head(torch.cat([up.feats, a.feats], dim=1))  # one row per input row


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> Any:
    per_row = F.cross_entropy(logits.float(), labels, reduction="none")
    return (per_row * mask).sum() / mask.sum().clamp(min=1)


def _batch(seed: int, n: int, face: int | None = None) -> tuple[SparseTensor, torch.Tensor]:
    """``n`` rows of a box around the origin (see :func:`box_rows`), features and labels."""
    g = torch.Generator().manual_seed(seed)
    coords = box_rows(g, n, EXTENT, face)
    feats = torch.randn(n, C, generator=g)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    return SparseTensor(coords.to(DEVICE), feats.to(DEVICE)), labels.to(DEVICE)


def _eager_step(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    x: SparseTensor,
    y: torch.Tensor,
    autocast: torch.dtype | None,
) -> float:
    opt.zero_grad(set_to_none=True)
    with schedule("triton"), torch.autocast(DEVICE, dtype=autocast or torch.float32,
                                            enabled=autocast is not None):  # fmt: skip
        loss = masked_cross_entropy(model(x), y, torch.ones_like(y, dtype=torch.bool))
    loss.backward()
    opt.step()
    return float(loss.detach())


def _close(want: torch.Tensor, got: torch.Tensor, tol: float, what: str) -> None:
    want, got = want.detach(), got.detach()
    scale = max(float(want.float().abs().max()), 1.0) if want.numel() else 1.0
    error = float((want.float() - got.float()).abs().max()) if want.numel() else 0.0
    assert error <= tol * scale, f"{what}: max error {error:.3g} at scale {scale:.3g}"


def _state(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    found = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    names = {id(p): n for n, p in model.named_parameters()}
    for p, state in opt.state.items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                found[f"{names[id(p)]}:{key}"] = value
    return found


def _models(momentum: float) -> tuple[torch.nn.Module, torch.nn.Module, Any, Any]:
    torch.manual_seed(0)
    captured = SegNet().to(DEVICE).train()
    eager = copy.deepcopy(captured)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=momentum) for m in (captured, eager)]
    return captured, eager, opts[0], opts[1]


AUTOCAST = [None, pytest.param(torch.float16, marks=pytest.mark.skipif(
    not CUDA, reason="f16 autocast of the Triton kernels runs on CUDA"))]  # fmt: skip


@pytest.mark.parametrize("autocast", AUTOCAST, ids=["f32", "f16-autocast"])
def test_every_step_matches_an_eager_step(autocast: torch.dtype | None) -> None:
    _every_step_matches_an_eager_step(autocast)


def test_steps_on_sorted_padded_tiles_match_unsorted_eager_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Padding rows have no taps: sorted by tap pattern they fill tiles that do no work."""
    sorts = sort_every_padded_map(monkeypatch)
    _every_step_matches_an_eager_step(None)
    assert sorts  # the captured step did sort (the eager twin, unpadded, never does)


def _every_step_matches_an_eager_step(autocast: torch.dtype | None) -> None:
    model, twin, opt, twin_opt = _models(momentum=0.9)
    example, labels = _batch(0, ROWS // 2)
    step = capture_training_step(
        model, masked_cross_entropy, opt, example, labels, ROWS, autocast=autocast
    )
    assert isinstance(step, CapturedTrainingStep)
    # f32: the same kernels (tile shapes tuned per row count may sum in another order);
    # f16: half activations, whose rounding the two runs share only approximately.
    tol = 1e-4 if autocast is None else 2e-2
    for seed, n in [(1, ROWS), (2, ROWS // 4), (3, ROWS // 3), (4, ROWS // 2)]:
        x, y = _batch(seed, n)
        want = _eager_step(twin, twin_opt, x, y, autocast)
        got = step(x, y)
        assert abs(got - want) <= tol * max(abs(want), 1.0), (n, got, want)
        mine, theirs = _state(model, opt), _state(twin, twin_opt)
        assert mine.keys() == theirs.keys()
        for name, value in theirs.items():
            _close(value, mine[name], tol, f"{name} after a step on {n} rows")


def test_a_batch_at_int32s_edge_raises_the_eager_error_and_changes_nothing() -> None:
    """An indexed conv's rows leave int32 below -2^31: flagged on the device, nothing updated."""

    class Grown(torch.nn.Module):  # rows one cell around the input's, then back onto them
        def __init__(self) -> None:
            super().__init__()
            self.grow = _block(nn.FullConv3d(C, 4, 3, 1, 1), 4)
            self.back = nn.TargetConvTranspose3d(4, CLASSES, 3, 1, 1)

        def forward(self, x: SparseTensor) -> Any:
            return self.back(self.grow(x), x).feats

    torch.manual_seed(0)
    model = Grown().to(DEVICE).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    example, labels = _batch(0, ROWS // 2)
    step = capture_training_step(model, masked_cross_entropy, opt, example, labels, ROWS)
    before = {k: v.clone() for k, v in _state(model, opt).items()}
    edge, edge_labels = _batch(6, ROWS // 2, face=-(2**31))
    with pytest.raises(Int32CoordinateError) as eager, torch.no_grad(), schedule("triton"):
        model(edge)
    with pytest.raises(Int32CoordinateError) as replayed:
        step(edge, edge_labels)
    assert str(replayed.value) == str(eager.value)
    for name, value in _state(model, opt).items():
        assert torch.equal(value, before[name]), f"{name} changed on a refused batch"
    inside, inside_labels = _batch(7, ROWS // 2, face=-(2**31) + 2)
    assert step(inside, inside_labels) > 0  # just inside: it trains


def test_a_step_costs_one_host_read() -> None:
    model, _, opt, _ = _models(momentum=0.0)
    example, labels = _batch(0, ROWS // 2)
    step = capture_training_step(model, masked_cross_entropy, opt, example, labels, ROWS)
    x, y = _batch(8, ROWS // 3)
    with HostReads() as mode:
        step(x, y)
    assert mode.reads == ["tolist"]


def test_an_empty_batch_trains_nothing() -> None:
    """No rows: the masked loss is 0, the batch norms keep their statistics, SGD moves nothing."""
    model, _, opt, _ = _models(momentum=0.0)
    example, labels = _batch(0, ROWS // 2)
    step = capture_training_step(model, masked_cross_entropy, opt, example, labels, ROWS)
    before = {k: v.clone() for k, v in _state(model, opt).items()}
    x, y = _batch(9, 0)
    assert step(x, y) == 0.0
    for name, value in _state(model, opt).items():
        if not name.endswith("num_batches_tracked"):
            assert torch.equal(value, before[name]), f"{name} changed on an empty batch"


def test_bad_models_losses_and_batches_are_refused_by_name() -> None:
    model, _, opt, _ = _models(momentum=0.0)
    x, y = _batch(0, ROWS // 2)
    loss = masked_cross_entropy
    with pytest.raises(ValueError, match="capacity must hold the example's"):
        capture_training_step(model, loss, opt, x, y, ROWS // 2 - 1)
    with pytest.raises(ValueError, match=r"model\.train\(\)"):
        capture_training_step(copy.deepcopy(model).eval(), loss, opt, x, y, ROWS)
    adam = torch.optim.Adam(model.parameters(), capturable=False)
    with pytest.raises(ValueError, match="capturable=True"):
        capture_training_step(model, loss, adam, x, y, ROWS)
    with pytest.raises(TypeError, match="example must be a SparseTensor"):
        capture_training_step(model, loss, opt, x.feats, y, ROWS)  # type: ignore[arg-type]

    def unmasked(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> Any:
        return F.cross_entropy(logits.float(), labels)  # the padding's rows count

    with pytest.raises(ValueError, match="reduces over rows without the mask"):
        capture_training_step(model, unmasked, opt, x, y, ROWS)

    def per_row(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> Any:
        return F.cross_entropy(logits.float(), labels, reduction="none")

    with pytest.raises(TypeError, match="0-d floating tensor"):
        capture_training_step(model, per_row, opt, x, y, ROWS)

    class Coarse(SegNet):  # the coarse rows' features: not one row per input row
        def forward(self, x: SparseTensor) -> Any:
            return self.down(self.stem(x)).feats

    coarse = Coarse().to(DEVICE).train()
    coarse_opt = torch.optim.SGD(coarse.parameters(), lr=0.05)
    with pytest.raises(ValueError, match="one row per input row"):
        capture_training_step(coarse, loss, coarse_opt, x, y, ROWS)

    step = capture_training_step(model, loss, opt, x, y, ROWS)
    with pytest.raises(ValueError, match="one entry per row of the batch"):
        step(x, y[:-1])
    with pytest.raises(ValueError, match=f"capacity >= {ROWS + 1}"):
        step(*_batch(1, ROWS + 1))


def _rows_of(x: SparseTensor, y: torch.Tensor, n: int) -> tuple[SparseTensor, torch.Tensor]:
    return SparseTensor(x.coords[:n], x.feats[:n]), y[:n]


def test_headroom_bounds_the_step_and_a_batch_past_it_trains_eagerly() -> None:
    model, twin, opt, twin_opt = _models(momentum=0.9)
    example, labels = _batch(0, ROWS // 2)
    step = capture_training_step(
        model, masked_cross_entropy, opt, example, labels, ROWS, headroom=1.0
    )
    assert step._plan.bounds[0] < ROWS  # the 2x2x2 stride-2 layer's: the example's rows
    for x, y, past in [(*_rows_of(example, labels, ROWS // 3), False), (*_batch(1, ROWS), True)]:
        want = _eager_step(twin, twin_opt, x, y, None)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = step(x, y)
        assert any("larger headroom" in str(w.message) for w in seen) == past
        assert abs(got - want) <= 1e-4 * max(abs(want), 1.0)
        mine, theirs = _state(model, opt), _state(twin, twin_opt)
        for name, value in theirs.items():
            _close(value, mine[name], 1e-4, f"{name} after a step on {x.num_rows} rows")

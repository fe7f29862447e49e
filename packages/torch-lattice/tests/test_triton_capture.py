"""A captured forward (torch_lattice.triton.capture_forward) against the eager forward.

The oracle is the same model called eagerly on the unpadded frame: a captured
forward pads every support to a bound and keeps row counts on the device, so
its rows must be the eager rows exactly and its features the same kernels'
sums.  The network covers every way a support is made: submanifold, a 2x2x2
stride-2 conv (disjoint windows), a 3x3x3 stride-2 centred conv (coarsened
support, then a lookup), an indexed strided conv (``full_conv3d``), a max
pool, a transposed conv onto a skip's rows (the adjoint of the downsampling
map), a generative transposed conv (rows made directly) and a feature
concatenation.  Frames fill the capture exactly, hold one row or none, have
negative coordinates and two batch items, and one reaches int32's edge.

On CPU the kernels run under ``TRITON_INTERPRET=1`` on small frames and the
padded forward runs without a graph; with CUDA the same tests record and
replay a CUDA graph at full size.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import pytest
import torch
from capture_helpers import HostReads, box_rows, sort_every_padded_map
from lattice_contract.dialect import Int32CoordinateError
from torch_lattice import SparseTensor, nn
from torch_lattice.ops.conv import schedule

if importlib.util.find_spec("triton") is None:
    pytest.fail("the Triton path needs triton (requirements-dev.txt)", pytrace=False)

from torch_lattice.triton import CapturedForward, capture_forward, fuse_conv_bn_relu

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
ROWS, EXTENT, C = (20000, 40, 16) if CUDA else (48, 6, 3)
DTYPE = torch.float16 if CUDA else torch.float32


def _block(conv: torch.nn.Module, c: int) -> nn.Sequential:
    return nn.Sequential(conv, nn.BatchNorm(c), nn.ReLU())


class Net(torch.nn.Module):
    """Every support-making layer once; ``head`` picks what the forward returns."""

    def __init__(self, head: str = "segment") -> None:
        super().__init__()
        self.head = head
        self.stem = _block(nn.SubmConv3d(C, 8, 3), 8)
        self.down = _block(nn.Conv3d(8, 12, 2, 2, bias=False), 12)
        self.mid = _block(nn.SubmConv3d(12, 12, 3), 12)
        self.centred = nn.Conv3d(12, 12, 3, 2)
        self.pool = nn.MaxPool3d(2, 2)
        self.up = nn.TargetConvTranspose3d(12, 8, 2, 2, bias=False)
        self.full = nn.FullConv3d(16, 6, 3, 2, 1)
        self.grow = nn.GenerativeConvTranspose3d(6, 5, 2, 2)
        self.out = nn.SubmConv3d(16, 4, 3)
        g = torch.Generator().manual_seed(1)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm):  # far from the identity, so a missed fold shows
                with torch.no_grad():
                    m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
                    m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)

    def forward(self, x: SparseTensor) -> Any:
        a = self.stem(x)
        b = self.mid(self.down(a))
        coarse = self.pool(self.centred(b))
        up = self.up(b, a)
        cat = up.with_feats(torch.cat([up.feats, a.feats], dim=1))
        if self.head == "segment":
            return self.out(cat).feats  # one row per input row
        if self.head == "coarse":
            return coarse
        return self.grow(self.full(cat))


def _frame(seed: int, n: int, face: int | None = None) -> SparseTensor:
    """``n`` rows of a box around the origin (see :func:`box_rows`), random features."""
    g = torch.Generator().manual_seed(seed)
    coords = box_rows(g, n, EXTENT, face)
    feats = torch.randn(n, C, generator=g)
    return SparseTensor(coords.to(DEVICE), feats.to(DEVICE, DTYPE))


def _eager(model: torch.nn.Module, x: SparseTensor) -> Any:
    with torch.no_grad(), schedule("triton"):
        return model(x)


def _same(want: Any, got: Any) -> None:
    if isinstance(want, SparseTensor):
        assert isinstance(got, SparseTensor)
        assert got.stride == want.stride
        assert torch.equal(got.coords, want.coords)  # the same rows in the same order
        want, got = want.feats, got.feats
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(float(want.float().abs().max()), 1.0) if want.numel() else 1.0
    # The same kernels on the same rows; tile shapes tuned for other row counts may sum
    # the f16 products in another order.
    assert torch.allclose(got.float(), want.float(), atol=2e-3 * scale, rtol=2e-3)


def _net(head: str, fused: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    model = Net(head).to(DEVICE, DTYPE).eval()
    return fuse_conv_bn_relu(model) if fused else model


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("head", ["segment", "coarse", "grown"])
def test_every_frame_matches_the_eager_forward(head: str, fused: bool) -> None:
    model = _net(head, fused)
    captured = capture_forward(model, _frame(0, ROWS // 2), ROWS)
    for seed, n in [(1, ROWS), (2, 1), (3, 0), (4, ROWS // 3)]:
        x = _frame(seed, n)
        _same(_eager(model, x), captured(x))


def test_frames_on_sorted_padded_tiles_match_the_eager_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head's map is the stem's, used again: sorted, its padding rows tile apart."""
    sorts = sort_every_padded_map(monkeypatch)
    model = _net("segment", fused=True)
    captured = capture_forward(model, _frame(0, ROWS // 2), ROWS)
    assert sorts
    for seed, n in [(1, ROWS), (2, 1), (4, ROWS // 3)]:
        x = _frame(seed, n)
        _same(_eager(model, x), captured(x))


def test_a_frame_at_int32s_edge_raises_the_eager_error() -> None:
    """An indexed conv's candidates leave int32 below -2^31: flagged on the device, raised after."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.FullConv3d(C, 4, 3, 1)).to(DEVICE, DTYPE).eval()
    captured = capture_forward(model, _frame(0, ROWS // 2), ROWS)
    edge = _frame(6, ROWS // 2, face=-(2**31))
    with pytest.raises(Int32CoordinateError) as eager:
        _eager(model, edge)
    with pytest.raises(Int32CoordinateError) as replayed:
        captured(edge)
    assert str(replayed.value) == str(eager.value)
    inside = _frame(7, ROWS // 2, face=-(2**31) + 2)  # the same conv, just inside: no error
    _same(_eager(model, inside), captured(inside))


def test_a_frame_costs_one_host_read() -> None:
    """Only the status vector (flags and the output's rows) comes back; no layer reads."""
    model = _net("grown", True)
    captured = capture_forward(model, _frame(0, ROWS // 2), ROWS)
    x = _frame(8, ROWS // 2)
    with HostReads() as mode:
        captured(x)
    assert mode.reads == ["tolist"]
    with HostReads() as mode:  # the eager forward reads each generated support's size
        _eager(model, x)
    assert len(mode.reads) >= 4


def test_bad_frames_and_models_are_refused_by_name() -> None:
    model = _net("segment", True)
    captured = capture_forward(model, _frame(0, ROWS // 2), ROWS // 2)
    assert isinstance(captured, CapturedForward)
    with pytest.raises(ValueError, match=f"capacity >= {ROWS // 2 + 1}"):
        captured(_frame(1, ROWS // 2 + 1))
    x = _frame(2, 4)
    with pytest.raises(ValueError, match="channels, dtype, stride, device"):
        captured(x.with_feats(torch.zeros(4, C + 1, dtype=DTYPE, device=DEVICE)))
    with pytest.raises(TypeError, match="SparseTensor"):
        captured(x.feats)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="capture the torch model"):
        capture_forward(lambda f: f, x, 8)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        capture_forward(model, x, 0)
    with pytest.raises(ValueError, match=r"model\.eval"):
        capture_forward(_net("segment", False).train(), x, 8)

    class Centred(Net):  # subtracts the mean over rows: the padding would count
        def forward(self, x: SparseTensor) -> Any:
            f = super().forward(x)
            return f - f.mean(dim=0)

    torch.manual_seed(0)
    centred = Centred().to(DEVICE, DTYPE).eval()
    with pytest.raises(ValueError, match="reduces over rows"):
        capture_forward(centred, _frame(3, ROWS // 2), ROWS)

    class Pair(Net):
        def forward(self, x: SparseTensor) -> Any:
            return (x, x)

    with pytest.raises(TypeError, match="SparseTensor or a tensor"):
        capture_forward(Pair().to(DEVICE, DTYPE).eval(), x, 8)

    class Reordered(Net):  # rows of its own making: they would carry the padding
        def forward(self, x: SparseTensor) -> Any:
            return self.stem(x).canonical()

    with pytest.raises(ValueError, match="rows it made itself"):
        capture_forward(Reordered().to(DEVICE, DTYPE).eval(), x, 8)

    class Coarse(Net):  # a tensor of the coarse rows: not one row per input row
        def forward(self, x: SparseTensor) -> Any:
            return self.down(self.stem(x)).feats

    with pytest.raises(ValueError, match="return a SparseTensor"):
        capture_forward(Coarse().to(DEVICE, DTYPE).eval(), _frame(4, ROWS // 2), ROWS)

    class Global(Net):  # a reduction over rows, refused by name
        def forward(self, x: SparseTensor) -> Any:
            return nn.GlobalPool("avg")(x)

    with pytest.raises(ValueError, match="global_pool reduces over every row"):
        capture_forward(Global().to(DEVICE, DTYPE).eval(), x, 8)


def test_a_graph_needs_cuda() -> None:
    x = _frame(0, 4)
    on_cpu = SparseTensor(x.coords.cpu(), x.feats.cpu())
    with pytest.raises(ValueError, match="needs a CUDA device"):
        capture_forward(_net("segment", True), on_cpu, 8, graph=True)


def _rows_of(x: SparseTensor, n: int) -> SparseTensor:
    return SparseTensor(x.coords[:n], x.feats[:n])


def test_headroom_bounds_what_strided_layers_generate() -> None:
    """Bounded by the example's rows: a frame within them replays, one past them runs eagerly."""
    model = _net("segment", True)
    example = _frame(0, ROWS // 2)
    captured = capture_forward(model, example, ROWS, headroom=1.0)
    unbounded = capture_forward(model, example, ROWS)
    # The 2x2x2 stride-2 layer's output: the example's rows, not the input's bound.
    assert captured._plan.bounds[0] < unbounded._plan.bounds[0] == ROWS
    within = _rows_of(example, ROWS // 3)  # its generated rows are among the example's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(_eager(model, within), captured(within))
    past = _frame(1, ROWS)
    with pytest.warns(RuntimeWarning, match="larger headroom"):
        got = captured(past)
    _same(_eager(model, past), got)
    with pytest.raises(ValueError, match=r"headroom must be at least 1\.0"):
        capture_forward(model, example, ROWS, headroom=0.5)

"""A model's inference forward recorded once as a CUDA graph and replayed for every frame.

A network whose maps are built per frame (a new scan each time, the deployment
path) is bound by the host on a fast GPU: at 100k voxels the MinkUNet forward
issues about 150 kernels and reads each strided layer's output size back,
and the host spends as long issuing the work as the GPU spends running it.
A CUDA graph issues the whole forward in one call, but it needs fixed shapes
and no host reads, and every frame has its own number of rows.

So a captured forward pads: every support is sized to a bound (the input's
``capacity``; a support a strided layer generates, to its candidates, e.g.
the input's bound for a 2x2x2 stride-2 conv) and carries its real row count
on the device (``Support.active``).  The Triton map builders and conv kernels
skip the padding, so the real rows, their order and their features are those
of the eager forward; what a strided layer would read back (its output size,
its int32 range and box flags) stays on the device and is read once, after the
graph, with the output's row count; a flagged frame is run again eagerly,
which raises the layer's own error.

What can be captured: the Triton path's convolutions of every kind, fused or
not (:func:`torch_lattice.triton.fuse_conv_bn_relu`), eval BatchNorm,
activations, feature concatenation and other row-wise layers.  A layer that
reduces over rows (a global pool, a mean over every row) would count the
padding; :func:`capture_forward` compares the replay with the eager forward on
the example frame and refuses the model when they differ, and layers that need
the reference path's coordinate table refuse a padded support by name.

On a machine without CUDA (the tests, under ``TRITON_INTERPRET=1``) the same
padded forward runs eagerly, without a graph: everything but the recording.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from torch_lattice.ops.conv import schedule
from torch_lattice.sparse import SparseTensor, Support
from torch_lattice.triton.maps import RowBounds, deferred_checks, raise_flagged, row_bounds

__all__ = ["CapturedForward", "capture_forward"]

Output = SparseTensor | torch.Tensor


class Frame:
    """A captured call's input buffers: coordinates, features and the live row count.

    Sized once to ``capacity`` rows; each frame is checked against the
    example's kind (channels, dtype, stride, device) and copied into the
    first rows.  The rows past it keep what they held: the padded support's
    ``active`` count, on the device, is what makes them padding.
    """

    def __init__(self, example: SparseTensor, capacity: int) -> None:
        self.capacity = capacity
        self.kind = (example.num_channels, example.dtype, example.stride, example.device)
        self.device = example.device
        self.coords = torch.zeros(capacity, 4, dtype=torch.int32, device=example.device)
        self.feats = torch.zeros(
            capacity, example.num_channels, dtype=example.dtype, device=example.device
        )
        self.active = torch.zeros(1, dtype=torch.int32, device=example.device)

    def load(self, x: SparseTensor) -> int:
        """Copy frame ``x`` into the buffers (its first rows), after checking it; its rows."""
        if not isinstance(x, SparseTensor):
            raise TypeError(f"a captured call takes a SparseTensor, got {type(x).__name__}")
        n = x.num_rows
        if n > self.capacity:
            raise ValueError(
                f"the frame has {n} rows but the call was captured for at most "
                f"{self.capacity}; capture it again with capacity >= {n}"
            )
        found = (x.num_channels, x.dtype, x.stride, x.device)
        if found != self.kind:
            raise ValueError(
                "the frame's (channels, dtype, stride, device) are "
                f"{found}, the capture's {self.kind}; capture it again for this kind of frame"
            )
        with torch.no_grad():  # the buffers never join the frame's autograd graph
            self.coords[:n].copy_(x.coords)
            self.feats[:n].copy_(x.feats)
            self.active.fill_(n)
        return n

    def padded(self) -> SparseTensor:
        """The buffers as one padded sparse value (a new support: maps are built per call)."""
        support = Support(self.coords, self.kind[2], self.active)
        return SparseTensor._make(support, self.feats)


def flagged(values: list[int]) -> bool:
    """Whether any deferred check's info (4 values each) flags its layer."""
    return any(values[i + 1] or values[i + 2] for i in range(0, len(values), 4))


def sized_rows(plan: RowBounds, headroom: float) -> list[int]:
    """Row bounds from a call measured on the example: its generated supports' rows x ``headroom``.

    ``plan`` is the unbounded call's (every generated support at its
    candidate count); one read brings back their real counts.
    """
    counts = [int(v) for v in torch.cat(plan.counts).tolist()] if plan.counts else []
    return [max(1, math.ceil(count * headroom)) for count in counts]


def disagreement(want: torch.Tensor, have: torch.Tensor) -> tuple[float, float] | None:
    """(max error, max value) where a captured result is not the eager ``want``, else None.

    The tolerance (1% of the largest value, at least 0.01) admits the kernels'
    summation orders, which depend on the padded row counts; NaN disagrees.
    """
    if not want.numel():
        return None
    scale = float(want.detach().float().abs().max())
    error = float((want.detach().float() - have.detach().float()).abs().max())
    return None if error <= 1e-2 * max(scale, 1.0) else (error, scale)


def check_headroom(headroom: float | None) -> None:
    """Refuse a headroom below the example's own rows."""
    if headroom is not None and not headroom >= 1.0:
        raise ValueError(f"headroom must be at least 1.0 (the example's rows), got {headroom}")


def past_bounds(plan: RowBounds, counts: list[int], what: str) -> bool:
    """Whether a call's generated supports outgrew their bounds (then it runs eagerly, warned)."""
    i = plan.exceeded(counts)
    if i is None:
        return False
    warnings.warn(
        f"this call's generated support #{i + 1} has {counts[i]} rows, past the captured "
        f"{what}'s bound of {plan.bounds[i]} (the example's rows times its headroom); it ran "
        "eagerly. Capture again with a larger headroom (or none) if this recurs",
        RuntimeWarning,
        stacklevel=3,
    )
    return True


class CapturedForward:
    """``model``'s eval forward for frames of up to ``capacity`` rows, replayed as one graph.

    Made by :func:`capture_forward`.  Calling it with a :class:`SparseTensor`
    of the example's channels, dtype, stride and device returns what the
    model returns: a :class:`SparseTensor` (its real rows), or a per-row
    tensor of the input's rows (a segmentation head's logits).  Results are
    new tensors, not views of the graph's buffers.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        example: SparseTensor,
        capacity: int,
        graph: bool,
        headroom: float | None = None,
    ) -> None:
        self.model = model
        self.capacity = capacity
        self._frame = Frame(example, capacity)
        self._frame.load(example)
        self._sizes: list[int] | None = None
        if headroom is not None:  # one unbounded call on the example measures the rows
            self._sizes = sized_rows(self._forward()[3], headroom)
        self._graph: torch.cuda.CUDAGraph | None = None
        if graph:
            self._record()
        else:
            self._outputs, self._status, self._checks, self._plan = self._forward()

    # ------------------------------------------------------------------ per frame

    def __call__(self, x: SparseTensor) -> Output:
        """The model's output for frame ``x``: one copy in, one replay, one read."""
        n = self._frame.load(x)
        if self._graph is not None:
            self._graph.replay()
        else:
            self._outputs, self._status, self._checks, self._plan = self._forward()
        values = [int(v) for v in self._status.tolist()]  # the frame's one host read
        flags = values[: 4 * len(self._checks)]
        if flagged(flags):
            with torch.no_grad(), schedule("triton"):
                self.model(x)  # the eager forward raises the flagged layer's error, op named
            raise_flagged(self._checks, flags)  # (it did not: the same error, from the flags)
            raise AssertionError("a captured layer flagged a frame without an error to raise")
        if past_bounds(self._plan, values[len(flags) : -1], "forward"):
            with torch.no_grad(), schedule("triton"):
                eager: Output = self.model(x)
            return eager
        return self._unpad(self._outputs, values[-1], n)

    def _forward(self) -> tuple[Output, torch.Tensor, list[Any], RowBounds]:
        """The padded forward: outputs, the status vector, the checks, the row bounds.

        The status vector holds every deferred check's info, every generated
        support's real row count, then the output's rows.
        """
        with (
            torch.no_grad(),
            schedule("triton"),
            deferred_checks() as checks,
            row_bounds(self._sizes) as plan,
        ):
            out = self.model(self._frame.padded())
        if isinstance(out, SparseTensor):
            if out.support.active is None:  # rows made outside the padded supports
                raise ValueError(
                    "the model returns a SparseTensor whose rows it made itself (e.g. with "
                    "canonical() or a new SparseTensor), which would hold a capture's padding; "
                    "return the rows of its layers, or run it eagerly"
                )
            rows = out.support.active
        elif isinstance(out, torch.Tensor):
            rows = self._frame.active
        else:
            raise TypeError(
                "capture_forward takes models that return a SparseTensor or a tensor of the "
                f"input's rows, got {type(out).__name__}"
            )
        status = torch.cat([*(info for info, *_ in checks), *plan.counts, rows])
        return out, status, checks, plan

    def _unpad(self, out: Output, rows: int, n: int) -> Output:
        if isinstance(out, SparseTensor):
            coords = out.coords[:rows].clone()
            return SparseTensor._make(Support(coords, out.stride), out.feats[:rows].clone())
        if int(out.shape[0]) != self.capacity:
            raise ValueError(
                f"the model returns a tensor of {int(out.shape[0])} rows, not one row per input "
                "row; return a SparseTensor, whose rows a captured forward can find"
            )
        return out[:n].clone()

    def _record(self) -> None:
        """Warm up on a side stream (compiles, autotunes, caches constants), then record."""
        device = self._frame.device
        side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._forward()
        torch.cuda.current_stream(device).wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._outputs, self._status, self._checks, self._plan = self._forward()


def capture_forward(
    model: torch.nn.Module,
    example: SparseTensor,
    capacity: int,
    *,
    graph: bool | None = None,
    check: bool = True,
    headroom: float | None = None,
) -> CapturedForward:
    """Record ``model``'s inference forward for frames of up to ``capacity`` rows.

    ``example`` fixes the channels, dtype, stride and device of the frames;
    it must have at most ``capacity`` rows.  ``graph`` records a CUDA graph
    (the default on CUDA; ``False`` runs the same padded forward eagerly, as
    on CPU).  With ``check`` the captured forward's output on the example is
    compared with the eager forward's, and a model it cannot pad (one that
    reduces over rows) is refused.  The model must be in eval mode.  The
    graph holds its buffers for the object's lifetime, every support at its
    bound (a 2x2x2 stride-2 layer's output as many rows as its input's
    bound): more than an eager forward of ``capacity`` rows allocates.
    ``headroom`` bounds every support a strided layer generates by its rows
    on the example times ``headroom`` instead (at least 1.0; e.g. 1.25),
    which holds the coarse levels near their own rows instead of the finest
    level's and saves their time too; a frame whose layer needs more rows
    runs eagerly, with a ``RuntimeWarning``.
    """
    if not isinstance(example, SparseTensor):
        raise TypeError(f"example must be a SparseTensor, got {type(example).__name__}")
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 row, got {capacity}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"capture_forward takes a torch.nn.Module, got {type(model).__name__}; a loaded "
            "artifact program checks each input on the host (rows, duplicates), which a graph "
            "cannot do: capture the torch model it was exported from"
        )
    training = [name or type(model).__name__ for name, m in model.named_modules() if m.training]
    if training:
        raise ValueError(
            f"a captured forward is an inference forward, but {training[0]!r} is in training "
            "mode; call model.eval() first"
        )
    check_headroom(headroom)
    if graph is None:
        graph = example.device.type == "cuda"
    if graph and example.device.type != "cuda":
        raise ValueError(f"a CUDA graph needs a CUDA device, the example is on {example.device}")
    captured = CapturedForward(model, example, capacity, graph, headroom)
    if check:
        _compare(model, example, captured)
    return captured


def _compare(model: torch.nn.Module, example: SparseTensor, captured: CapturedForward) -> None:
    """Refuse a captured forward whose output on the example is not the eager one's."""
    with torch.no_grad(), schedule("triton"):
        eager = model(example)
    got = captured(example)
    if isinstance(eager, SparseTensor) and isinstance(got, SparseTensor):
        same_rows = torch.equal(eager.coords, got.coords)
        want, have = eager.feats, got.feats
    elif isinstance(eager, torch.Tensor) and isinstance(got, torch.Tensor):
        same_rows, want, have = True, eager, got
    else:
        raise TypeError(
            f"the eager forward returned a {type(eager).__name__}, the capture a "
            f"{type(got).__name__}"
        )
    if isinstance(eager, torch.Tensor) and want.shape != have.shape:
        raise ValueError(
            f"the model returns a tensor of {int(want.shape[0])} rows on the example, not one "
            f"per input row ({example.num_rows}); return a SparseTensor, whose rows a captured "
            "forward can find"
        )
    if not same_rows or want.shape != have.shape:
        raise ValueError(
            "the captured forward's rows differ from the eager forward's on the example; the "
            "model has a layer a captured forward cannot pad: run it eagerly"
        )
    found = disagreement(want, have)
    if found is not None:
        error, scale = found
        raise ValueError(
            f"the captured forward differs from the eager one on the example (max error "
            f"{error:.3g} against values up to {scale:.3g}); the model reduces over rows (a "
            "mean over every row, say), which counts a capture's padding: run it eagerly"
        )

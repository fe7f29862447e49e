"""A training step recorded once as CUDA graphs and replayed for every batch.

An eager training step is bound by the host as the inference forward is: at
100k voxels the MinkUNet's autocast step issues about 700 kernels, and the
host spends as long issuing them as the GPU spends running them.  The step
is captured with the padding of :mod:`torch_lattice.triton.capture`: every
support at a bound, its real row count on the device.  What training adds:

- **Batch norms** count the live rows only (:mod:`.batch_norm`): a training
  BatchNorm on a padded support sums its real rows, updates its running
  statistics on the device and writes its padding as zeros.  Convolutions
  write theirs as zeros too, so padding rows hold zeros through the network
  and every value stays finite.
- **The loss** is the user's, told which rows are real:
  ``loss_fn(output, target, mask)`` gets the model's per-row output over the
  capacity's rows, the target padded, and a bool mask of the real rows; it
  must reduce over the masked rows only.
- **Two graphs**: the gradients (forward, loss, backward), then the
  optimizer's step.  Between them one read brings back the loss and every
  deferred check's flags.  A flagged batch (a coordinate past int32, a box too wide
  to pack) never reaches the optimizer: the batch norms' statistics are
  put back and the eager forward raises the layer's own error.

On a machine without CUDA (the tests, under ``TRITON_INTERPRET=1``) the same
padded step runs eagerly, without graphs.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import torch

from torch_lattice.ops.conv import schedule
from torch_lattice.sparse import SparseTensor
from torch_lattice.triton.capture import (
    Frame,
    check_headroom,
    disagreement,
    flagged,
    past_bounds,
    sized_rows,
)
from torch_lattice.triton.maps import RowBounds, deferred_checks, raise_flagged, row_bounds

__all__ = ["CapturedTrainingStep", "LossFn", "capture_training_step"]

LossFn = Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss_fn(output, target, mask) -> loss``: a 0-d tensor over the rows ``mask`` marks."""


class CapturedTrainingStep:
    """One training step of ``model`` for batches of up to ``capacity`` rows, as two graphs.

    Made by :func:`capture_training_step`.  Calling it with a batch and its
    per-row target runs the forward, the loss, the backward pass and the
    optimizer's step, and returns the loss as a float (the one value read
    back).  The parameters' ``.grad`` tensors are the graph's own: do not
    set them to None between steps (``optimizer.zero_grad()`` is not needed:
    every step writes them anew).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: LossFn,
        optimizer: torch.optim.Optimizer,
        example: SparseTensor,
        target: torch.Tensor,
        capacity: int,
        autocast: torch.dtype | None,
        graph: bool,
        headroom: float | None = None,
    ) -> None:
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.capacity = capacity
        self._autocast = autocast
        self._frame = Frame(example, capacity)
        self._target = torch.zeros(
            (capacity, *target.shape[1:]), dtype=target.dtype, device=target.device
        )
        self._rows = torch.arange(capacity, device=example.device)
        # What a forward writes besides activations (batch norm statistics): kept
        # before each step, put back when a flagged batch is refused.
        self._buffers = [b for b in model.buffers() if b.numel()]
        self._saved = [b.clone() for b in self._buffers]
        self._params = [p for group in optimizer.param_groups for p in group["params"]]
        self._load(example, target)
        self._sizes = None if headroom is None else self._measure(headroom)
        self._grads_graph: torch.cuda.CUDAGraph | None = None
        self._step_graph: torch.cuda.CUDAGraph | None = None
        self._status = torch.zeros(1, dtype=torch.int32)
        self._checks: list[Any] = []
        self._plan = RowBounds()
        if graph:
            self._record()

    # ------------------------------------------------------------------ per batch

    def __call__(self, x: SparseTensor, target: torch.Tensor) -> float:
        """One step on batch ``x`` with per-row ``target``; the batch's loss."""
        self._load(x, target)
        loss = self._gradients_and_read(x, target)
        if self._step_graph is not None:
            self._step_graph.replay()
        else:
            self.optimizer.step()
        return loss

    def _gradients_and_read(self, x: SparseTensor, target: torch.Tensor) -> float:
        """The gradients of batch ``x`` (loaded) and the one read; the loss.

        A flagged batch is refused (the eager forward raises its error); one
        whose generated supports outgrew their bounds is run eagerly instead,
        its gradients summed into the same ``.grad`` tensors.
        """
        if self._grads_graph is not None:
            self._grads_graph.replay()  # writes every .grad anew
        else:
            self.optimizer.zero_grad(set_to_none=True)
            self._status, self._checks, self._plan = self._gradients()
        values = [int(v) for v in self._status.tolist()]  # the step's one host read
        flags = values[: 4 * len(self._checks)]
        if flagged(flags):
            self._restore_buffers()
            try:
                with torch.no_grad(), schedule("triton"):
                    self.model(x)  # the eager forward raises the flagged layer's error
            finally:
                self._restore_buffers()
            raise_flagged(self._checks, flags)
            raise AssertionError("a captured layer flagged a batch without an error to raise")
        if past_bounds(self._plan, values[len(flags) : -1], "training step"):
            return self._eager_gradients(x, target)
        return _float_of(values[-1])

    def _eager_gradients(self, x: SparseTensor, target: torch.Tensor) -> float:
        """The batch's gradients from an eager pass, into the captured ``.grad`` tensors."""
        self._restore_buffers()  # the padded pass moved the batch norms' statistics
        with torch.no_grad():
            for p in self._params:
                if p.grad is not None:
                    p.grad.zero_()  # the backward pass sums into them, in place
        rows = torch.ones(x.num_rows, dtype=torch.bool, device=x.device)
        with schedule("triton"), self._autocast_context():
            loss = self.loss_fn(self.model(x), target, rows)
        loss.backward()  # type: ignore[no-untyped-call]
        return float(loss.detach())

    def _load(self, x: SparseTensor, target: torch.Tensor) -> int:
        n = self._frame.load(x)
        if not isinstance(target, torch.Tensor) or tuple(target.shape) != (
            n,
            *self._target.shape[1:],
        ):
            found = tuple(target.shape) if isinstance(target, torch.Tensor) else type(target)
            raise ValueError(
                f"the target must have one entry per row of the batch, shape "
                f"{(n, *self._target.shape[1:])}, got {found}"
            )
        if target.dtype != self._target.dtype or target.device != self._target.device:
            raise ValueError(
                f"the target is {target.dtype} on {target.device}, the capture's "
                f"{self._target.dtype} on {self._target.device}; convert it first"
            )
        with torch.no_grad():
            self._target[:n].copy_(target)
        return n

    def _autocast_context(self) -> contextlib.AbstractContextManager[Any]:
        if self._autocast is None:
            return contextlib.nullcontext()
        # A graph replays the casts it recorded: autocast's weight cache must be off.
        return torch.autocast(self._frame.device.type, dtype=self._autocast, cache_enabled=False)

    def _gradients(self) -> tuple[torch.Tensor, list[Any], RowBounds]:
        """The padded forward, loss and backward: the status vector, the checks, the bounds.

        The status vector holds every deferred check's info, every generated
        support's real row count, then the loss's bits.
        """
        if self._buffers:
            torch._foreach_copy_(self._saved, self._buffers)  # the undo point of this step
        mask = self._rows < self._frame.active
        x = self._frame.padded()
        with (
            schedule("triton"),
            deferred_checks() as checks,
            row_bounds(self._sizes) as plan,
            self._autocast_context(),
        ):
            out = self.model(x)
            _check_output(out, x, self.capacity)
            loss = self.loss_fn(out, self._target, mask)
        _check_loss(loss)
        loss.backward()  # type: ignore[no-untyped-call]
        bits = loss.detach().float().reshape(1).view(torch.int32)
        status = torch.cat([*(info for info, *_ in checks), *plan.counts, bits])
        return status, checks, plan

    def _measure(self, headroom: float) -> list[int]:
        """Bounds for the generated supports: one unbounded forward on the loaded example."""
        with (
            torch.no_grad(),
            schedule("triton"),
            deferred_checks(),
            row_bounds(None) as plan,
            self._autocast_context(),
        ):
            self.model(self._frame.padded())
        sizes = sized_rows(plan, headroom)
        self._restore_buffers()  # its batch norms moved their statistics
        return sizes

    def _restore_buffers(self) -> None:
        if self._buffers:
            torch._foreach_copy_(self._buffers, self._saved)

    # ------------------------------------------------------------------ recording

    def _record(self) -> None:
        """Warm up, put the model and optimizer back as given, then record both graphs.

        The warm-up (two steps on the example, on a side stream) compiles and
        autotunes every kernel and lets the optimizer make its state, which a
        graph must find allocated.  Its updates are then undone: parameters
        and buffers get their values back and state the optimizer made is
        zeroed, which is where a first step starts (exact for Adam's moments
        and step count, and for SGD's momentum without dampening).
        """
        device = self._frame.device
        params = [p.detach().clone() for p in self._params]
        buffers = [b.detach().clone() for b in self._buffers]
        before = {id(t): t.clone() for t in _state_tensors(self.optimizer)}
        side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self.optimizer.zero_grad(set_to_none=True)
                self._gradients()
                self.optimizer.step()
        torch.cuda.current_stream(device).wait_stream(side)
        with torch.no_grad():
            for p, value in zip(self._params, params, strict=True):
                p.copy_(value)
            for b, value in zip(self._buffers, buffers, strict=True):
                b.copy_(value)
            for t in _state_tensors(self.optimizer):
                if id(t) in before:
                    t.copy_(before[id(t)])
                else:
                    t.zero_()
        self.optimizer.zero_grad(set_to_none=True)  # backward in the graph makes them
        self._grads_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._grads_graph):
            self._status, self._checks, self._plan = self._gradients()
        self._step_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._step_graph, pool=self._grads_graph.pool()):
            self.optimizer.step()

    # ------------------------------------------------------------------ the check

    def compare(self, example: SparseTensor, target: torch.Tensor) -> None:
        """Refuse a step whose loss, gradients or statistics differ from the eager ones.

        On ``example`` the captured gradients (and the batch norms' updated
        statistics) must be those of an eager forward and backward pass of
        the unpadded batch; neither changes the model or the optimizer.
        """
        self._load(example, target)
        captured_loss = self._gradients_and_read(example, target)
        captured = [None if p.grad is None else p.grad.clone() for p in self._params]
        stats = [b.clone() for b in self._buffers]
        self._restore_buffers()
        try:
            rows = torch.ones(example.num_rows, dtype=torch.bool, device=example.device)
            with schedule("triton"), self._autocast_context():
                out = self.model(example)
                if isinstance(out, torch.Tensor) and out.shape[:1] != rows.shape:
                    _refuse_output(out)  # a bound's rows, not the input's: its own rows
                loss = self.loss_fn(out, target, rows)
            wanted = [p for p in self._params if p.requires_grad]
            grads = dict(
                zip(
                    map(id, wanted),
                    torch.autograd.grad(loss, wanted, allow_unused=True),
                    strict=True,
                )
            )
            eager_stats = [b.clone() for b in self._buffers]
        finally:
            self._restore_buffers()
        pairs = [(loss.detach().float().cpu(), torch.tensor(captured_loss), "loss")]
        for p, have in zip(self._params, captured, strict=True):
            want = grads.get(id(p))
            if want is not None and have is not None:
                pairs.append((want, have, "gradients"))
        pairs += [(w, h, "batch norm statistics") for w, h in zip(eager_stats, stats, strict=True)]
        for want, have, what in pairs:
            found = disagreement(want, have)
            if found is not None:
                error, scale = found
                raise ValueError(
                    f"on the example, the captured step and an eager step disagree on the {what} "
                    f"(max error {error:.3g} "
                    f"against values up to {scale:.3g}); the model or the loss reduces over "
                    "rows without the mask (a global pool, an unmasked mean), which counts a "
                    "capture's padding: train it eagerly"
                )


def _float_of(bits: int) -> float:
    """The f32 whose bits were read back as an int32."""
    value: float = struct.unpack("<f", struct.pack("<i", bits))[0]
    return value


def _state_tensors(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, torch.Tensor):
                yield value


def _check_output(out: Any, x: SparseTensor, capacity: int) -> None:
    """The loss gets rows it can mask: the input's rows (a tensor, or a value on its rows)."""
    if isinstance(out, SparseTensor) and out.support.active is x.support.active:
        return
    if isinstance(out, torch.Tensor) and out.ndim >= 1 and int(out.shape[0]) == capacity:
        return
    _refuse_output(out)


def _refuse_output(out: Any) -> NoReturn:
    raise ValueError(
        "a captured training step needs an output with one row per input row (a segmentation "
        "head's logits, or a SparseTensor on the input's rows), which the loss's mask marks; "
        f"got {type(out).__name__}"
        + (f" of {int(out.shape[0])} rows" if isinstance(out, torch.Tensor) and out.ndim else "")
    )


def _check_loss(loss: Any) -> None:
    if not (isinstance(loss, torch.Tensor) and loss.ndim == 0 and loss.is_floating_point()):
        raise TypeError(
            "loss_fn must return a 0-d floating tensor (the batch's loss over the masked rows), "
            f"got {type(loss).__name__}"
            + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else "")
        )
    if not loss.requires_grad:
        raise ValueError("the loss does not depend on any parameter: nothing to train")


def capture_training_step(
    model: torch.nn.Module,
    loss_fn: LossFn,
    optimizer: torch.optim.Optimizer,
    example: SparseTensor,
    target: torch.Tensor,
    capacity: int,
    *,
    autocast: torch.dtype | None = None,
    graph: bool | None = None,
    check: bool = True,
    headroom: float | None = None,
) -> CapturedTrainingStep:
    """Record ``model``'s training step for batches of up to ``capacity`` rows.

    ``loss_fn(output, target, mask)`` gets the model's output over the
    capacity's rows, the target padded to them, and a bool ``mask`` of the
    real rows; it must reduce over those only, for instance::

        def loss_fn(logits, labels, mask):
            per_row = F.cross_entropy(logits, labels, reduction="none")
            return (per_row * mask).sum() / mask.sum().clamp(min=1)

    ``example`` and ``target`` fix the kind of batch (channels, dtype,
    stride, device; the target's trailing shape and dtype).  ``autocast``
    runs the forward and loss under ``torch.autocast`` in that dtype (a
    captured step cannot use ``GradScaler``, whose skipped steps read the
    host: prefer bfloat16).  ``graph`` records CUDA graphs (the default on
    CUDA; ``False`` runs the same padded step eagerly).  Recording warms up
    with two steps whose updates are undone.  With ``check``, the captured
    gradients on the example are compared with an eager backward pass, and a
    model or loss that reduces over the padding is refused.  The learning
    rate and other hyperparameters a graph recorded stay fixed: record again
    after changing them (or give the optimizer tensors it reads on the
    device, as torch's capturable optimizers allow).  Every support a strided
    layer generates is padded to its candidate count (a 2x2x2 stride-2
    layer's output to its input's bound), and the graphs hold those buffers;
    ``headroom`` (at least 1.0, e.g. 1.5) bounds each by its rows on the
    example times ``headroom`` instead, and a batch whose layer needs more
    rows runs eagerly, with a ``RuntimeWarning``.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"capture_training_step takes a torch.nn.Module, got {type(model).__name__}"
        )
    if not isinstance(example, SparseTensor):
        raise TypeError(f"example must be a SparseTensor, got {type(example).__name__}")
    if capacity < max(1, example.num_rows):
        raise ValueError(
            f"capacity must hold the example's {example.num_rows} rows and at least 1, "
            f"got {capacity}"
        )
    if not model.training:
        raise ValueError("a training step needs the model in training mode; call model.train()")
    if optimizer.defaults.get("capturable") is False:
        raise ValueError(
            f"{type(optimizer).__name__} reads its step count on the host, which a CUDA graph "
            "cannot replay; construct it with capturable=True"
        )
    if graph is None:
        graph = example.device.type == "cuda"
    if graph and example.device.type != "cuda":
        raise ValueError(f"a CUDA graph needs a CUDA device, the example is on {example.device}")
    check_headroom(headroom)
    step = CapturedTrainingStep(
        model, loss_fn, optimizer, example, target, capacity, autocast, graph, headroom
    )
    if check:
        step.compare(example, target)
    return step

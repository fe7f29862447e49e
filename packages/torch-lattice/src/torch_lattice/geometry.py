"""The fixed geometry profile: a learned child-occupancy model over an occupancy hierarchy.

A geometry codec sends a voxel cloud as its occupancy hierarchy (see
:mod:`torch_lattice.occupancy`): starting from the root, every occupied voxel
of a level sends the 8-bit code of which of its 2×2×2 children are occupied.
A learned codec replaces the flat 8 bits by an entropy code driven by a
predicted probability for each child; its rate is ``sum(-log2 p)`` over the
coded child bits.  :class:`GeometryModel` is that predictor, in the FOG style
(one network shared by every level, run from the coarsest level up):

* a submanifold conv stack reads the *parent* level: its rows and three
  features that say which level this is (:func:`level_features`), so the
  prediction depends on the geometry decoded so far, the level and nothing
  else,
* ``generative_conv_transpose3d(kernel_size=2, stride=2)`` expands every parent
  into its 8 candidate children (candidate ``k`` is child tap ``k``, the same
  bit order as the occupancy codes),
* a per-candidate head gives one occupancy logit,
* teacher forcing: the *true* child level is a second sparse input; its rows
  are gathered onto the candidates (``sparse_reindex``) as 0/1 labels, and the
  graph itself turns logits and labels into nats ``softplus((1 - 2y) * logit)``
  (= ``-ln p`` of the true bit, computed stably) and sums them per batch item
  into bits.

Level convention (what makes one network serve every level): a transition
``l -> l + 1`` is called with the parents at **stride 2** holding ``2 * parent``
and the children at **stride 1** holding the child rows, i.e. physical units of
the child level.  :func:`level_inputs` builds that pair.

The network is an *integer network* (see :class:`GeometryModel`): frozen, its
logits are bit-identical on every runtime and in every summation order, so a
file coded with torch decodes with MLX and back.

The model traces completely, so :func:`export_geometry_artifact` writes a
verified two-input artifact (inputs ``parents``, ``children``; outputs
``logits`` on the candidate rows and ``bits``, dense ``(1, 1)``) that the MLX
runtime executes for ``conformance geometry-profile``.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from lattice_contract.artifact import atomic_write_file
from safetensors.torch import load_file, save_file

from torch_lattice import nn, ops
from torch_lattice.occupancy import OccupancyHierarchy
from torch_lattice.sparse import SparseTensor

__all__ = [
    "ACT_MAX",
    "INPUT_FEATURES",
    "GeometryModel",
    "check_integer_network",
    "export_geometry_artifact",
    "hierarchy_bits",
    "level_features",
    "level_inputs",
    "load_geometry_model",
    "save_geometry_weights",
    "stacked_level_inputs",
]


# ---------------------------------------------------------------------------
# The integer network.

ACT_STEPS = 16
"""Activations live on the grid ``1/16`` (the frozen graph carries the integers ``16 h``)."""
ACT_MAX = 63
"""Largest integer activation: every activation is clamped to ``[0, 63]``."""
WEIGHT_MAX = 127
"""Largest integer weight on a layer's power-of-two grid."""
BIAS_MAX = 1 << 22
"""Largest integer bias on the same grid (keeps every sum below :data:`EXACT_LIMIT`)."""
EXACT_LIMIT = 1 << 24
"""float32 adds and multiplies integers below this magnitude exactly, in any order."""
INPUT_FEATURES = 3
"""Input channels of the parents: a constant 1, the level and the levels left (see below)."""
FEATURE_MAX_LEVELS = 31
"""Deepest hierarchy whose level features :func:`level_features` encodes (the codec's own
depth limit is lower; this one bounds the stem's inputs in :func:`check_integer_network`)."""


def level_features(level: int, levels: int) -> tuple[float, float, float]:
    """The parents' features of transition ``level -> level + 1`` of a ``levels``-deep cloud.

    ``(1, (level + 1) / 16, (levels - level) / 16)``: the constant lets the
    stem count occupied neighbours, the other two condition the one network
    on how coarse the level is and how many levels lie below it (a surface
    has about 4 children per parent until the sampling density runs out).
    The values are multiples of 1/16, so they enter the integer network
    exactly.
    """
    if not 1 <= levels <= FEATURE_MAX_LEVELS or not 0 <= level < levels:
        raise ValueError(
            f"level_features: need 0 <= level < levels <= {FEATURE_MAX_LEVELS}, got level {level} "
            f"of {levels}"
        )
    return (1.0, (level + 1) / ACT_STEPS, (levels - level) / ACT_STEPS)


def _ste_round(x: torch.Tensor) -> torch.Tensor:
    """Round half to even forward, identity backward (the straight-through estimator)."""
    return x + (torch.round(x) - x).detach()


def _fake_act(h: torch.Tensor) -> torch.Tensor:
    """An activation as the integer network holds it: ``clamp(round(16 h), 0, 63) / 16``."""
    return torch.clamp(_ste_round(h * ACT_STEPS), 0, ACT_MAX) / ACT_STEPS


def _quantised(
    weight: torch.Tensor, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Weights on a power-of-two grid ``2^-s`` (at most 127 steps), bias on ``2^-s / 16``.

    ``s`` is the finest shift that keeps ``max |w|`` within :data:`WEIGHT_MAX`
    steps.  The bias grid is the grid of the layer's products in the frozen
    graph (integer inputs, or level features on the 1/16 grid), so the bias
    adds exactly.  Gradients pass straight through the rounding.
    """
    peak = float(weight.detach().abs().max())
    shift = 0 if peak == 0 else math.floor(math.log2(WEIGHT_MAX / peak))
    step = 2.0**shift
    w = torch.clamp(_ste_round(weight * step), -WEIGHT_MAX, WEIGHT_MAX) / step
    if bias is None:
        return w, None
    bstep = step * ACT_STEPS
    return w, torch.clamp(_ste_round(bias * bstep), -BIAS_MAX, BIAS_MAX) / bstep


class _Ceiling(torch.nn.Module):
    """A constant :data:`ACT_MAX` in every channel of a support (the clamp's upper bound).

    A linear map with zero weight and bias 63, so the bound is a sparse value
    on the same rows that ``sparse_binary(minimum)`` can meet.
    """

    weight: torch.Tensor
    bias: torch.Tensor

    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__()
        self.register_buffer("weight", torch.zeros(channels, in_channels))
        self.register_buffer("bias", torch.full((channels,), float(ACT_MAX)))

    def forward(self, x: SparseTensor) -> SparseTensor:
        return x.with_feats(ops.linear(x.feats, self.weight, self.bias))


def _clamp(x: SparseTensor, ceiling: SparseTensor) -> SparseTensor:
    """``min(relu(x), 63)`` of integer features: exact on every runtime."""
    out: SparseTensor = ops.sparse_binary(
        x.with_feats(ops.activation(x.feats, kind="relu")), ceiling, op="minimum", join="left"
    )
    return out


def _round(x: SparseTensor) -> SparseTensor:
    return x.with_feats(ops.elementwise(x.feats, kind="round"))


class _Residual(torch.nn.Module):
    """``clamp(x + round(conv(clamp(round(conv(x))))))``, all submanifold 3×3×3."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.SubmConv3d(channels, channels, 3)
        self.conv2 = nn.SubmConv3d(channels, channels, 3)

    def forward(self, x: SparseTensor, ceiling: SparseTensor) -> SparseTensor:
        """The frozen integer block (``ceiling``: 63 on ``x``'s rows)."""
        h = _round(self.conv2(_clamp(_round(self.conv1(x)), ceiling)))
        return _clamp(ops.sparse_binary(x, h, op="add", join="left"), ceiling)

    def fake(self, x: SparseTensor) -> SparseTensor:
        """The same block in training units (activations ``n / 16``), quantisation simulated."""
        h = _fake_act(_subm(self.conv1, x).feats)
        u = _subm(self.conv2, x.with_feats(h)).feats
        return x.with_feats(_fake_act(x.feats + _ste_round(u * ACT_STEPS) / ACT_STEPS))


def _subm(layer: nn.SubmConv3d, x: SparseTensor) -> SparseTensor:
    w, b = _quantised(layer.weight, layer.bias)
    out: SparseTensor = ops.subm_conv3d(
        x, w, b, kernel_size=layer.kernel_size, dilation=layer.dilation
    )
    return out


class _Coder(torch.nn.Module):
    """Fixed constants of the rate computation, stored as buffers so the artifact carries them.

    ``indicator`` maps any feature row to 1 (weight 0, bias 1); ``flip`` maps a
    0/1 label ``y`` to ``1 - 2y``; ``to_bits`` scales nats to bits.
    """

    indicator_weight: torch.Tensor
    indicator_bias: torch.Tensor
    flip_weight: torch.Tensor
    flip_bias: torch.Tensor
    bits_weight: torch.Tensor

    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.register_buffer("indicator_weight", torch.zeros(1, in_channels))
        self.register_buffer("indicator_bias", torch.ones(1))
        self.register_buffer("flip_weight", torch.full((1, 1), -2.0))
        self.register_buffer("flip_bias", torch.ones(1))
        self.register_buffer("bits_weight", torch.full((1, 1), 1.0 / math.log(2.0)))

    def indicator(self, x: SparseTensor) -> SparseTensor:
        return x.with_feats(ops.linear(x.feats, self.indicator_weight, self.indicator_bias))

    def flip(self, labels: SparseTensor) -> SparseTensor:
        return labels.with_feats(ops.linear(labels.feats, self.flip_weight, self.flip_bias))

    def bits(self, nats: torch.Tensor) -> torch.Tensor:
        return ops.linear(nats, self.bits_weight)


class GeometryModel(torch.nn.Module):
    """Child-occupancy predictor of the fixed geometry profile: an integer network.

    ``channels`` is the width of every layer and ``blocks`` the number of
    residual blocks on the parent level (receptive field ``3 + 4 * blocks``
    parents per axis).  Inputs: ``parents`` (stride 2, :data:`INPUT_FEATURES`
    features from :func:`level_features`) and ``children`` (stride 1, any
    ``in_channels`` features; only their rows are read).

    Two modes, one set of parameters.  A new model *trains*: its forward
    simulates the integer network in float units (weights and activations
    rounded with straight-through gradients).  :meth:`freeze` returns the
    *frozen* model that is exported and run by the codec: every weight is an
    integer times a power of two, every activation an integer in ``[0, 63]``
    reached by ``round`` and a clamp, so each conv sum is an integer multiple
    of one grid below ``2^24`` steps and float32 computes it exactly in any
    summation order (Ballé, Johnston & Minnen, "Integer Networks for Data
    Compression with Latent-Variable Models", ICLR 2019).  Two runtimes
    therefore give bit-identical logits; :func:`check_integer_network` proves
    the bound from the weights.
    """

    def __init__(
        self, channels: int = 32, blocks: int = 2, *, in_channels: int = 1, frozen: bool = False
    ) -> None:
        super().__init__()
        for name, value, low in (("channels", channels, 1), ("blocks", blocks, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"GeometryModel: {name} must be an int >= {low}, got {value!r}")
        self.channels = channels
        self.frozen = frozen
        self.coder = _Coder(in_channels)
        self.ceiling_parents = _Ceiling(INPUT_FEATURES, channels)
        self.ceiling_candidates = _Ceiling(channels, channels)
        self.stem = nn.SubmConv3d(INPUT_FEATURES, channels, 3)
        self.blocks = torch.nn.ModuleList(_Residual(channels) for _ in range(blocks))
        self.expand = nn.GenerativeConvTranspose3d(channels, channels, 2, stride=2)
        self.head = nn.Linear(channels, channels)
        self.logit = nn.Linear(channels, 1)
        if not frozen:  # He-uniform: activations keep their scale, so the 1/16 grid resolves them
            for layer in (self.stem, *self._convs()[1:], self.head):
                fan_in = layer.weight[0].numel()
                torch.nn.init.uniform_(layer.weight, -math.sqrt(6 / fan_in), math.sqrt(6 / fan_in))

    def _convs(self) -> list[nn.SubmConv3d | nn.GenerativeConvTranspose3d]:
        convs: list[nn.SubmConv3d | nn.GenerativeConvTranspose3d] = [self.stem]
        for block in self.blocks:
            assert isinstance(block, _Residual)
            convs += [block.conv1, block.conv2]
        return [*convs, self.expand]

    def candidate_logits(self, parents: SparseTensor) -> SparseTensor:
        """One logit per candidate child (rows of the generative expansion, stride / 2)."""
        if not self.frozen:
            return self._fake_logits(parents)
        ceiling = self.ceiling_parents(parents)
        h = _clamp(_round(self.stem(parents)), ceiling)
        for block in self.blocks:
            h = block(h, ceiling)
        c = _round(self.expand(h))
        c = _clamp(c, self.ceiling_candidates(c))
        d = _round(self.head(c))
        out: SparseTensor = self.logit(_clamp(d, self.ceiling_candidates(d)))
        return out

    def _fake_logits(self, parents: SparseTensor) -> SparseTensor:
        h = parents.with_feats(_fake_act(_subm(self.stem, parents).feats))
        for block in self.blocks:
            assert isinstance(block, _Residual)
            h = block.fake(h)
        w, b = _quantised(self.expand.weight, self.expand.bias)
        c = ops.generative_conv_transpose3d(
            h, w, b, kernel_size=self.expand.kernel_size, stride=self.expand.stride
        )
        feats = _fake_act(c.feats)
        w, b = _quantised(self.head.weight, self.head.bias)
        feats = _fake_act(ops.linear(feats, w, b))
        w, b = _quantised(self.logit.weight, self.logit.bias)
        return c.with_feats(ops.linear(feats, w, b))

    @torch.no_grad()
    def freeze(self) -> GeometryModel:
        """The frozen integer model (a copy) that computes exactly what training simulated.

        Folding: an activation layer's frozen weight is ``16 w_q / s_in`` and its
        bias ``16 b_q`` (``s_in`` is 16 for integer activations, 1 for the level
        features the stem reads as they are); the logit layer's is ``w_q / 16``.
        """
        if self.frozen:
            return copy.deepcopy(self)
        out = GeometryModel(
            self.channels,
            len(self.blocks),
            in_channels=int(self.coder.indicator_weight.shape[1]),
            frozen=True,
        )
        out.load_state_dict(self.state_dict())
        layers: list[nn.SubmConv3d | nn.GenerativeConvTranspose3d | nn.Linear] = [
            *out._convs(),
            out.head,
        ]
        for i, layer in enumerate([*layers, out.logit]):
            w, b = _quantised(layer.weight, layer.bias)
            in_scale = 1.0 if i == 0 else float(ACT_STEPS)
            out_scale = 1.0 if layer is out.logit else float(ACT_STEPS)
            layer.weight.copy_(w * (out_scale / in_scale))
            assert layer.bias is not None and b is not None
            layer.bias.copy_(b * out_scale)
        check_integer_network(out)
        return out.eval()

    def candidate_nats(self, logits: SparseTensor, children: SparseTensor) -> SparseTensor:
        """``-ln p`` of each candidate's true occupancy (children rows present = occupied)."""
        labels = ops.sparse_reindex(self.coder.indicator(children), logits)
        signed = ops.sparse_binary(logits, self.coder.flip(labels), op="mul", join="left")
        return signed.with_feats(ops.activation(signed.feats, kind="softplus"))

    def forward(
        self, parents: SparseTensor, children: SparseTensor
    ) -> tuple[SparseTensor, torch.Tensor]:
        """``(logits, bits)``: candidate logits and the bits ``sum(-log2 p)`` per batch item."""
        logits = self.candidate_logits(parents)
        nats = self.candidate_nats(logits, children)
        # batch_size -1: one row per batch item present, so an artifact serves any batch
        bits = self.coder.bits(ops.global_pool(nats, mode="sum", batch_size=-1))
        return logits, bits


def _grid_shift(values: torch.Tensor, name: str) -> int:
    """The smallest ``s >= -64`` with ``values * 2^s`` all integers (dyadic float32 values).

    All-zero values lie on every grid: their shift is 0, so a layer that only
    adds its bias is judged by the bias alone.
    """
    if not bool(torch.any(values != 0)):
        return 0
    for shift in range(-64, 64):
        scaled = values * 2.0**shift
        if torch.equal(scaled, torch.round(scaled)):
            return shift
    raise ValueError(
        f"{name}: a weight is not a dyadic number of at most 64 fractional bits (an integer "
        "network's weights are integers on a power-of-two grid; freeze() puts them there)"
    )


def _constants(model: GeometryModel) -> dict[str, tuple[torch.Tensor, float]]:
    """The fixed buffers and the one value each must hold (the proof's premises)."""
    c = model.coder
    return {
        "ceiling_parents.weight": (model.ceiling_parents.weight, 0.0),
        "ceiling_parents.bias": (model.ceiling_parents.bias, float(ACT_MAX)),
        "ceiling_candidates.weight": (model.ceiling_candidates.weight, 0.0),
        "ceiling_candidates.bias": (model.ceiling_candidates.bias, float(ACT_MAX)),
        "coder.indicator_weight": (c.indicator_weight, 0.0),
        "coder.indicator_bias": (c.indicator_bias, 1.0),
        "coder.flip_weight": (c.flip_weight, -2.0),
        "coder.flip_bias": (c.flip_bias, 1.0),
        "coder.bits_weight": (c.bits_weight, float(torch.tensor(1.0 / math.log(2.0)))),
    }


def check_integer_network(model: GeometryModel) -> int:
    """Prove a frozen model's float32 sums exact; returns the largest sum in grid steps.

    The premises first: the clamp's ceilings are exactly :data:`ACT_MAX` (zero
    weight), so every activation is an integer in ``[0, 63]``, and the rate's
    constants hold their fixed values; these are constants, not learnt, and a
    file that changes them changes what the bound below means.  Then for every
    layer: all weights are finite integers on one power-of-two grid, the bias
    lies on the grid of the products, and ``sum |w| * max|input| + |b|`` in
    grid steps stays below :data:`EXACT_LIMIT`, so every partial sum of every
    output is an exactly representable float32 whatever the order.  Raises
    ``ValueError`` naming the layer or buffer otherwise.
    """
    if not model.frozen:
        raise ValueError("check_integer_network: freeze the model first (model.freeze())")
    for key, (buf, value) in _constants(model).items():
        if not bool(torch.all(buf == value)):
            raise ValueError(
                f"{key}: this fixed constant must be exactly {value} everywhere (it is the "
                "proof's premise, not a learnt value); re-export the model"
            )
    named: list[tuple[str, nn.SubmConv3d | nn.GenerativeConvTranspose3d | nn.Linear]]
    named = [("stem", model.stem)]
    for i, block in enumerate(model.blocks):
        assert isinstance(block, _Residual)
        named += [(f"blocks.{i}.conv1", block.conv1), (f"blocks.{i}.conv2", block.conv2)]
    named += [("expand", model.expand), ("head", model.head), ("logit", model.logit)]
    worst = 0
    for name, layer in named:
        w = layer.weight.detach().double().cpu()
        assert layer.bias is not None
        b = layer.bias.detach().double().cpu()
        if not (bool(torch.isfinite(w).all()) and bool(torch.isfinite(b).all())):
            raise ValueError(f"{name}: a weight or bias is infinite or NaN")
        # stem inputs: level features, multiples of 1/16 up to FEATURE_MAX_LEVELS/16
        in_shift, in_max = (4, FEATURE_MAX_LEVELS) if name == "stem" else (0, ACT_MAX)
        # the products' grid is 2^-shift (zero weights: the bias's own grid)
        any_weight = bool(torch.any(w != 0))
        shift = _grid_shift(w, name) + in_shift if any_weight else _grid_shift(b, name)
        steps = w.reshape(w.shape[0], -1).abs().sum(1) * 2.0**shift * in_max / 2.0**in_shift
        bias_steps = b * 2.0**shift
        if not torch.equal(bias_steps, torch.round(bias_steps)):
            raise ValueError(f"{name}: the bias is not on its products' grid (steps of 2^{-shift})")
        peak = float((steps + bias_steps.abs()).max())
        if not peak < EXACT_LIMIT:
            raise ValueError(
                f"{name}: a sum can reach {peak:.0f} grid steps, beyond float32's exact 2^24"
            )
        worst = max(worst, int(peak))
    return worst


# ---------------------------------------------------------------------------
# Inputs.


def _inputs(
    parents: torch.Tensor, children: torch.Tensor, features: torch.Tensor
) -> tuple[SparseTensor, SparseTensor]:
    doubled = parents.clone()
    doubled[:, 1:] *= 2
    ones_c = torch.ones((children.shape[0], 1), dtype=features.dtype, device=children.device)
    return (
        SparseTensor.trusted(doubled, features, stride=2),
        SparseTensor.trusted(children, ones_c, stride=1),
    )


def level_inputs(
    parents: torch.Tensor,
    children: torch.Tensor,
    *,
    level: int,
    levels: int,
    dtype: torch.dtype = torch.float32,
) -> tuple[SparseTensor, SparseTensor]:
    """The two sparse inputs of transition ``level -> level + 1`` of a ``levels``-deep cloud.

    Parents become stride-2 rows ``2 * parent`` carrying :func:`level_features`,
    children stride-1 rows with a constant feature (only their rows are read).
    The rows come from an occupancy hierarchy, which guarantees them unique,
    so the tensors are made with :meth:`SparseTensor.trusted`.
    """
    feats = torch.tensor(level_features(level, levels), dtype=dtype, device=parents.device)
    return _inputs(parents, children, feats.expand(parents.shape[0], -1).contiguous())


def stacked_level_inputs(
    hierarchies: Sequence[OccupancyHierarchy], *, dtype: torch.dtype = torch.float32
) -> tuple[SparseTensor, SparseTensor]:
    """Every transition of every hierarchy as one batch (batch index = transition number).

    Convolutions never mix batch items, so one forward pass over this pair
    computes the candidate nats of all levels of all clouds at once, which is
    how training runs.  Each input hierarchy must have one batch item (0); a
    hierarchy's depth is its cloud's level count.
    """
    parents: list[torch.Tensor] = []
    children: list[torch.Tensor] = []
    feats: list[torch.Tensor] = []
    item = 0
    for hierarchy in hierarchies:
        for level in range(hierarchy.depth):
            p = hierarchy.levels[level].clone()
            c = hierarchy.levels[level + 1].clone()
            if (p.shape[0] and int(p[:, 0].max()) != 0) or (c.shape[0] and int(c[:, 0].max())):
                raise ValueError("stacked_level_inputs needs hierarchies of one batch item (0)")
            p[:, 0] = item
            c[:, 0] = item
            parents.append(p)
            children.append(c)
            f = torch.tensor(level_features(level, hierarchy.depth), dtype=dtype, device=p.device)
            feats.append(f.expand(p.shape[0], -1))
            item += 1
    return _inputs(torch.cat(parents), torch.cat(children), torch.cat(feats).contiguous())


@torch.no_grad()
def hierarchy_bits(model: GeometryModel, hierarchy: OccupancyHierarchy) -> list[float]:
    """Bits of each transition ``l -> l + 1`` (coarsest first), one eager forward per level."""
    out: list[float] = []
    for level in range(hierarchy.depth):
        parents, children = level_inputs(
            hierarchy.levels[level],
            hierarchy.levels[level + 1],
            level=level,
            levels=hierarchy.depth,
        )
        _, bits = model(parents, children)
        out.append(float(bits.sum()))
    return out


# ---------------------------------------------------------------------------
# Weights and artifacts.


def save_geometry_weights(model: GeometryModel, path: str | os.PathLike[str]) -> None:
    """Write the state dict as safetensors (the artifact's storage keys)."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    atomic_write_file(path, lambda tmp: save_file(tensors, str(tmp)))


def load_geometry_model(
    weights: str | os.PathLike[str] | Mapping[str, torch.Tensor],
    *,
    device: str = "cpu",
    frozen: bool = True,
) -> GeometryModel:
    """A :class:`GeometryModel` rebuilt from its weights (width and depth read from shapes).

    ``frozen`` (the default: an artifact's weights) rebuilds the integer model
    and proves it exact with :func:`check_integer_network`; ``frozen=False``
    rebuilds a training model from training weights.
    """
    if isinstance(weights, Mapping):
        state = dict(weights)
    else:
        path = Path(weights)
        if not path.is_file():
            raise FileNotFoundError(f"geometry weights {str(path)!r} do not exist")
        state = load_file(str(path))
    try:
        channels = int(state["stem.weight"].shape[0])
        in_channels = int(state["coder.indicator_weight"].shape[1])
    except KeyError as exc:
        raise ValueError(
            f"these weights are not a GeometryModel's: the entry {exc.args[0]!r} is missing"
        ) from None
    stem = state["stem.weight"]
    if stem.ndim == 5 and int(stem.shape[-1]) != INPUT_FEATURES:
        raise ValueError(
            "these weights predate the level-conditioned integer model (the parents carry "
            f"{int(stem.shape[-1])} feature(s), not {INPUT_FEATURES}) and cannot be converted; "
            "use examples/geometry/model.lattice or train a model with examples/geometry/train.py"
        )
    blocks = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    model = GeometryModel(channels, blocks, in_channels=in_channels, frozen=frozen)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"these weights do not fit a GeometryModel: {exc}") from None
    if frozen:
        try:
            check_integer_network(model)
        except ValueError as exc:
            raise ValueError(
                f"these weights are not a frozen integer GeometryModel ({exc}); export a "
                "trained model with export_geometry_artifact, or load training weights with "
                "frozen=False"
            ) from None
    return model.to(device).eval()


def _example_inputs() -> tuple[SparseTensor, SparseTensor]:
    # A tiny two-parent transition: enough to trace every op and to check the
    # exported artifact against the eager model.
    parents = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0]], dtype=torch.int32)
    children = torch.tensor([[0, 0, 0, 1], [0, 1, 1, 0], [0, 2, 0, 0]], dtype=torch.int32)
    return level_inputs(parents, children, level=1, levels=2)


def export_geometry_artifact(model: GeometryModel, path: str | os.PathLike[str]) -> Any:
    """Export ``model`` as a verified artifact directory (inputs parents/children).

    Returns the exporter's report.  A training model is frozen first
    (:meth:`GeometryModel.freeze`), so the artifact is always the integer
    network.  The artifact's ``global_pool`` has ``batch_size = -1``: it
    computes the bits of every cloud in the batch.
    """
    from torch_lattice.export import save_lattice_model_artifact

    frozen = model if model.frozen else model.freeze()
    check_integer_network(frozen)
    return save_lattice_model_artifact(
        frozen.eval(),
        _example_inputs(),
        path,
        input_names=("parents", "children"),
        output_names=("logits", "bits"),
    )

"""The fixed geometry profile: a learned child-occupancy model over an occupancy hierarchy.

A geometry codec sends a voxel cloud as its occupancy hierarchy (see
:mod:`torch_lattice.occupancy`): starting from the root, every occupied voxel
of a level sends the 8-bit code of which of its 2×2×2 children are occupied.
A learned codec replaces the flat 8 bits by an entropy code driven by a
predicted probability for each child; its rate is ``sum(-log2 p)`` over the
coded child bits.  :class:`GeometryModel` is that predictor, in the FOG style
(one network shared by every level, run from the coarsest level up):

* a submanifold conv stack reads the *parent* level (its rows only: the
  features are replaced by a constant 1, so the prediction depends on the
  geometry decoded so far and nothing else),
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

The model traces completely, so :func:`export_geometry_artifact` writes a
verified two-input artifact (inputs ``parents``, ``children``; outputs
``logits`` on the candidate rows and ``bits``, dense ``(1, 1)``) that the MLX
runtime executes for ``conformance geometry-profile``.
"""

from __future__ import annotations

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
    "GeometryModel",
    "export_geometry_artifact",
    "hierarchy_bits",
    "level_inputs",
    "load_geometry_model",
    "save_geometry_weights",
    "stacked_level_inputs",
]


class _Residual(torch.nn.Module):
    """``x + conv(relu(conv(x)))`` followed by ReLU, all submanifold 3×3×3."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.SubmConv3d(channels, channels, 3)
        self.conv2 = nn.SubmConv3d(channels, channels, 3)
        self.act = nn.ReLU()

    def forward(self, x: SparseTensor) -> SparseTensor:
        h = self.conv2(self.act(self.conv1(x)))
        out: SparseTensor = self.act(ops.sparse_binary(x, h, op="add", join="left"))
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
    """Child-occupancy predictor of the fixed geometry profile (see the module docstring).

    ``channels`` is the width of every layer and ``blocks`` the number of
    residual blocks on the parent level (receptive field ``3 + 4 * blocks``
    parents per axis).  Inputs: ``parents`` (stride 2) and ``children``
    (stride 1), any features (only their rows are read).
    """

    def __init__(self, channels: int = 32, blocks: int = 2, *, in_channels: int = 1) -> None:
        super().__init__()
        for name, value, low in (("channels", channels, 1), ("blocks", blocks, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"GeometryModel: {name} must be an int >= {low}, got {value!r}")
        self.channels = channels
        self.coder = _Coder(in_channels)
        self.stem = nn.SubmConv3d(1, channels, 3)
        self.blocks = torch.nn.ModuleList(_Residual(channels) for _ in range(blocks))
        self.expand = nn.GenerativeConvTranspose3d(channels, channels, 2, stride=2)
        self.head = nn.Linear(channels, channels)
        self.logit = nn.Linear(channels, 1)
        self.act = nn.ReLU()

    def candidate_logits(self, parents: SparseTensor) -> SparseTensor:
        """One logit per candidate child (rows of the generative expansion, stride / 2)."""
        h = self.act(self.stem(self.coder.indicator(parents)))
        for block in self.blocks:
            h = block(h)
        c = self.act(self.expand(h))
        out: SparseTensor = self.logit(self.act(self.head(c)))
        return out

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


# ---------------------------------------------------------------------------
# Inputs.


def level_inputs(
    parents: torch.Tensor, children: torch.Tensor, *, dtype: torch.dtype = torch.float32
) -> tuple[SparseTensor, SparseTensor]:
    """The two sparse inputs of one transition from logical parent and child rows.

    Parents become stride-2 rows ``2 * parent``, children stride-1 rows, both
    with a constant feature (the model reads only rows).  The rows come from
    an occupancy hierarchy, which guarantees them unique, so the tensors are
    made with :meth:`SparseTensor.trusted`.
    """
    doubled = parents.clone()
    doubled[:, 1:] *= 2
    ones_p = torch.ones((parents.shape[0], 1), dtype=dtype, device=parents.device)
    ones_c = torch.ones((children.shape[0], 1), dtype=dtype, device=children.device)
    return (
        SparseTensor.trusted(doubled, ones_p, stride=2),
        SparseTensor.trusted(children, ones_c, stride=1),
    )


def stacked_level_inputs(
    hierarchies: Sequence[OccupancyHierarchy], *, dtype: torch.dtype = torch.float32
) -> tuple[SparseTensor, SparseTensor]:
    """Every transition of every hierarchy as one batch (batch index = transition number).

    Convolutions never mix batch items, so one forward pass over this pair
    computes the candidate nats of all levels of all clouds at once, which is
    how training runs.  Each input hierarchy must have one batch item (0).
    """
    parents: list[torch.Tensor] = []
    children: list[torch.Tensor] = []
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
            item += 1
    return level_inputs(torch.cat(parents), torch.cat(children), dtype=dtype)


@torch.no_grad()
def hierarchy_bits(model: GeometryModel, hierarchy: OccupancyHierarchy) -> list[float]:
    """Bits of each transition ``l -> l + 1`` (coarsest first), one eager forward per level."""
    out: list[float] = []
    for level in range(hierarchy.depth):
        parents, children = level_inputs(hierarchy.levels[level], hierarchy.levels[level + 1])
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
    weights: str | os.PathLike[str] | Mapping[str, torch.Tensor], *, device: str = "cpu"
) -> GeometryModel:
    """A :class:`GeometryModel` rebuilt from its weights (width and depth read from shapes)."""
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
    blocks = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    model = GeometryModel(channels, blocks, in_channels=in_channels)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ValueError(f"these weights do not fit a GeometryModel: {exc}") from None
    return model.to(device).eval()


def _example_inputs() -> tuple[SparseTensor, SparseTensor]:
    # A tiny two-parent transition: enough to trace every op and to check the
    # exported artifact against the eager model.
    parents = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 0]], dtype=torch.int32)
    children = torch.tensor([[0, 0, 0, 1], [0, 1, 1, 0], [0, 2, 0, 0]], dtype=torch.int32)
    return level_inputs(parents, children)


def export_geometry_artifact(model: GeometryModel, path: str | os.PathLike[str]) -> Any:
    """Export ``model`` as a verified artifact directory (inputs parents/children).

    Returns the exporter's report.  The artifact's ``global_pool`` has
    ``batch_size = -1``: it computes the bits of every cloud in the batch.
    """
    from torch_lattice.export import save_lattice_model_artifact

    return save_lattice_model_artifact(
        model.eval(),
        _example_inputs(),
        path,
        input_names=("parents", "children"),
        output_names=("logits", "bits"),
    )

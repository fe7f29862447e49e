"""The fixed geometry profile model: its rate against a direct computation, weights, export."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_lattice.geometry import (
    GeometryModel,
    check_integer_network,
    export_geometry_artifact,
    hierarchy_bits,
    level_features,
    level_inputs,
    load_geometry_model,
    save_geometry_weights,
    stacked_level_inputs,
)
from torch_lattice.occupancy import OccupancyHierarchy, candidate_children, occupancy_hierarchy


def hierarchy(coords: torch.Tensor, levels: int) -> OccupancyHierarchy:
    """``occupancy_hierarchy``, checked to be torch's own class at run time as it is typed."""
    h = occupancy_hierarchy(coords, levels)
    assert isinstance(h, OccupancyHierarchy), type(h)
    return h


def tiny_hierarchy(seed: int, count: int = 80, levels: int = 4) -> OccupancyHierarchy:
    g = torch.Generator().manual_seed(seed)
    coords = torch.zeros((count, 4), dtype=torch.int32)
    coords[:, 1:] = torch.randint(0, 1 << levels, (count, 3), generator=g)
    return hierarchy(coords, levels)


def model(seed: int = 0, channels: int = 8, blocks: int = 1) -> GeometryModel:
    torch.manual_seed(seed)
    m = GeometryModel(channels, blocks).eval()
    with torch.no_grad():  # a non-trivial head, so that logits spread over both signs
        assert m.logit.bias is not None
        m.logit.bias.fill_(0.3)
    return m


def direct_bits(
    m: GeometryModel, parents: torch.Tensor, children: torch.Tensor, level: int, levels: int
) -> float:
    """-log2 p of every candidate's true bit, from the logits alone, in float64 NumPy."""
    p, _ = level_inputs(parents, children, level=level, levels=levels)
    with torch.no_grad():
        logits = m.candidate_logits(p)
    rows = logits.coords.tolist()
    value = {tuple(r): float(v) for r, v in zip(rows, logits.feats[:, 0], strict=True)}
    occupied = {tuple(r) for r in children.tolist()}
    total = 0.0
    for row in candidate_children(parents).tolist():
        logit = value[tuple(row)]
        prob = 1.0 / (1.0 + math.exp(-logit))
        total -= math.log2(prob if tuple(row) in occupied else 1.0 - prob)
    return total


def test_bits_equal_a_direct_computation() -> None:
    h = tiny_hierarchy(0)
    m = model()
    per_level = hierarchy_bits(m, h)
    assert len(per_level) == h.depth
    for level in range(h.depth):
        expected = direct_bits(m, h.levels[level], h.levels[level + 1], level, h.depth)
        assert per_level[level] == pytest.approx(expected, rel=1e-5)
    assert sum(per_level) > 0


def test_logits_cover_exactly_the_candidates() -> None:
    h = tiny_hierarchy(1)
    parents, children = level_inputs(h.levels[2], h.levels[3], level=2, levels=h.depth)
    logits, bits = model()(parents, children)
    assert logits.stride == (1, 1, 1) and logits.num_channels == 1
    assert sorted(map(tuple, logits.coords.tolist())) == sorted(
        map(tuple, candidate_children(h.levels[2]).tolist())
    )
    assert bits.shape == (1, 1)


def test_only_rows_and_the_level_are_read() -> None:
    h = tiny_hierarchy(2)
    parents, children = level_inputs(h.levels[3], h.levels[4], level=3, levels=h.depth)
    m = model()
    _, reference = m(parents, children)
    noisy_c = children.with_feats(torch.randn(children.num_rows, 1) * 5)
    _, bits = m(parents, noisy_c)
    assert torch.equal(bits, reference)  # the children lend their rows only
    deeper, _ = level_inputs(h.levels[3], h.levels[4], level=3, levels=h.depth + 2)
    _, conditioned = m(deeper, children)
    assert not torch.equal(conditioned, reference)  # the level features condition the model
    assert parents.feats[0].tolist() == list(level_features(3, h.depth))


def test_stacked_levels_equal_per_level_calls() -> None:
    hs = [tiny_hierarchy(3), tiny_hierarchy(4, count=40)]
    m = model(channels=6)
    parents, children = stacked_level_inputs(hs)
    with torch.no_grad():
        nats = m.candidate_nats(m.candidate_logits(parents), children)
    per_item = torch.zeros(8, dtype=torch.float64)
    per_item.index_add_(0, nats.coords[:, 0].long(), nats.feats[:, 0].double())
    expected = hierarchy_bits(m, hs[0]) + hierarchy_bits(m, hs[1])
    assert (per_item / math.log(2.0)).tolist() == pytest.approx(expected, rel=1e-5)


def test_training_lowers_the_rate() -> None:
    torch.manual_seed(0)
    xy = torch.cartesian_prod(torch.arange(16), torch.arange(16))
    plane = torch.cat([torch.zeros(256, 1), xy, (xy[:, :1] + xy[:, 1:]) // 3], dim=1)
    # Typed as torch's class, the result goes straight to the geometry helpers (mypy checks it).
    parents, children = stacked_level_inputs([occupancy_hierarchy(plane.int(), 5)])
    m = GeometryModel(8, 1)
    opt = torch.optim.Adam(m.parameters(), lr=2e-2)
    losses = []
    for _ in range(10):
        loss = m.candidate_nats(m.candidate_logits(parents), children).feats.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert m.stem.weight.grad is not None and bool(m.stem.weight.grad.abs().sum() > 0)
    assert losses[-1] < 0.7 * losses[0]


def test_weights_round_trip(tmp_path: Path) -> None:
    m = model(channels=5, blocks=3)
    save_geometry_weights(m, tmp_path / "w.safetensors")
    loaded = load_geometry_model(tmp_path / "w.safetensors", frozen=False)
    assert loaded.channels == 5 and len(loaded.blocks) == 3 and not loaded.frozen
    h = tiny_hierarchy(6)
    assert hierarchy_bits(loaded, h) == hierarchy_bits(m, h)
    save_geometry_weights(m.freeze(), tmp_path / "frozen.safetensors")
    frozen = load_geometry_model(tmp_path / "frozen.safetensors")
    assert frozen.frozen
    assert hierarchy_bits(frozen, h) == hierarchy_bits(m, h)
    flat = load_geometry_model({k: v.clone() for k, v in m.state_dict().items()}, frozen=False)
    assert hierarchy_bits(flat, h) == hierarchy_bits(m, h)
    without_blocks = GeometryModel(4, 0)
    assert len(load_geometry_model(without_blocks.freeze().state_dict()).blocks) == 0


def test_frozen_model_computes_exactly_what_training_simulated() -> None:
    # The training forward runs on the same dyadic grids, so it is exact too:
    # freezing changes the units, not a single bit of any logit.
    m = model(channels=12, blocks=2)
    frozen = m.freeze()
    assert check_integer_network(frozen) > 0
    parents, _ = stacked_level_inputs([tiny_hierarchy(8, count=300, levels=6)])
    with torch.no_grad():
        a = m.candidate_logits(parents)
        b = frozen.candidate_logits(parents)
    assert torch.equal(a.coords, b.coords) and torch.equal(a.feats, b.feats)
    for layer in (frozen.stem, frozen.expand, frozen.head):  # integer weights on 2^-s grids
        w = layer.weight.detach().double()
        # the finest power-of-two grid with at most 127 steps up to the largest weight
        # (freezing only rescales by powers of two): the weights must sit on it exactly
        scale = 2.0 ** torch.floor(torch.log2(127 / w.abs().max()))
        assert torch.equal(w * scale, torch.round(w * scale))
        assert float((w * scale).abs().max()) <= 127


def test_integer_check_refuses_float_weights() -> None:
    m = model()
    with pytest.raises(ValueError, match="freeze the model first"):
        check_integer_network(m)
    with pytest.raises(ValueError, match="not a frozen integer GeometryModel"):
        load_geometry_model(m.state_dict())
    off_grid = m.freeze()
    with torch.no_grad():
        off_grid.head.weight[0, 0] += 1e-3  # off its grid: sums need ~2^30 steps
    with pytest.raises(ValueError, match=r"head: a sum can reach \d+ grid steps"):
        check_integer_network(off_grid)
    too_big = m.freeze()
    bias = too_big.stem.bias
    assert bias is not None
    with torch.no_grad():
        # exactness is scale-free: what counts is the span from the largest weight to the grid
        too_big.stem.weight.zero_()
        bias.zero_()
        too_big.stem.weight[0, 0, 0, 0, 0] = 1.0
        too_big.stem.weight[0, 0, 0, 1, 0] = 2.0**-23
    with pytest.raises(ValueError, match=r"stem: .* beyond float32's exact 2\^24"):
        check_integer_network(too_big)
    with torch.no_grad():
        bias[0] = 2.0**-40
    with pytest.raises(ValueError, match="stem: the bias is not on its products' grid"):
        check_integer_network(too_big)


@pytest.mark.parametrize(
    ("key", "index", "value", "message"),
    [
        ("ceiling_parents.bias", (0,), 1e7, r"ceiling_parents\.bias: this fixed constant"),
        ("ceiling_candidates.weight", (0, 0), 0.37, r"ceiling_candidates\.weight: this fixed"),
        ("coder.flip_weight", (0, 0), 2.0, r"coder\.flip_weight: this fixed constant"),
        ("head.weight", (0, 0), math.inf, "head: a weight or bias is infinite or NaN"),
        ("stem.bias", (1,), math.nan, "stem: a weight or bias is infinite or NaN"),
        ("blocks.0.conv2.weight", (0, 0, 0, 0, 0), 2.0**-70, r"blocks\.0\.conv2: a weight is not"),
        ("expand.weight", (0, 0, 0, 0, 0), 1e30, r"expand: a sum can reach \d+ grid steps"),
    ],
)
def test_hostile_weights_are_refused_naming_the_layer(
    key: str, index: tuple[int, ...], value: float, message: str
) -> None:
    """Every premise of the exactness proof is checked: constants, finiteness, grids, bounds."""
    state = {k: v.clone() for k, v in model(blocks=1).freeze().state_dict().items()}
    state[key][index] = value
    with pytest.raises(ValueError, match=message):
        load_geometry_model(state)


def test_a_layer_that_only_adds_its_bias_is_frozen_and_loaded() -> None:
    """All-zero weights with a bias: freeze() must not make a model its own check refuses."""
    m = model(channels=6)
    with torch.no_grad():
        m.stem.weight.zero_()
        m.logit.weight.zero_()
    frozen = m.freeze()  # runs check_integer_network
    assert (
        frozen.logit.bias is not None and float(frozen.logit.bias.detach()[0]) == 5 / 16
    )  # 0.3 on 1/16
    reloaded = load_geometry_model(frozen.state_dict())
    h = tiny_hierarchy(3)
    assert hierarchy_bits(reloaded, h) == hierarchy_bits(m, h)


def test_level_features_are_checked() -> None:
    assert level_features(0, 8) == (1.0, 1 / 16, 8 / 16)
    for level, levels in ((8, 8), (-1, 8), (0, 0), (0, 40)):
        with pytest.raises(ValueError, match="level_features"):
            level_features(level, levels)


def test_foreign_weights_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="do not exist"):
        load_geometry_model(tmp_path / "missing.safetensors")
    with pytest.raises(ValueError, match=r"stem\.weight"):
        load_geometry_model({"conv.weight": torch.zeros(1)})
    state = model().state_dict()
    state["head.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="do not fit"):
        load_geometry_model(state)
    old = model().freeze().state_dict()  # parents with one feature: before the level features
    old["stem.weight"] = old["stem.weight"][..., :1].contiguous()
    with pytest.raises(ValueError, match=r"predate the level-conditioned .* 1 feature\(s\), not 3"):
        load_geometry_model(old)
    with pytest.raises(ValueError, match="channels"):
        GeometryModel(0)


def test_stacked_inputs_need_single_item_hierarchies() -> None:
    coords = torch.tensor([[0, 1, 1, 1], [1, 2, 2, 2]], dtype=torch.int32)
    with pytest.raises(ValueError, match="one batch item"):
        stacked_level_inputs([hierarchy(coords, 2)])


def test_exported_artifact_reproduces_the_eager_bits(tmp_path: Path) -> None:
    from torch_lattice.artifact import load_lattice_program, native_artifact_execution_available

    if not native_artifact_execution_available():
        pytest.skip("the native lattice_mlir module is not built")
    m = model()
    report = export_geometry_artifact(m, tmp_path / "geo.lattice")
    assert report.input_names == ("parents", "children")
    assert report.output_names == ("logits", "bits")
    program = load_lattice_program(tmp_path / "geo.lattice")
    h = tiny_hierarchy(7, count=150, levels=5)
    eager = hierarchy_bits(m, h)
    for level in range(h.depth):
        with torch.no_grad():
            pair = level_inputs(h.levels[level], h.levels[level + 1], level=level, levels=h.depth)
            logits, bits = program(*pair)
        assert float(bits.sum()) == pytest.approx(eager[level], rel=1e-5)
        assert logits.num_rows == 8 * h.counts()[level]
    text = (tmp_path / "geo.lattice" / "graph.mlir").read_text()
    assert "lattice.generative_conv_transpose3d" in text and "lattice.sparse.reindex" in text
    assert np.isfinite(eager).all()

"""The mixing model: several context models combined by logistic mixing, then an APM.

The phase schedule of :mod:`.phases` codes the parents of a level phase by
phase (coordinate parity) and bit by bit, so when a child is coded the
decoder already knows some of its 26 neighbours *at the child level*: the
children of parents of earlier phases, the earlier siblings, and every child
of an absent neighbour parent (empty for sure).  Each neighbour is in one of
three states, empty, occupied or unknown, and the models read those states:

* ``axes``: per axis, the unordered pair of states of the two face
  neighbours along it (6 values, 216 patterns), with the known occupied
  siblings and the child offset: a plane shows as occupied neighbours along
  two axes;
* ``far``: the same pairs two children away (the same child of the
  face-neighbour parents) with ``axes``: where a flat face continues;
* ``counts``: occupied and unknown counts of the face, edge and corner
  neighbours;
* ``side``: occupied counts of the 9 neighbours on the child's outward side
  along each axis;
* ``halves``: per axis, whether the known children of the neighbouring
  parents lie in the child's half of their parents, the other half or both
  (which half of a parent a surface passes through);
* ``parent``: the parent level: occupied neighbour parents, the parent's
  face and edge neighbours on the child's outward side, the child offset;
* ``exact`` and ``pexact``: the full pattern of the 26 child-level states,
  and of the 26 neighbour parents with the known siblings, hashed to 2^20
  entries each: the exact repeats LZMA exploits on flat and regular faces.

Each model keeps integer counts per context and turns them into a 12-bit
probability.  After each chunk, a context whose count is past :data:`LIMIT`
is halved once (so busy contexts track drift); a chunk can add hundreds of
bits to one context, so a count may stand well above LIMIT until the next
halving, and halving more would change the bitstream.  Two mixers add their
``stretch`` values with weights chosen by small contexts (the neighbour
states known; the child offset, siblings and parent density) and learnt
online, PAQ style; their outputs are averaged in the stretch domain, and an
adaptive probability map (counts per face-neighbour context and quantised
mixed probability) refines the result.  All arithmetic is integer (the
squash table is PAQ's 33 integers, stretch its exact inverse, hashes wrap
in uint64), so the encoder and decoder compute identical probabilities on
any machine.

With a neural model (method 5), the integer network's quantised logit of
each child (bit-identical on MLX and torch, see :mod:`.neural`) enters as a
further stretch-domain input of both mixers, a third mixer whose weights are
selected by the network's confidence and the child learns how far to trust
it, and a second APM keyed on the network's logit and the occupied face
neighbours refines the result (each APM an eighth of the final
probability).  Without a model these inputs are 0 and the method-4
probabilities are unchanged bit for bit; the encoder keeps, per level,
whichever of methods 4 and 5 codes shorter, and the state that method left.

As in the other adaptive methods, a pass is coded in chunks of growing size
(see :func:`.context.chunk_bounds`): every bit of a chunk sees the state
learnt from earlier chunks, and the chunk then updates counts, mixer
weights and APM together.  The decoder repeats the same vectorised passes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from lattice_conformance.codec.coder import PONE, Coder, code_bits
from lattice_conformance.codec.context import chunk_bounds
from lattice_conformance.codec.octree import OFFSETS, off_index
from lattice_conformance.codec.phases import parity_phase

__all__ = ["MIN_PARENTS", "MixState", "code_level_mix", "nn_stretch"]

W_INIT = 16000  # initial mixer weight (16-bit fixed point)
LR = 4  # mixer learning rate: weights move by mean(x * err) * steps * LR / 2^12 / 2^LR_SHIFT
LR_SHIFT = 3
APM_W = 1  # the APM's share of the final probability, in quarters
LIMIT = 127  # after a chunk, a context counted beyond this is halved once (adaptation rate)
HASH_BITS = 20
# Levels with fewer parents are neither coded nor learnt by this method (on
# both sides): they cost a few bytes with any model, and 64 passes over a
# handful of parents would cost more time than they save bits.
MIN_PARENTS = 256
# PAQ's squash at stretch -2048, -1920, ... 2048, as 12-bit probabilities.
# fmt: off
_SQUASH_T = np.array([
    1, 2, 3, 6, 10, 16, 27, 45, 73, 120, 194, 310, 488, 747, 1101, 1546, 2047, 2549, 2994,
    3348, 3607, 3785, 3901, 3975, 4022, 4050, 4068, 4079, 4085, 4089, 4092, 4093, 4094,
], np.int64)
# fmt: on


def _squash_table() -> np.ndarray:
    d = np.arange(-2047, 2048, dtype=np.int64)
    w = d & 127
    i = (d >> 7) + 16
    out: np.ndarray = (_SQUASH_T[i] * (128 - w) + _SQUASH_T[np.minimum(i + 1, 32)] * w + 64) >> 7
    return out


SQUASH = _squash_table()  # index d + 2047 -> 12-bit probability


def _stretch_table() -> np.ndarray:
    # stretch(p) = the smallest d with squash(d) >= p (PAQ's inverse), all integer.
    pos = np.searchsorted(SQUASH, np.arange(4096, dtype=np.int64), side="left")
    out: np.ndarray = np.clip(pos, 0, 4094) - 2047
    return out


STRETCH = _stretch_table()  # index 12-bit probability -> [-2047, 2047]


def squash(d: np.ndarray) -> np.ndarray:
    """12-bit probability of the stretch-domain value ``d`` (clipped to +-2047)."""
    out: np.ndarray = SQUASH[np.maximum(np.minimum(d, 2047), -2047) + 2047]
    return out


# Neighbour kinds: 1 face, 2 edge, 3 corner (0: the centre).
_KIND = np.abs(OFFSETS).sum(axis=1)
_NBR26 = [i for i in range(27) if _KIND[i] > 0]
_PAIR = np.array([[0, 1, 2], [1, 3, 4], [2, 4, 5]], np.int64)  # unordered pair of states
_MODELS = {  # name -> table size
    "axes": 216 * 3 * 8,
    "counts": 7 * 7 * 7 * 5 * 5 * 4,
    "parent": 10 * 8 * 5 * 8,
    "exact": 1 << HASH_BITS,
    "side": 10 * 10 * 10 * 4,
    "halves": 5 * 5 * 5 * 3 * 8,
    "pexact": 1 << HASH_BITS,
    "far": 216 * 216,
}
NIN = len(_MODELS) + 2  # the models, a bias and the neural model (0 without one)
W_NN = 16000  # initial mixer weight of the neural model's input
# All models' counts live in one flat table; model i's contexts start at _BASE[i].
_BASE = np.cumsum([0, *_MODELS.values()])[:-1].astype(np.int64)
_TABLE = int(sum(_MODELS.values()))
NSETS = 7 * 4 * 3
NSETS2 = 8 * 4 * 3
NSETS3 = 12 * 8  # the neural mixer: confidence of the neural model x child
APM_BUCKETS = 33
APM_CTX = 7 * 7
NN_BUCKETS = 24  # the neural APM: quantised neural logit x occupied face neighbours
APM2_CTX = NN_BUCKETS * 4


def _child_map(k: int, d: np.ndarray) -> tuple[int, int]:
    """(parent neighbour column, child bit) of the child-level neighbour ``d`` of child ``k``."""
    o = np.array([k & 1, (k >> 1) & 1, (k >> 2) & 1])
    t = o + d
    p = t >> 1
    c = t & 1
    return off_index(p.tolist()), int(c[0] + 2 * c[1] + 4 * c[2])


# _HALF[a, h, code]: children of ``code`` whose offset along axis ``a`` is ``h``.
_HALF = np.array(
    [
        [
            [
                bin(c & sum(1 << b for b in range(8) if (b >> a) & 1 == h)).count("1")
                for c in range(256)
            ]
            for h in (0, 1)
        ]
        for a in range(3)
    ],
    np.int64,
)

_MAPS = [[_child_map(k, OFFSETS[i]) for i in range(27)] for k in range(8)]
_MAP_COLS = np.array([[c for c, _ in row] for row in _MAPS], np.int64)
_MAP_BITS = np.array([[b for _, b in row] for row in _MAPS], np.int64)
_POW3 = 3 ** np.arange(25, -1, -1, dtype=np.int64)  # base-3 digits of the 26 states
_POW2 = 1 << np.arange(25, -1, -1, dtype=np.int64)


def _groups(k: int) -> np.ndarray:
    """``(27, 6)`` 0/1: face, edge and corner neighbours, and the 9 on each outward side."""
    s = [2 * ((k >> a) & 1) - 1 for a in range(3)]
    g = np.zeros((27, 6), np.int64)
    for i in _NBR26:
        g[i, _KIND[i] - 1] = 1
        for a in range(3):
            g[i, 3 + a] = OFFSETS[i][a] == s[a]
    return g


_GROUPS = [_groups(k) for k in range(8)]
# _HPACK[k][code]: per axis a, (children of ``code`` in child k's half along a) + 128 * (in
# the other half), at bit 14 * a; summed over 26 neighbours, no field overflows.
_HPACK = np.array(
    [
        sum(
            (_HALF[a, (k >> a) & 1] + 128 * _HALF[a, 1 - ((k >> a) & 1)]) << (14 * a)
            for a in range(3)
        )
        for k in range(8)
    ],
    np.int64,
)


def _zeros() -> np.ndarray:
    return np.zeros(_TABLE, np.int32)


@dataclass
class MixState:
    """What encoder and decoder both hold between passes and levels."""

    n1: np.ndarray = field(default_factory=_zeros)  # ones seen per context (all models)
    n: np.ndarray = field(default_factory=_zeros)  # bits seen per context
    weights: np.ndarray = field(default_factory=lambda: _weights_init(NSETS))
    weights2: np.ndarray = field(default_factory=lambda: _weights_init(NSETS2))
    apm1: np.ndarray = field(default_factory=lambda: _apm_init()[0])
    apmn: np.ndarray = field(default_factory=lambda: _apm_init()[1])
    # Learnt only on levels coded with the neural model's inputs (method 5):
    weights3: np.ndarray = field(default_factory=lambda: _weights_init(NSETS3))
    apm21: np.ndarray = field(default_factory=lambda: _apm_init(APM2_CTX)[0])
    apm2n: np.ndarray = field(default_factory=lambda: _apm_init(APM2_CTX)[1])

    def copy(self) -> MixState:
        """An independent copy (the encoder estimates without committing)."""
        return MixState(
            self.n1.copy(),
            self.n.copy(),
            self.weights.copy(),
            self.weights2.copy(),
            self.apm1.copy(),
            self.apmn.copy(),
            self.weights3.copy(),
            self.apm21.copy(),
            self.apm2n.copy(),
        )

    def halve(self) -> None:
        """Forget half of the counts after a level (integer, so both sides agree)."""
        self.n1 >>= 1
        self.n >>= 1
        self.apm1 >>= 1
        self.apmn >>= 1
        self.apm21 >>= 1
        self.apm2n >>= 1


def _weights_init(sets: int) -> np.ndarray:
    w = np.full((sets, NIN), W_INIT, np.int64)
    w[:, -2] = 0  # the bias
    w[:, -1] = W_NN
    return w


def _apm_init(contexts: int = APM_CTX) -> tuple[np.ndarray, np.ndarray]:
    centre = SQUASH[np.clip((np.arange(APM_BUCKETS) - 16) * 128, -2047, 2047) + 2047]
    n = np.full((contexts, APM_BUCKETS), 16, np.int64)
    return np.tile((centre * 16 + 2048) >> 12, (contexts, 1)), n


def nn_stretch(li: np.ndarray) -> np.ndarray:
    """The stretch-domain input of quantised neural logits ``floor(8 * logit)``.

    Stretch is ``256 * logit`` (PAQ's scale), so the centre of a quantisation
    step ``li / 8 + 1 / 16`` is ``32 * li + 16``: exact integers.
    """
    out: np.ndarray = np.clip(32 * li.astype(np.int64) + 16, -2047, 2047)
    return out


@dataclass
class _Neural:
    """The neural model's inputs for one chunk: stretch value, mixer set and APM context."""

    x: np.ndarray  # (n,) stretch
    mset: np.ndarray  # (n,) weight set of the neural mixer
    apm: np.ndarray  # (n,) context of the neural APM


def _neural(li: np.ndarray, k: int, fo: np.ndarray) -> _Neural:
    x = nn_stretch(li)
    conf = np.minimum(np.abs(x) >> 7, 11)  # 12 confidence buckets of 0.5 logit
    nb = np.clip((li.astype(np.int64) + 96) >> 3, 0, NN_BUCKETS - 1)
    return _Neural(x, conf * 8 + k, nb * 4 + np.minimum(fo, 3))


@dataclass
class _Around:
    """What a phase's parents see around them that stays fixed during the phase.

    Their neighbour parents belong to other phases, so within a phase only
    the parents' own bits change; this is computed once per phase.
    """

    nb: np.ndarray  # (m, 27) neighbour parent rows, -1 where absent
    comb: np.ndarray  # (m, 27) known << 8 | val of each neighbour parent, -1 where absent
    halves: np.ndarray  # (m,) per axis a at bit 14a: children in half 0, + 128 * in half 1
    pocc: np.ndarray  # (m,) occupied neighbour parents (0..26)
    ppat: np.ndarray  # (m,) uint64: which of the 26 neighbour parents are occupied


def _around(nbr: np.ndarray, known: np.ndarray, val: np.ndarray, rows: np.ndarray) -> _Around:
    nb = nbr[rows]
    jj = np.maximum(nb, 0)
    comb = np.where(nb >= 0, (known[jj] << 8) | val[jj], -1)
    nbc = comb[:, _NBR26]
    full = np.where((nbc >= 0) & ((nbc >> 8) == 0xFF), nbc & 0xFF, 0)
    occ = (nb[:, _NBR26] >= 0).astype(np.int64)
    return _Around(nb, comb, _HPACK[0][full].sum(1), occ.sum(1), (occ @ _POW2).astype(np.uint64))


def _states(comb: np.ndarray, k: int) -> np.ndarray:
    """``(m, 27)`` state of each child-level neighbour of child ``k``: 0 empty, 1 occupied, 2
    unknown, read from :attr:`_Around.comb`.  The centre column reads as empty; nothing uses it.
    """
    c = comb[:, _MAP_COLS[k]]
    bits = _MAP_BITS[k]
    kn = (c >> (bits + 8)) & 1
    v = (c >> bits) & 1
    out: np.ndarray = np.where(c < 0, 0, np.where(kn == 1, v, 2))
    out[:, 13] = 0
    return out


def _contexts(
    ar: _Around, known_own: np.ndarray, val_own: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(model contexts, mixer sets, APM context, forced)`` of child ``k`` of a phase's parents.

    The model contexts are ``(m, models)`` indices into the flat count table.
    """
    nb = ar.nb
    ar.comb[:, 13] = (known_own << 8) | val_own  # the parents' own bits so far
    st = _states(ar.comb, k)
    oc = (st == 1).astype(np.int64) @ _GROUPS[k]  # occupied: face, edge, corner, 3 sides
    uc = (st == 2).astype(np.int64) @ _GROUPS[k]  # unknown, the same groups
    fo, eo, co = oc[:, 0], oc[:, 1], oc[:, 2]
    fu, eu, cu = uc[:, 0], uc[:, 1], uc[:, 2]
    m = len(nb)
    axes = np.zeros(m, np.int64)
    for a in range(3):
        lo = np.zeros(3, np.int64)
        lo[a] = -1
        axes = axes * 6 + _PAIR[st[:, off_index(lo.tolist())], st[:, off_index((-lo).tolist())]]
    # the children two steps away along each axis: the same child of the face-neighbour parents
    axes2 = np.zeros(m, np.int64)
    for a in range(3):
        lo = np.zeros(3, np.int64)
        lo[a] = -1
        pair = []
        for step in (lo, -lo):
            c = ar.comb[:, off_index(step.tolist())]
            kn = (c >> (k + 8)) & 1
            pair.append(np.where(c < 0, 0, np.where(kn == 1, (c >> k) & 1, 2)))
        axes2 = axes2 * 6 + _PAIR[pair[0], pair[1]]
    own = val_own & known_own
    sib = np.zeros(m, np.int64)
    for b in range(8):
        sib += (own >> b) & 1
    forced = (sib == 0) & ((known_own & 0x7F) == 0x7F) if k == 7 else np.zeros(m, bool)
    pocc = ar.pocc
    o = (k & 1, (k >> 1) & 1, (k >> 2) & 1)
    fcp = np.zeros(m, np.int64)
    ec = np.zeros(m, np.int64)
    for a in range(3):
        d = [0, 0, 0]
        d[a] = 2 * o[a] - 1
        fcp |= (nb[:, off_index(d)] >= 0).astype(np.int64) << a
    s = [2 * v - 1 for v in o]
    for e in ((s[0], s[1], 0), (s[0], 0, s[2]), (0, s[1], s[2]), s):
        ec += nb[:, off_index(e)] >= 0
    # the 9 neighbours on each side of the child along its outward axes
    side = np.zeros(m, np.int64)
    for a in range(3):
        so, su = oc[:, 3 + a], uc[:, 3 + a]
        side = side * 10 + np.where(su == 9, 9, np.minimum(so, 8))
    # which half of their parents the known neighbours' children lie in, per axis
    halves = np.zeros(m, np.int64)
    for a in range(3):
        same = (ar.halves >> (14 * a + 7 * o[a])) & 127
        other = (ar.halves >> (14 * a + 7 * (1 - o[a]))) & 127
        hv = np.where(same + other == 0, 0, np.where(same == 0, 1, np.where(other == 0, 2, 3)))
        halves = halves * 5 + np.where((hv == 3) & (same <= other), 4, hv)
    pat = (st[:, _NBR26] @ _POW3).astype(np.uint64)
    h = (pat * np.uint64(0x9E3779B97F4A7C15) + np.uint64(k)) * np.uint64(0xD6E8FEB86659FD93)
    exact = (h >> np.uint64(64 - HASH_BITS)).astype(np.int64)
    ppat = (ar.ppat << np.uint64(11)) | (own.astype(np.uint64) << np.uint64(3)) | np.uint64(k)
    h2 = (ppat + np.uint64(0x632BE59BD9B4E019)) * np.uint64(0x9E3779B97F4A7C15)
    pexact = (h2 >> np.uint64(64 - HASH_BITS)).astype(np.int64)
    cols = {
        "axes": (axes * 3 + np.minimum(sib, 2)) * 8 + k,
        "counts": (((fo * 7 + fu) * 7 + np.minimum(eo, 6)) * 5 + np.minimum(eu, 12) // 3) * 20
        + np.minimum(co, 4) * 4
        + np.minimum(cu, 8) // 3,
        "parent": ((np.minimum(pocc, 27) * 10 // 27 * 8 + fcp) * 5 + ec) * 8 + k,
        "exact": exact,
        "side": side * 4 + np.minimum(sib, 3),
        "halves": (halves * 3 + np.minimum(sib, 2)) * 8 + k,
        "pexact": pexact,
        "far": axes2 * 216 + axes,
    }
    ctx = np.stack([cols[name] for name in _MODELS], 1) + _BASE
    known_n = 26 - (fu + eu + cu)
    mset = (fu * 4 + np.minimum(known_n, 25) // 7) * 3 + np.minimum(fo, 2)
    mset2 = (k * 4 + np.minimum(sib, 3)) * 3 + np.minimum(pocc, 26) // 9
    mset = np.stack([mset, mset2], 1)
    apm = fo * 7 + fu
    return ctx, mset, apm, forced


def _model_p(n1: np.ndarray, n: np.ndarray) -> np.ndarray:
    """12-bit probability of counts (KT-like estimate), in integers."""
    p: np.ndarray = ((2 * n1.astype(np.int64) + 1) << 12) // (2 * n.astype(np.int64) + 2)
    return p  # in [0, 4095]: STRETCH takes every value


def _predict(
    state: MixState, ctx: np.ndarray, mset: np.ndarray, apm: np.ndarray, nn: _Neural | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(q16, inputs, the mixers' p12, apm bucket)`` for a chunk.

    Without the neural model (method 4) its input is 0, so its weights
    neither act nor learn, the third mixer and second APM are unused, and the
    probabilities are those of the mixing method alone.
    """
    x = np.empty((len(mset), NIN), np.int64)
    x[:, :-2] = STRETCH[_model_p(state.n1[ctx], state.n[ctx])]
    x[:, -2] = 256
    x[:, -1] = 0 if nn is None else nn.x
    dot1 = (x * state.weights[mset[:, 0]]).sum(1) >> 16
    dot2 = (x * state.weights2[mset[:, 1]]).sum(1) >> 16
    if nn is None:
        dot = (dot1 + dot2) >> 1
        pm = np.stack([squash(dot1), squash(dot2)], 1)
    else:
        dot3 = (x * state.weights3[nn.mset]).sum(1) >> 16
        dot = (dot1 + dot2 + dot3) // 3
        pm = np.stack([squash(dot1), squash(dot2), squash(dot3)], 1)
    sd = np.maximum(np.minimum(dot, 2047), -2047) + 2048
    bucket = np.minimum((sd + 64) >> 7, APM_BUCKETS - 1)
    a1 = state.apm1[apm, bucket]
    an = state.apmn[apm, bucket]
    pa = ((2 * a1 + 1) << 12) // (2 * an + 2)
    if nn is None:
        p = ((4 - APM_W) * squash(dot) + APM_W * pa + 2) >> 2
    else:
        b1 = state.apm21[nn.apm, bucket]
        bn = state.apm2n[nn.apm, bucket]
        pb = ((2 * b1 + 1) << 12) // (2 * bn + 2)
        p = (6 * squash(dot) + pa + pb + 4) >> 3  # each APM an eighth (tuned on seed 2)
    q: np.ndarray = np.maximum(np.minimum(p << 4, PONE - 1), 1)
    return q, x, pm, bucket


def _update(
    state: MixState,
    ctx: np.ndarray,
    mset: np.ndarray,
    apm: np.ndarray,
    x: np.ndarray,
    pm: np.ndarray,
    bucket: np.ndarray,
    y: np.ndarray,
    nn: _Neural | None,
) -> None:
    c = ctx.ravel()
    np.add.at(state.n, c, 1)
    np.add.at(state.n1, c, np.repeat(y, ctx.shape[1]).astype(np.int32))
    big = np.unique(c[state.n[c] > LIMIT])
    state.n[big] >>= 1
    state.n1[big] >>= 1
    mixers = [(state.weights, NSETS, mset[:, 0]), (state.weights2, NSETS2, mset[:, 1])]
    if nn is not None:
        mixers.append((state.weights3, NSETS3, nn.mset))
    for col, (w, sets, ms) in enumerate(mixers):
        g = x * ((y << 12) - pm[:, col])[:, None]  # |g| < 2^24
        cnt = np.bincount(ms, minlength=sets)
        grad = np.zeros((sets, NIN), np.int64)
        np.add.at(grad, ms, g)
        steps = np.minimum(cnt, 256)[:, None]
        w += (grad * steps * LR) // (np.maximum(cnt, 1)[:, None] << (12 + LR_SHIFT))
    _apm_learn(state.apm1, state.apmn, apm * APM_BUCKETS + bucket, y)
    if nn is not None:
        _apm_learn(state.apm21, state.apm2n, nn.apm * APM_BUCKETS + bucket, y)


def _apm_learn(ones: np.ndarray, seen: np.ndarray, flat: np.ndarray, y: np.ndarray) -> None:
    """Count a chunk's bits into an APM's cells ``flat`` (in place), halving cells past 255."""
    seen += np.bincount(flat, minlength=seen.size).reshape(seen.shape)
    ones += np.bincount(flat, weights=y, minlength=seen.size).astype(np.int64).reshape(seen.shape)
    over = seen > 255
    seen[over] >>= 1
    ones[over] >>= 1


def code_level_mix(
    coder: Coder | None,
    rows_xyz: np.ndarray,
    nbr: np.ndarray,
    codes: np.ndarray | None,
    state: MixState,
    nn: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Code (``codes`` given) or decode one level; returns ``(codes, bits)``.

    ``state`` is updated in place to what both sides hold after the level
    (before the per-level halving, which the caller does).  ``nn``, the
    ``(M, 8)`` quantised neural logits of the level's children (see
    :meth:`.neural.NeuralModel.logit_levels`), adds the neural model's inputs
    (method 5); ``None`` is the mixing method alone (method 4).
    """
    phase = parity_phase(rows_xyz)
    known = np.zeros(len(nbr), np.int64)
    val = np.zeros(len(nbr), np.int64)
    full = None if codes is None else codes.astype(np.int64)
    bits = 0.0
    for rows in (np.flatnonzero(phase == f) for f in range(8)):
        if len(rows) == 0:
            continue
        ar = _around(nbr, known, val, rows)
        for k in range(8):
            ctx, mset, apm, forced = _contexts(ar, known[rows], val[rows], k)
            free = ~forced
            cf = ctx[free]
            ms, ap = mset[free], apm[free]
            nk = None if nn is None else _neural(nn[rows, k][free], k, ap // 7)
            y = None if full is None else ((full[rows] >> k) & 1)[free]
            got = np.zeros(int(free.sum()), np.int64)
            for lo, hi in itertools.pairwise(chunk_bounds(len(ms))):
                cc = cf[lo:hi]
                part = None if nk is None else _Neural(*(a[lo:hi] for a in vars(nk).values()))
                q, x, pm, bucket = _predict(state, cc, ms[lo:hi], ap[lo:hi], part)
                yy, cost = code_bits(coder, None if y is None else y[lo:hi], q)
                bits += cost
                got[lo:hi] = yy
                _update(state, cc, ms[lo:hi], ap[lo:hi], x, pm, bucket, yy, part)
            res = np.ones(len(rows), np.int64)
            res[free] = got
            val[rows] |= res << k
            known[rows] |= 1 << k
    return val, bits

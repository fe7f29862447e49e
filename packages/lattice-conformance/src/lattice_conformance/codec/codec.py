"""Encode a voxel set to a geometry codec file and decode it back (see :mod:`.format`).

Per level the encoder computes the exact code length of every method it may
use (the context-adaptive, parity-phase and mixing models always; with a
model, the neural model, the neural model adapted by context counts and the
mixing model with the neural logits as extra mixer inputs), codes the level with the cheapest and
records the choice in the header.  Over the whole file it then keeps the
smaller of that octree coding and raw LZMA2 (preset 9e) of the octree byte
stream, so a file is never larger than the context model's output, nor than
LZMA's, plus the header.
"""

from __future__ import annotations

import io
import lzma
import struct
from dataclasses import dataclass, field

import numpy as np

from lattice_conformance.codec import format as fmt
from lattice_conformance.codec.coder import Coder, Recorder, bern_bits
from lattice_conformance.codec.context import (
    Tables,
    adaptive_pass,
    bit_contexts,
    context_size,
    halve,
    update_tables,
)
from lattice_conformance.codec.mixing import MIN_PARENTS, MixState, code_level_mix
from lattice_conformance.codec.neural import (
    LOGIT_MIN,
    LOGIT_TABLE,
    NeuralModel,
    level_crc,
)
from lattice_conformance.codec.octree import (
    MAX_LEVELS,
    build_octree,
    expand_level,
    morton_decode,
    neighbours,
    octree_stream,
)
from lattice_conformance.codec.phases import PhaseTables, code_level_phases, halve_phases

__all__ = ["EncodeResult", "decode_voxels", "encode_voxels", "read_header"]

BUCKET = 12  # quantised logits per bucket of the adapted method (16 buckets)
NBUCKETS = 16
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]


@dataclass
class EncodeResult:
    """The file and what the encoder decided (for reports)."""

    data: bytes
    mode: str
    methods: list[str]
    level_bits: list[dict[str, float]] = field(default_factory=list)
    estimate_bits: float = 0.0
    fixes: int = 0


def _hyb_tables_init(k: int) -> tuple[np.ndarray, np.ndarray]:
    size = context_size(k, NBUCKETS)
    centre = np.arange(NBUCKETS) * BUCKET + BUCKET // 2
    ones = (LOGIT_TABLE[centre] * 4 + (1 << 15)) >> 16
    return np.tile(ones, size // NBUCKETS).astype(np.int64), np.full(size, 4, np.int64)


def _code_level(
    coder: Coder | None,
    method: int,
    nbr: np.ndarray,
    codes: np.ndarray | None,
    li: np.ndarray | None,
    ctx_tables: Tables,
    hyb_tables: Tables,
    m: int,
) -> tuple[np.ndarray, float]:
    """Code (codes given) or decode one level with ``method``; returns (codes, bits).

    Leaves the context tables as the decoder will have them; the caller copies
    them when it only estimates.
    """
    known = np.zeros(m, np.int64)
    bits = 0.0
    for k in range(8):
        ctx, forced = bit_contexts(nbr, known, k)
        y = None if codes is None else ((codes.astype(np.int64) >> k) & 1)[~forced]
        free = ctx[~forced]
        if method == fmt.METHOD_CONTEXT:
            entry = ctx_tables[k] or (np.zeros(context_size(k), np.int64),) * 2
            yy, ones, total, b = adaptive_pass(coder, free, y, *entry)
        elif method == fmt.METHOD_NEURAL:
            assert li is not None
            q = LOGIT_TABLE[li[:, k][~forced] - LOGIT_MIN]
            if y is not None:
                b = bern_bits(y, q)
                yy = coder.bern(y, q) if coder is not None else y
            else:
                assert coder is not None
                yy, b = coder.bern(None, q), 0.0
        else:
            assert li is not None
            bucket = (li[:, k] - LOGIT_MIN) // BUCKET
            hctx, _ = bit_contexts(nbr, known, k, bucket, NBUCKETS)
            entry = hyb_tables[k] or _hyb_tables_init(k)
            yy, ones, total, b = adaptive_pass(coder, hctx[~forced], y, *entry)
            hyb_tables[k] = (ones, total)
        bits += b
        full = np.ones(m, np.int64)
        full[~forced] = yy
        known |= full << k
        if method != fmt.METHOD_CONTEXT:
            update_tables(ctx_tables, k, free, yy, context_size(k))
        else:
            ctx_tables[k] = (ones, total)
    return known, bits


def _side_cost(fixes: tuple[np.ndarray, np.ndarray] | None) -> float:
    """Bits of a neural level's side information: CRC, fix count, fixes."""
    if fixes is None:
        return 8.0 * 5
    idx = fixes[0]
    deltas = np.diff(np.r_[0, idx])
    # an index delta takes one varint byte, plus one per 7 bits above the first 7
    delta_bytes = len(deltas) + sum(int((deltas >= 1 << (7 * j)).sum()) for j in range(1, 9))
    return 8.0 * (4 + 1 + delta_bytes + len(idx))


def encode_voxels(
    voxels: np.ndarray,
    levels: int,
    model: NeuralModel | None = None,
    *,
    cross_check: NeuralModel | None = None,
    allow_lzma: bool = True,
    methods_allowed: tuple[str, ...] | None = None,
) -> EncodeResult:
    """Encode integer voxels ``(N, 3)`` in ``[0, 2^levels)`` (duplicates collapse).

    ``model`` enables the neural methods; ``cross_check`` (the same artifact on
    the other runtime) makes the encoder compare both runtimes' quantised
    logits and store the few that differ, so the file decodes on either.
    ``methods_allowed`` restricts the per-level choice (names of
    :data:`format.METHOD_NAMES`; ``None``: all the available ones), e.g. to
    measure one model alone.
    """
    if not 1 <= levels <= MAX_LEVELS:
        raise ValueError(f"levels must be in [1, {MAX_LEVELS}], got {levels}")
    allowed = set(fmt.METHOD_NAMES.values()) if methods_allowed is None else set(methods_allowed)
    if unknown := allowed - set(fmt.METHOD_NAMES.values()):
        names = sorted(fmt.METHOD_NAMES.values())
        raise ValueError(f"unknown methods {sorted(unknown)}; use some of {names}")
    if "context" not in allowed:
        raise ValueError("the context method cannot be left out (every level's fallback)")
    vox = np.asarray(voxels)
    if vox.ndim != 2 or vox.shape[1] != 3:
        raise ValueError(f"voxels must have shape (N, 3), got {vox.shape}")
    vox = vox.astype(np.int64)
    if len(vox) and (vox.min() < 0 or vox.max() >= (1 << levels)):
        raise ValueError(f"voxels must lie in [0, {1 << levels}) for level {levels}")
    keys, codes = build_octree(vox, levels)
    count = len(keys[-1])
    coder = Coder()
    ctx_tables: Tables = [None] * 8
    hyb_tables: Tables = [None] * 8
    ph_tables: PhaseTables = [None] * 8
    mix_state = MixState()
    methods: list[int] = []
    side = io.BytesIO()
    report: list[dict[str, float]] = []
    fixes_total = 0
    total_bits = 0.0
    digest_paid = False
    for lv in range(levels):
        m = len(codes[lv])
        rows = morton_decode(keys[lv], lv)
        nbr = neighbours(rows, lv)
        cands: dict[int, float] = {}
        recs: dict[int, Recorder] = {}
        after: dict[int, tuple[Tables, Tables]] = {}
        # The context and phase tables after a level do not depend on the
        # method that coded it (both sides update them from the level's codes).
        ctx_after = list(ctx_tables)
        recs[fmt.METHOD_CONTEXT] = Recorder()
        _, cands[fmt.METHOD_CONTEXT] = _code_level(
            recs[fmt.METHOD_CONTEXT], fmt.METHOD_CONTEXT, nbr, codes[lv], None, ctx_after, [], m
        )
        ph_after = list(ph_tables)
        if "phases" in allowed:
            recs[fmt.METHOD_PHASES] = Recorder()
            _, cands[fmt.METHOD_PHASES] = code_level_phases(
                recs[fmt.METHOD_PHASES], rows, nbr, codes[lv], ph_after
            )
        li = None
        fixes: tuple[np.ndarray, np.ndarray] | None = None
        mixnn = "mixnn" in allowed and model is not None and m >= MIN_PARENTS
        if model is not None and m and (mixnn or allowed & {"neural", "hybrid"}):
            li = model.logit_levels(rows, lv, levels)
            if cross_check is not None:
                other = cross_check.logit_levels(rows, lv, levels)
                idx = np.flatnonzero((li != other).ravel())
                if len(idx):
                    li = np.minimum(li, other)
                fixes = (idx, li.ravel()[idx])
            for meth in (fmt.METHOD_NEURAL, fmt.METHOD_HYBRID):
                if fmt.METHOD_NAMES[meth] not in allowed:
                    continue
                recs[meth] = Recorder()
                hyb = list(hyb_tables)
                _, cands[meth] = _code_level(
                    recs[meth], meth, nbr, codes[lv], li, list(ctx_tables), hyb, m
                )
                after[meth] = ([], hyb)
        # The mixing state after a level: method 5's if it won, else method 4's
        # (which every level with enough parents learns, whichever method won).
        nn_state = mix_state.copy() if mixnn else None
        if "mix" in allowed and m >= MIN_PARENTS:
            recs[fmt.METHOD_MIX] = Recorder()
            _, cands[fmt.METHOD_MIX] = code_level_mix(
                recs[fmt.METHOD_MIX], rows, nbr, codes[lv], mix_state
            )
        if nn_state is not None:
            recs[fmt.METHOD_MIXNN] = Recorder()
            _, cands[fmt.METHOD_MIXNN] = code_level_mix(
                recs[fmt.METHOD_MIXNN], rows, nbr, codes[lv], nn_state, li
            )
        # The choice counts what each method adds to the header: a neural
        # level's CRC and fixes, and the model digest once.
        extra = _side_cost(fixes) + (0.0 if digest_paid else 8.0 * 32)
        cost = {k: v + (extra if k in fmt.MODEL_METHODS else 0.0) for k, v in cands.items()}
        choice = min(cost, key=lambda k: (cost[k], k))
        recs[choice].replay(coder)
        total_bits += cands[choice]
        if choice == fmt.METHOD_HYBRID:
            hyb_tables = after[choice][1]
        if choice == fmt.METHOD_MIXNN:
            assert nn_state is not None
            mix_state = nn_state
        mix_state.halve()
        ctx_tables, ph_tables = halve(ctx_after), halve_phases(ph_after)
        hyb_tables = halve(hyb_tables)
        methods.append(choice)
        report.append({fmt.METHOD_NAMES[k]: v for k, v in cands.items()})
        if choice in fmt.MODEL_METHODS:
            assert li is not None
            digest_paid = True
            side.write(struct.pack("<I", level_crc(li)))
            idx, val = fixes if fixes is not None else (np.zeros(0, np.int64),) * 2
            fixes_total += len(idx)
            fmt.write_varint(side, len(idx))
            prev = 0
            for i, v in zip(idx.tolist(), val.tolist(), strict=True):
                fmt.write_varint(side, i - prev)
                side.write(struct.pack("<b", v))
                prev = i
    head = io.BytesIO()
    head.write(fmt.MAGIC + bytes([fmt.FORMAT_VERSION]))
    stream = octree_stream(codes)
    lz = lzma.compress(stream, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    octree_file = _octree_file(count, levels, model, methods, side.getvalue(), coder.words())
    names = [fmt.METHOD_NAMES[k] for k in methods]
    if allow_lzma and len(lz) + 8 < len(octree_file):
        head.write(bytes([fmt.MODE_LZMA, levels]))
        fmt.write_varint(head, count)
        return EncodeResult(head.getvalue() + lz, "lzma", names, report, total_bits, fixes_total)
    return EncodeResult(octree_file, "octree", names, report, total_bits, fixes_total)


def _octree_file(
    count: int,
    levels: int,
    model: NeuralModel | None,
    methods: list[int],
    side: bytes,
    words: bytes,
) -> bytes:
    head = io.BytesIO()
    head.write(fmt.MAGIC + bytes([fmt.FORMAT_VERSION, fmt.MODE_OCTREE, levels]))
    fmt.write_varint(head, count)
    head.write(bytes(methods))
    if any(m in fmt.MODEL_METHODS for m in methods):
        assert model is not None
        head.write(model.digest)
    return head.getvalue() + side + words


@dataclass(frozen=True)
class Header:
    """What a file says about itself before its payload."""

    version: int
    mode: str
    levels: int
    voxels: int
    digest: bytes | None
    methods: list[str]


def _parse(data: bytes) -> tuple[Header, io.BytesIO]:
    buf = io.BytesIO(data)
    if fmt.read_exact(buf, 4, "magic") != fmt.MAGIC:
        raise fmt.CodecFormatError(
            "not a geometry codec file (no LGCC magic); encode one with "
            "'conformance geometry-codec encode'"
        )
    version, mode, levels = fmt.read_exact(buf, 3, "header")
    if version > fmt.FORMAT_VERSION:
        raise fmt.CodecFormatError(
            f"written by a newer codec (format {version}); this decoder reads up to "
            f"{fmt.FORMAT_VERSION}: upgrade latticekit-conformance"
        )
    if version not in fmt.READ_VERSIONS:
        raise fmt.CodecFormatError(f"format version {version} does not exist (corrupt file?)")
    if mode not in (fmt.MODE_OCTREE, fmt.MODE_LZMA) or not 1 <= levels <= MAX_LEVELS:
        raise fmt.CodecFormatError(f"corrupt header (mode {mode}, levels {levels})")
    voxels = fmt.read_varint(buf)
    if mode == fmt.MODE_LZMA:
        return Header(version, "lzma", levels, voxels, None, []), buf
    methods = list(fmt.read_exact(buf, levels, "method flags"))
    for meth, first in fmt.FIRST_VERSION.items():
        if version < first and meth in methods:
            raise fmt.CodecFormatError(
                f"a format {version} file cannot use method {meth} (it came with format "
                f"{first}); corrupt file?"
            )
    if any(m not in fmt.METHOD_NAMES for m in methods):
        raise fmt.CodecFormatError(f"unknown level method in {methods} (corrupt file?)")
    names = [fmt.METHOD_NAMES[m] for m in methods]
    uses = any(m in fmt.MODEL_METHODS for m in methods)
    digest = fmt.read_exact(buf, 32, "model digest") if uses else None
    return Header(version, "octree", levels, voxels, digest, names), buf


def read_header(data: bytes) -> Header:
    """The header of a coded file (raises :class:`CodecFormatError` on a bad one)."""
    return _parse(data)[0]


def decode_voxels(data: bytes, model: NeuralModel | None = None) -> tuple[np.ndarray, int]:
    """``(voxels (N, 3) int64 in Morton order, levels)`` of a coded file."""
    head, buf = _parse(data)
    parents = np.zeros(1 if head.voxels else 0, np.uint64)
    if head.mode == "lzma":
        try:
            stream = lzma.decompress(buf.read(), format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
        except lzma.LZMAError as exc:
            raise fmt.CodecFormatError(f"corrupt LZMA payload ({exc})") from None
        codes_all = np.frombuffer(stream, np.uint8)
        pos = 0
        for _ in range(head.levels):
            m = len(parents)
            if pos + m > len(codes_all):
                raise fmt.CodecFormatError("the LZMA payload is shorter than its octree")
            parents = expand_level(parents, codes_all[pos : pos + m])
            pos += m
        return _finish(parents, head), head.levels
    if head.digest is not None:
        if model is None:
            raise fmt.CodecFormatError(
                "the file was coded with a neural model; pass the model artifact (--model) "
                f"whose digest is {head.digest.hex()}"
            )
        if model.digest != head.digest:
            raise fmt.CodecFormatError(
                f"the file needs the model with digest {head.digest.hex()}, the given artifact "
                f"has {model.digest.hex()}"
            )
    methods = [next(k for k, v in fmt.METHOD_NAMES.items() if v == n) for n in head.methods]
    sides: list[tuple[int, np.ndarray, np.ndarray]] = []
    for meth in methods:
        if meth not in fmt.MODEL_METHODS:
            continue
        (crc,) = struct.unpack("<I", fmt.read_exact(buf, 4, "level checksum"))
        n = fmt.read_varint(buf)
        idx = np.zeros(n, np.int64)
        val = np.zeros(n, np.int64)
        prev = 0
        for i in range(n):  # only the rare logits two runtimes disagreed on
            prev += fmt.read_varint(buf)
            idx[i] = prev
            (val[i],) = struct.unpack("<b", fmt.read_exact(buf, 1, "logit fix"))
        sides.append((crc, idx, val))
    rest = buf.read()
    if len(rest) % 4:
        raise fmt.CodecFormatError("the range-coded payload is not whole 32-bit words")
    coder = Coder(np.frombuffer(rest, dtype="<u4").astype(np.uint32))
    ctx_tables: Tables = [None] * 8
    hyb_tables: Tables = [None] * 8
    ph_tables: PhaseTables = [None] * 8
    last_phases = max((i for i, m in enumerate(methods) if m == fmt.METHOD_PHASES), default=-1)
    mix_state = MixState()  # its levels and the larger ones before them learn (MIN_PARENTS)
    last_mix = max((i for i, m in enumerate(methods) if m in fmt.MIX_METHODS), default=-1)
    side_iter = iter(sides)
    for lv, meth in enumerate(methods):
        m = len(parents)
        rows = morton_decode(parents, lv)
        nbr = neighbours(rows, lv)
        li = None
        if meth in fmt.MODEL_METHODS:
            crc, idx, val = next(side_iter)
            assert model is not None
            li = model.logit_levels(rows, lv, head.levels) if m else np.zeros((0, 8), np.int64)
            if len(idx) and idx.max() >= li.size:
                raise fmt.CodecFormatError("a logit fix points past its level (corrupt file)")
            flat = li.ravel()
            flat[idx] = val
            li = flat.reshape(li.shape)
            if level_crc(li) != crc:
                raise fmt.CodecFormatError(
                    f"level {lv}: this runtime's quantised model probabilities differ from the "
                    "encoder's (checksum mismatch); decode with the runtime the file was "
                    "encoded with, or re-encode with --cross-check"
                )
        if meth == fmt.METHOD_PHASES:
            codes, _ = code_level_phases(coder, rows, nbr, None, ph_tables)
        elif meth in fmt.MIX_METHODS:
            nn = li if meth == fmt.METHOD_MIXNN else None
            codes, _ = code_level_mix(coder, rows, nbr, None, mix_state, nn)
        else:
            codes, _ = _code_level(coder, meth, nbr, None, li, ctx_tables, hyb_tables, m)
        if meth not in (fmt.METHOD_CONTEXT, fmt.METHOD_NEURAL, fmt.METHOD_HYBRID):
            # (methods 1 and 2 learn the context tables as they decode)
            _code_level(None, fmt.METHOD_CONTEXT, nbr, codes, None, ctx_tables, [], m)
        if meth != fmt.METHOD_PHASES and lv < last_phases:  # a later level needs these statistics
            code_level_phases(None, rows, nbr, codes, ph_tables)
        if meth not in fmt.MIX_METHODS and lv < last_mix and m >= MIN_PARENTS:
            code_level_mix(None, rows, nbr, codes, mix_state)
        if lv < last_mix:
            mix_state.halve()
        ctx_tables, ph_tables = halve(ctx_tables), halve_phases(ph_tables)
        hyb_tables = halve(hyb_tables)
        parents = expand_level(parents, codes.astype(np.uint8))
        if len(parents) > head.voxels:  # a level never has more voxels than the last one
            raise fmt.CodecFormatError(
                f"level {lv + 1} decodes to {len(parents)} voxels, more than the header's "
                f"{head.voxels} (corrupt file)"
            )
    return _finish(parents, head), head.levels


def _finish(keys: np.ndarray, head: Header) -> np.ndarray:
    if len(keys) != head.voxels:
        raise fmt.CodecFormatError(
            f"decoded {len(keys)} voxels, the header says {head.voxels} (corrupt file)"
        )
    return morton_decode(keys, head.levels)

"""The range coder (constriction) behind every method, with integer probabilities.

Every probability handed to the coder is an integer ``q`` in ``[1, 2^16 - 1]``
(the chance of a 1 is ``q / 2^16``), computed with integer arithmetic or from a
fixed table, so the encoder and the decoder (any runtime, any machine) feed the
coder bit-identical models.  ``q / 2^16`` is exact in float64, which is what
constriction's Bernoulli model takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lattice_conformance.codec.format import CodecFormatError

__all__ = ["PONE", "Coder", "Recorder", "bern_bits", "code_bits", "quant_from_counts"]

PBITS = 16
PONE = 1 << PBITS


def _constriction() -> Any:
    try:
        import constriction
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the geometry codec needs the 'constriction' package (pip install constriction)"
        ) from exc
    return constriction


def quant_from_counts(n1: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``round(n1 * 2^16 / n)`` clipped to ``[1, 2^16 - 1]``, in integers only."""
    n = np.maximum(n, 1)
    out: np.ndarray = np.clip((n1 * PONE + n // 2) // n, 1, PONE - 1).astype(np.int64)
    return out


def bern_bits(y: np.ndarray, q: np.ndarray) -> float:
    """Ideal code length in bits of the bits ``y`` under the integer probabilities ``q``."""
    p = np.where(y == 1, q, PONE - q) / PONE
    return float(-np.log2(p).sum())


def code_bits(coder: Coder | None, y: np.ndarray | None, q: np.ndarray) -> tuple[np.ndarray, float]:
    """One chunk of every method: ``(bits, ideal code length)``.

    The encoder passes ``y`` (with ``coder=None`` it only measures, which is
    how it compares methods); the decoder passes ``y=None`` and gets the bits.
    """
    if y is not None:
        if coder is not None:
            coder.bern(y, q)
        return y, bern_bits(y, q)
    assert coder is not None, "decoding needs a coder"
    return coder.bern(None, q), 0.0


class Coder:
    """One range-coded stream; the encoder and decoder make the same calls in the same order."""

    def __init__(self, words: np.ndarray | None = None) -> None:
        stream = _constriction().stream
        self._model = stream.model
        self.enc = stream.queue.RangeEncoder() if words is None else None
        self.dec = None if words is None else stream.queue.RangeDecoder(words)

    def bern(self, y: np.ndarray | None, q: np.ndarray) -> np.ndarray:
        """Code (encoder: ``y``) or decode bits, one Bernoulli ``q / 2^16`` each."""
        if len(q) == 0:
            return np.zeros(0, np.int64)
        p = q.astype(np.float64) / PONE
        model = self._model.Bernoulli(perfect=False)
        if self.enc is not None:
            assert y is not None
            self.enc.encode(y.astype(np.int32), model, p)
            return y.astype(np.int64)
        assert self.dec is not None
        try:
            return np.asarray(self.dec.decode(model, p), dtype=np.int64)
        except AssertionError as exc:  # constriction's word for an invalid stream
            raise CodecFormatError(f"the range-coded payload is corrupt ({exc})") from None

    def words(self) -> bytes:
        """The finished stream (encoder), little-endian 32-bit words."""
        assert self.enc is not None
        return bytes(np.asarray(self.enc.get_compressed(), dtype="<u4").tobytes())


class Recorder(Coder):
    """Records the encoder's calls instead of coding them.

    The encoder estimates every method of a level by running it with a
    recorder, then replays the chosen method's calls into the real coder, so
    the chosen method is not computed twice.
    """

    def __init__(self) -> None:
        self.enc = None
        self.dec = None
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []

    def bern(self, y: np.ndarray | None, q: np.ndarray) -> np.ndarray:
        assert y is not None, "a recorder only encodes"
        if len(q):
            self.calls.append((y.astype(np.int64), q.astype(np.int64)))
        return y.astype(np.int64)

    def replay(self, coder: Coder) -> None:
        """Code the recorded calls, in order, with ``coder``."""
        for y, q in self.calls:
            coder.bern(y, q)

"""The neural model adapter: the exported geometry artifact's candidate logits, quantised.

The tensor-compute graph is the Lattice artifact (``graph.mlir`` +
``weights.safetensors``), run by ``mlx_lattice`` (the verified artifact) or by
``torch_lattice`` (the eager model built from the same weights); the coder
stays host code.  The decoder only has the parents of a level, so only the
candidate logits are used (the artifact's second input, the true children, is
given a dummy row and its ``bits`` output is ignored).

How both runtimes give the coder the *same* probabilities, by construction:
the model is an integer network (:class:`torch_lattice.geometry.GeometryModel`,
frozen): integer weights on power-of-two grids, integer activations reached by
``round`` and a clamp, every partial sum below ``2^24`` grid steps.  float32
computes such sums exactly in any order, so MLX and torch return bit-identical
logits.  Each logit is then quantised on the host to the integer
``floor(8 * logit)`` (float32 -> float64 is exact, so is the scaling), clipped
to ``[-96, 95]``, and the probability of a 1 is read from a fixed 192-entry
integer table (:data:`LOGIT_TABLE`).  The file still stores a CRC-32 of every
neural level's integers, so a decoder given a model that is *not* an integer
network stops with an error instead of decoding garbage; ``cross_check`` (run
both runtimes while encoding) remains as a verification and finds nothing to
fix with an integer model.

The parents carry the level features of
:func:`torch_lattice.geometry.level_features`, so the one network knows which
level of how many it predicts.
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from lattice_contract.artifact import printable

from lattice_conformance.codec.coder import PONE

__all__ = ["LOGIT_STEPS", "LOGIT_TABLE", "NeuralModel", "model_digest", "quantise_logits"]

LOGIT_STEPS = 8  # quantisation steps per unit of logit
LOGIT_MIN, LOGIT_MAX = -96, 95  # logits clipped to [-12, 12)


def _table() -> np.ndarray:
    centre = (np.arange(LOGIT_MIN, LOGIT_MAX + 1, dtype=np.float64) + 0.5) / LOGIT_STEPS
    p = 1.0 / (1.0 + np.exp(-centre))
    return np.clip(np.floor(p * PONE + 0.5), 1, PONE - 1).astype(np.int64)


LOGIT_TABLE = _table()


def quantise_logits(logits: np.ndarray) -> np.ndarray:
    """``floor(8 * logit)`` clipped to ``[-96, 95]``, as int64 (see the module docstring)."""
    scaled = np.floor(np.asarray(logits, dtype=np.float64) * LOGIT_STEPS)
    return np.clip(scaled, LOGIT_MIN, LOGIT_MAX).astype(np.int64)


def level_crc(li: np.ndarray) -> int:
    """CRC-32 of a level's quantised logits (little-endian int16)."""
    return zlib.crc32(np.ascontiguousarray(li, dtype="<i2").tobytes())


def model_digest(artifact: Path) -> bytes:
    """SHA-256 over the artifact's ``graph.mlir`` and ``weights.safetensors`` (the model's id)."""
    h = hashlib.sha256()
    for name in ("graph.mlir", "weights.safetensors"):
        data = (artifact / name).read_bytes()
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


class NeuralModel:
    """Candidate logits of the geometry artifact on one runtime (``mlx`` or ``torch``), on CPU."""

    def __init__(self, artifact: Path, runtime: str) -> None:
        if runtime not in ("mlx", "torch"):
            raise ValueError(f"runtime must be 'mlx' or 'torch', got {runtime!r}")
        if (
            not (artifact / "graph.mlir").is_file()
            or not (artifact / "weights.safetensors").is_file()
        ):
            raise FileNotFoundError(
                f"{artifact} is not a geometry artifact directory (graph.mlir + "
                "weights.safetensors); pass e.g. examples/geometry/model.lattice"
            )
        self.artifact = artifact
        self.runtime = runtime
        self.digest = model_digest(artifact)
        self._impl: Any = None
        self._checked: Any = None
        self.check()  # at once: a bad artifact is refused before any cloud is read or coded

    def check(self) -> Any:
        """The artifact's weights as the frozen torch model, proven an integer network.

        Run for either runtime: the proof (:func:`check_integer_network`) is
        what makes the two runtimes agree, so an artifact that fails it is
        refused before any level is coded.  Raises ``ValueError`` naming the
        problem (an artifact from before the level-conditioned model, or the
        layer that breaks the proof).
        """
        if self._checked is None:
            from safetensors import SafetensorError
            from safetensors.torch import load_file
            from torch_lattice.geometry import load_geometry_model

            path = self.artifact / "weights.safetensors"
            try:
                state = load_file(str(path))
            except (OSError, SafetensorError) as exc:
                raise ValueError(f"cannot read {printable(path)}: {exc}") from None
            try:
                self._checked = load_geometry_model(state)
            except ValueError as exc:
                raise ValueError(
                    f"the geometry artifact {printable(self.artifact)}: {exc}"
                ) from None
        return self._checked

    def _load(self) -> Any:
        if self._impl is None:
            model = self.check()
            if self.runtime == "mlx":
                import mlx.core as mx
                from mlx_lattice.artifact import load_lattice_program

                mx.set_default_device(mx.cpu)
                self._impl = load_lattice_program(self.artifact)
            else:
                self._impl = model
        return self._impl

    def candidate_logits(
        self, rows: np.ndarray, level: int, levels: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(coords (N, 3) in child units, logits (N,))`` of the candidates of ``rows``."""
        from torch_lattice.geometry import level_features

        impl = self._load()
        coords = np.zeros((len(rows), 4), np.int32)
        coords[:, 1:] = 2 * rows
        dummy = coords[:1].copy()
        feats = np.tile(np.asarray(level_features(level, levels), np.float32), (len(rows), 1))
        if self.runtime == "mlx":
            import mlx.core as mx
            from mlx_lattice import SparseTensor

            p = SparseTensor.trusted(mx.array(coords), mx.array(feats), stride=2)
            c = SparseTensor.trusted(mx.array(dummy), mx.ones((1, 1), dtype=mx.float32), stride=1)
            res = impl.call_with_trusted_sparse_inputs(p, c)[0]
            mx.eval(res.coords, res.feats)
            return np.asarray(res.coords)[:, 1:].astype(np.int64), np.asarray(res.feats)[:, 0]
        import torch
        from torch_lattice.sparse import SparseTensor as TorchSparse

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # deterministic and, on a shared CPU, far faster
        try:
            with torch.no_grad():
                tp = TorchSparse.trusted(
                    torch.from_numpy(coords), torch.from_numpy(feats), stride=2
                )
                out = impl.candidate_logits(tp)
                return out.coords[:, 1:].numpy().astype(np.int64), out.feats[:, 0].numpy()
        finally:
            torch.set_num_threads(threads)

    def logit_levels(self, rows: np.ndarray, level: int, levels: int) -> np.ndarray:
        """``(M, 8)`` quantised logits of the children of level ``level``'s voxels ``rows`` (M, 3).

        ``levels`` is the depth of the whole cloud (the model is conditioned on both).

        Column ``b`` is the child at offset ``(b & 1, b >> 1 & 1, b >> 2)``, the
        octree's mask bit order, whatever row order the runtime returns.
        """
        m = len(rows)
        if m == 0:
            return np.zeros((0, 8), np.int64)
        cc, logits = self.candidate_logits(rows, level, levels)
        par = cc >> 1
        bit = (cc[:, 0] & 1) + 2 * (cc[:, 1] & 1) + 4 * (cc[:, 2] & 1)
        span = int(max(rows.max(), par.max())) + 1
        keys = (rows[:, 0] * span + rows[:, 1]) * span + rows[:, 2]
        order = np.argsort(keys)
        pk = (par[:, 0] * span + par[:, 1]) * span + par[:, 2]
        where = order[np.searchsorted(keys[order], pk)]
        out = np.zeros((m, 8), np.int64)
        out[where, bit] = quantise_logits(logits)
        if len(logits) != 8 * m:
            raise RuntimeError(f"the model returned {len(logits)} candidates for {m} parents")
        return out

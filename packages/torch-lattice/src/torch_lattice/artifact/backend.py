"""The torch adapter of the shared artifact runtime (:mod:`lattice_contract.runtime.ops`).

Everything an artifact needs that is not torch-specific -- the lowerings,
bundle rules, verification, call binding -- lives in the contract.  This
module holds only what torch does its own way: its dtypes, how
``safetensors.torch`` reads and writes weights (on the CPU, detached and
contiguous), and the two tensor calls of the ``argmax`` and ``gather_rows``
primitives.  ``torch_lattice.ops`` itself is the
:class:`~lattice_contract.runtime.ops.RuntimeOps` the standard lowerings call
(checked by mypy at the adapter's ``ops`` assignment).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from lattice_contract.runtime import RuntimeAdapter
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from torch_lattice import ops as torch_ops

__all__ = ["TORCH_BACKEND", "TorchBackend", "dtype_name", "torch_dtype"]


class TorchBackend(RuntimeAdapter):
    """Torch tensors, ``torch_lattice.SparseTensor`` and ``safetensors.torch``."""

    name = "torch"
    array_type = torch.Tensor
    ops = torch_ops  # mypy checks the module against RuntimeOps here
    read_errors = (SafetensorError, OSError, ValueError)

    def argmax_rows(self, x: torch.Tensor) -> torch.Tensor:
        """``torch.argmax`` over channels, as int32 (zero rows give an empty index)."""
        if x.shape[0] == 0:
            return torch.zeros(0, dtype=torch.int32, device=x.device)
        return torch.argmax(x, dim=1).to(torch.int32)

    def index_span(self, index: torch.Tensor) -> tuple[int, int] | None:
        """Smallest and largest index (one host read), None for an empty index."""
        if not index.numel():
            return None
        low, high = torch.aminmax(index)
        return int(low), int(high)

    def take_rows(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``index_select`` along rows."""
        return x.index_select(0, index.to(torch.int64))

    def storage_buffer(self, array: torch.Tensor) -> torch.Tensor:
        """Detached, on the CPU and contiguous, as safetensors stores plain buffers."""
        return array.detach().to("cpu").contiguous()

    def write_weights(
        self, path: Path, entries: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None
    ) -> None:
        """``safetensors.torch.save_file``; its own error type becomes an ``OSError``.

        A full disk or a file-size limit surfaces from safetensors as a
        ``SafetensorError`` that no caller expects; as an ``OSError`` it is
        reported like every other failed write (the atomic writer has left
        nothing behind by then).
        """
        from safetensors import SafetensorError

        try:
            save_file(dict(entries), str(path), metadata=dict(metadata) if metadata else None)
        except SafetensorError as exc:
            raise OSError(f"cannot write {path.name}: {exc}") from None

    def read_weights(self, path: str | os.PathLike[str]) -> Mapping[str, torch.Tensor]:
        """``safetensors.torch.load_file`` onto the CPU."""
        return load_file(str(path), device="cpu")

    def non_finite_counts(self, arrays: Sequence[torch.Tensor]) -> list[int]:
        """NaN and infinity counts of every tensor (upcast so f16/bf16 count exactly)."""
        counts: list[int] = torch.stack(
            [(~torch.isfinite(t.float())).sum() for t in arrays]
        ).tolist()
        return counts


TORCH_BACKEND = TorchBackend()
"""The one adapter instance the torch artifact runtime uses."""


def dtype_name(dtype: torch.dtype) -> str:
    """MLIR-style element name (``f16``, ``u32``...) of a torch dtype."""
    return TORCH_BACKEND.element_name(dtype)


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of an MLIR-style element name; KeyError names unknown ones."""
    dtype: torch.dtype = TORCH_BACKEND.element_dtype(name)
    return dtype

"""What the captured-call tests share: random padded-test frames, a host-read counter, and
sorting every padded map."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch_lattice.triton import kernels, maps


def box_rows(g: torch.Generator, n: int, extent: int, face: int | None = None) -> torch.Tensor:
    """``n`` distinct int32 rows over two batch items of a box from -2 to extent-3 on each axis.

    ``face`` moves the rows so their smallest x is that value (int32's edge).
    """
    cells = extent**3
    flat = torch.randperm(2 * cells, generator=g)[:n]
    r = flat % cells
    coords = torch.stack(
        [flat // cells, r // extent**2 - 2, r // extent % extent - 2, r % extent - 2], dim=1
    )
    if face is not None and n:
        coords[:, 1] += face - int(coords[:, 1].min())
    return coords.int()


class HostReads(TorchFunctionMode):
    """Counts the calls that copy a device value to the host, outside Triton's interpreter."""

    READS: ClassVar[set[str]] = {
        "item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "cpu",
    }  # fmt: skip

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []
        self.calls: set[str] = set()  # every function seen: proof that the mode was on

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = getattr(func, "__name__", "")
        if not in_interpreter():
            self.calls.add(name)
            if name in self.READS:
                self.reads.append(name)
        return func(*args, **(kwargs or {}))


def in_interpreter() -> bool:
    """Whether Triton's interpreter (which copies kernel arguments to NumPy) is running."""
    import inspect

    return any("triton/runtime/interpreter" in f.filename for f in inspect.stack(0))


def sort_every_padded_map(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sort every reused padded map whatever its size; returns the padded maps' sorts.

    The tests' layers are far below :data:`~torch_lattice.triton.maps.SORT_MIN_MACS_PADDED`,
    so without this their padded maps would always run unsorted; and the conv
    runs only tile shapes that walk listed taps, the walk that reads the sorted
    order (the autotune may otherwise pick one that walks every tap unsorted).
    """
    sorts: list[int] = []
    monkeypatch.setattr(maps, "SORT_MIN_MACS_PADDED", 0)
    for name in ("_CONV_CANDIDATES", "_CONV_CANDIDATES_F32"):
        monkeypatch.setattr(kernels, name, ((32, 4, 3, "list"), (64, 4, 3, "list")))
    monkeypatch.setattr(kernels, "_TUNED", {})
    original = maps.SlotMap.order

    def order(smap: maps.SlotMap) -> torch.Tensor:
        if smap.live is not None:
            sorts.append(smap.num_out)
        return original(smap)

    monkeypatch.setattr(maps.SlotMap, "order", order)
    return sorts

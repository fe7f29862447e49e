"""What the captured-call tests share: random padded-test frames and a host-read counter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch.overrides import TorchFunctionMode


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

"""A progress bar for the exporter's stages, shown for large models.

Exporting a large model takes a while (tracing, quantizing every weight,
native verification, running the artifact and comparing it), and a silent
terminal looks hung.  ``tqdm`` draws the bar when it is installed (the
``latticekit-conformance`` distribution, which holds the ``lattice``
commands, depends on it); ``torch_lattice`` itself depends only on torch and
safetensors, so without tqdm the stages are simply not shown.
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import Any

import torch

__all__ = ["LARGE_MODEL_PARAMETERS", "StageBar"]

log = logging.getLogger("torch_lattice.export")

LARGE_MODEL_PARAMETERS = 2_000_000
"""Models with at least this many parameters get the bar when ``progress=None``."""


class StageBar:
    """``with StageBar(model, progress, stages) as bar: bar.stage("trace") ...``."""

    def __init__(self, model: torch.nn.Module, progress: bool | None, stages: int) -> None:
        self._stage: str | None = None
        self._started = time.perf_counter()
        explicit = progress is True
        if progress is None:
            progress = sum(p.numel() for p in model.parameters()) >= LARGE_MODEL_PARAMETERS
        self._bar: Any = None
        if progress:
            try:
                from tqdm import tqdm
            except ImportError:  # tqdm comes with latticekit-conformance
                if explicit:
                    raise ValueError(
                        "progress=True needs tqdm, which is not installed; "
                        "pip install tqdm (or pass progress=None)"
                    ) from None
                return
            self._bar = tqdm(total=stages, desc="export", unit="stage", file=sys.stderr, leave=True)

    def stage(self, name: str) -> None:
        """Mark the previous stage done and name the one that starts now.

        Each finished stage's wall time is logged at INFO (``torch_lattice.export``),
        bar or no bar, so a script can capture where an export spends its time.
        """
        self._finish_stage()
        self._stage = name
        if self._bar is not None:
            if self._bar.postfix:
                self._bar.update(1)
            self._bar.set_postfix_str(name)

    def __enter__(self) -> StageBar:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self._finish_stage()
        if self._bar is not None:
            if kind is None:
                self._bar.update(self._bar.total - self._bar.n)
                self._bar.set_postfix_str("written")
            self._bar.close()

    def _finish_stage(self) -> None:
        now = time.perf_counter()
        if self._stage is not None:
            log.info("export: %s %.3f s", self._stage, now - self._started)
        self._stage = None
        self._started = now

"""Functional ops of the Lattice contract on MLX (names and signatures as SPEC §4-§5)."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "conv": (
        "conv3d",
        "subm_conv3d",
        "conv_transpose3d",
        "generative_conv_transpose3d",
    ),
    "pool": ("pool3d", "global_pool"),
    "feature": (
        "linear",
        "activation",
        "batch_norm",
        "layer_norm",
        "rms_norm",
        "softmax",
    ),
    "cast": ("cast",),
    "points": ("voxelize", "devoxelize"),
    "algebra": ("sparse_reindex", "sparse_binary", "sparse_cat"),
    "quant": ("QuantizedWeight", "quantize_weight"),
}

__all__: list[str] = []

# Modules that are still being written are imported guardedly; each becomes a
# plain import once it lands.
for _module, _names in _EXPORTS.items():
    try:
        _mod = importlib.import_module(f"mlx_lattice.ops.{_module}")
    except ModuleNotFoundError as _err:  # pragma: no cover - transitional
        if _err.name != f"mlx_lattice.ops.{_module}":
            raise
        continue
    for _name in _names:
        if hasattr(_mod, _name):
            globals()[_name] = getattr(_mod, _name)
            __all__.append(_name)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"module 'mlx_lattice.ops' has no attribute {name!r}")

"""Importing mlx_lattice makes MLX's float32 matmuls exact (no TF32) unless told otherwise."""

from __future__ import annotations

import os
import subprocess
import sys


def _env_after_import(env: dict[str, str]) -> str:
    code = "import os, mlx_lattice; print(os.environ.get('MLX_ENABLE_TF32'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_import_sets_tf32_off_when_unset() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLX_ENABLE_TF32"}
    assert _env_after_import(env) == "0"


def test_an_explicit_choice_is_kept() -> None:
    assert _env_after_import({**os.environ, "MLX_ENABLE_TF32": "1"}) == "1"

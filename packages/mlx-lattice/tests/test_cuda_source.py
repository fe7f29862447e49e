"""The CUDA kernel bodies compile under nvcc in the signature MLX generates for them.

MLX builds ``__global__ void custom_kernel_<name>(const In* in..., Out* out...)``
around each body (``mx.fast.cuda_kernel``), with ``using T = ...`` lines for
dtype template arguments; this test writes the same translation unit and
compiles it for sm_90, so syntax and type errors show up without a GPU.  It
needs ``nvcc`` (CUDA 12 or newer) and skips, saying so, where there is none;
the kernels' numerics are tested on the GPU by ``test_cuda_conv.py``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from mlx_lattice.cuda.source import HEADER, KERNELS

NVCC = shutil.which("nvcc")

_TYPES = {
    "lt_hash_build": ({"coords": "int32_t", "meta": "int32_t"}, {"table": "int32_t"}),
    "lt_gen_unique": (
        {n: "int32_t" for n in ("logical", "taps", "meta")},
        {"table": "int32_t", "wide": "int32_t"},
    ),
    "lt_gen_first": (
        {n: "int32_t" for n in ("logical", "taps", "table", "meta")},
        {"first": "int32_t", "rep": "int32_t"},
    ),
    "lt_gen_compact": (
        {n: "int32_t" for n in ("logical", "taps", "table", "rep", "rank", "meta")},
        {n: "int32_t" for n in ("rows", "coords", "out_table", "nbr")},
    ),
    "lt_hash_query": (
        {n: "int32_t" for n in ("table", "coords", "queries", "offs", "meta")},
        {"nbr": "int32_t"},
    ),
    "lt_tap_mask": ({"nbr": "int32_t", "meta": "int32_t"}, {"mask": "int32_t"}),
    "lt_invert": ({"nbr": "int32_t", "meta": "int32_t"}, {"inv": "int32_t"}),
    "lt_conv": (
        {
            "x": "T",
            "w": "TW",
            "bias": "float",
            "nbr": "int32_t",
            "order": "int32_t",
            "meta": "int32_t",
        },
        {"y": "T"},
    ),
    "lt_conv_mma": (
        {
            "x": "T",
            "w": "TW",
            "bias": "float",
            "nbr": "int32_t",
            "order": "int32_t",
            "meta": "int32_t",
        },
        {"y": "T"},
    ),
    "lt_conv_wgrad": (
        {"x": "T", "dy": "TD", "nbr": "int32_t", "meta": "int32_t"},
        {"dw": "float"},
    ),
    "lt_pool": ({"x": "T", "nbr": "int32_t", "meta": "int32_t"}, {"y": "T"}),
    "lt_pool_share": (
        {"x": "T", "y": "T", "dy": "T", "nbr": "int32_t", "meta": "int32_t"},
        {"share": "float"},
    ),
    "lt_pool_grad": (
        {
            n: t
            for n, t in zip(
                ("x", "y", "g", "count", "inv", "meta"),
                ("T", "T", "TG") + ("int32_t",) * 3,
                strict=True,
            )
        },
        {"dx": "T"},
    ),
}
_DTYPES = ("float", "__half", "__nv_bfloat16")


def _unit() -> str:
    """One translation unit holding every kernel, for every dtype, as MLX would emit it."""
    parts = ["#include <cstdint>\n#include <cooperative_groups.h>\n", HEADER]
    parts.append("namespace mlx::core::cu {\nnamespace cg = cooperative_groups;\n")
    for name, (inputs, outputs, body) in KERNELS.items():
        in_types, out_types = _TYPES[name]
        for dtype in _DTYPES:
            if name == "lt_conv_mma" and dtype == "float":
                continue  # tensor-core path: f16 and bf16 only
            subst = {"T": dtype, "TW": dtype, "TD": dtype, "TG": dtype}
            params = [f"const {subst.get(in_types[n], in_types[n])}* {n}" for n in inputs]
            params += [f"{subst.get(out_types[n], out_types[n])}* {n}" for n in outputs]
            usings = "".join(f"  using {a} = {dtype};\n" for a in ("T", "TW", "TD", "TG"))
            parts.append(
                f"__global__ void custom_kernel_{name}_{dtype.strip('_')}({', '.join(params)}) {{\n"
                f"{usings}{body}\n}}\n"
            )
    parts.append("}  // namespace mlx::core::cu\n")
    return "".join(parts)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (the GPU tests cover the kernels)")
def test_kernels_compile_for_sm90(tmp_path: Path) -> None:
    source = tmp_path / "lattice_kernels.cu"
    source.write_text(_unit())
    result = subprocess.run(
        [
            str(NVCC),
            "-std=c++17",
            "-arch=sm_90",
            "-c",
            "-Xptxas",
            "-v",
            str(source),
            "-o",
            str(tmp_path / "k.o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "spill" not in result.stderr.replace("0 bytes spill", ""), result.stderr[-4000:]

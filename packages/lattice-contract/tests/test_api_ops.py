"""The functional op API's one declaration: keywords as the schema's, defaults as the builder's.

``lattice_contract.frontend.ops`` declares every public op's keywords once for
both runtimes.  Here: the declared keywords of each schema op are exactly
its attributes (``accumulation`` aside, which the functional API fixes),
every default equals the textual builder's where the builder has one (and
the few the API adds are listed, so a new one cannot slip in), the
normaliser applies defaults and the contract's checks, an unknown or missing
keyword gets one clear message, the help text shows each keyword with its
default, and mypy flags a misspelt keyword through the ``TypedDict``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lattice_contract.builder import ATTRIBUTE_DEFAULTS
from lattice_contract.dialect import SCHEMA, GeluApprox, Join, PoolMode, Window
from lattice_contract.frontend import REQUIRED, keyword_error, ops
from lattice_contract.testing import flagged_lines

SCHEMA_OPS = {op.python_name: op for op in SCHEMA.ops.values()}

API_OWN_DEFAULTS = {
    ("batch_norm", "eps"),
    ("devoxelize", "interpolation"),
    ("global_pool", "batch_size"),
    ("layer_norm", "eps"),
    ("normalized_conv_transpose3d", "eps"),
    ("normalized_generative_conv_transpose3d", "eps"),
    ("normalized_subm_conv3d", "eps"),
    ("rms_norm", "eps"),
    ("sparse_binary", "join"),
    ("sparse_cat", "join"),
    ("sparse_to_dense", "layout"),
    ("voxelize", "reduction"),
}
"""Defaults of the functional API that the schema's ops do not have (they require the
attribute): written once in ``api_ops``; each needs a reason to be here.  The artifact
states sparse_to_dense's layout; the API defaults to spconv's ``dense()`` order."""


def _check(op: str, name: str, value: object) -> object:
    attr = next(a for n, a, _ in ops.DECLARATIONS[op].attrs if n == name)
    return value if attr.check is None else attr.check(value, name, op)


def test_declared_keywords_are_the_schema_ops_attributes() -> None:
    schema_backed = [name for name in ops.DECLARATIONS if name in SCHEMA_OPS]
    assert len(schema_backed) == len(ops.DECLARATIONS) - 1  # all but quantize_weight
    for name in schema_backed:
        decl, op = ops.DECLARATIONS[name], SCHEMA_OPS[name]
        declared = [n for n, _, _ in decl.attrs]
        schema = [a.name for a in op.attributes if a.name != "accumulation"]
        assert sorted(declared) == sorted(schema), name
        optional_target = any(o.name == "target" and o.optional for o in op.operands)
        has_target = optional_target or f"target_{name}" in SCHEMA_OPS
        assert decl.runtime_keywords == (("coordinates",) if has_target else ()), name


def test_defaults_equal_the_builders_and_the_api_adds_only_the_listed_ones() -> None:
    own = set()
    for name, decl in ops.DECLARATIONS.items():
        op = SCHEMA_OPS.get(name)
        for key, _, default in decl.attrs:
            if default is REQUIRED:
                if op is not None:
                    assert op.attribute(key).spec.required, (name, key)
                continue
            builder = ATTRIBUTE_DEFAULTS.get(
                key, None if op is None else op.attribute(key).spec.default
            )
            if builder is None:
                own.add((name, key))
                continue
            assert _check(name, key, default) == _check(name, key, builder), (name, key)
    assert own == API_OWN_DEFAULTS


def test_normalise_applies_the_defaults_and_the_contracts_checks() -> None:
    a = ops.normalise("conv3d", {"kernel_size": 3, "stride": (1, 2, 1)})
    assert ops.window(a) == Window((3, 3, 3), (1, 2, 1), (0, 0, 0), (1, 1, 1))
    assert ops.window(ops.normalise("subm_conv3d", {"kernel_size": 2})) == Window(
        (2, 2, 2), (1, 1, 1), (0, 0, 0), (1, 1, 1)
    )
    assert ops.normalise("pool3d", {"mode": "max", "kernel_size": 2})["mode"] is PoolMode.max
    assert ops.normalise("sparse_cat", {})["join"] is Join.inner
    assert ops.normalise("activation", {"kind": "gelu"})["approximate"] is GeluApprox.none
    grid = ops.normalise("voxelize", {"voxel_size": 0.5, "origin": (1, 2, 3)})
    assert (grid["voxel_size"], grid["origin"]) == ((0.5, 0.5, 0.5), (1.0, 2.0, 3.0))
    assert ops.normalise("quantize_weight", {"bits": 4, "group_size": 64})["bits"] == 4
    assert ops.normalise("softmax", {"axis": 1})["axis"] == 1
    with pytest.raises(ValueError, match=r"^stride must be >= 1 on every axis, got \(0, 0, 0\)$"):
        ops.normalise("conv3d", {"kernel_size": 3, "stride": 0})
    with pytest.raises(TypeError, match=r"^kernel_size must be an int or three ints, got 1\.5$"):
        ops.normalise("conv3d", {"kernel_size": 1.5})
    with pytest.raises(ValueError, match=r"^normalized_subm_conv3d: eps must be a positive"):
        ops.normalise("normalized_subm_conv3d", {"kernel_size": 3, "eps": 0.0})
    with pytest.raises(ValueError, match=r"^activation: softplus needs beta != 0$"):
        ops.normalise("activation", {"kind": "softplus", "beta": 0})
    with pytest.raises(ValueError, match=r"^voxelize: voxel_size must be > 0 on every axis"):
        ops.normalise("voxelize", {"voxel_size": (1, 0, 1)})
    with pytest.raises(ValueError, match=r"^bits must be 4 or 8"):
        ops.normalise("quantize_weight", {"bits": 3, "group_size": 64})
    with pytest.raises(ValueError, match=r"^mode must be one of 'max', 'avg', 'sum'"):
        ops.normalise("pool3d", {"mode": "median", "kernel_size": 2})


def test_unknown_and_missing_keywords_get_one_clear_message() -> None:
    with pytest.raises(TypeError) as info:
        ops.normalise("conv3d", {"kernel_sise": 3})
    assert str(info.value) == (
        "conv3d: unexpected keyword 'kernel_sise' (did you mean 'kernel_size'?); its keywords "
        "are: kernel_size, stride, padding, dilation, coordinates"
    )
    assert str(info.value) == str(keyword_error("conv3d", "kernel_sise", ["kernel_size",
        "stride", "padding", "dilation", "coordinates"]))  # fmt: skip
    with pytest.raises(
        TypeError, match=r"^generative_conv_transpose3d: unexpected keyword 'padding'"
    ):
        ops.normalise("generative_conv_transpose3d", {"kernel_size": 3, "padding": 1})
    with pytest.raises(TypeError) as missing:
        ops.normalise("pool3d", {"kernel_size": 2})
    assert str(missing.value) == "pool3d: missing required keyword 'mode' (PoolMode or one of " + (
        ", ".join(repr(m.value) for m in PoolMode).replace(", ", " | ") + ")"
    )


def test_help_text_shows_every_keyword_and_its_default() -> None:
    for name, decl in ops.DECLARATIONS.items():
        text = ops.help_text(name)
        for key, attr, default in decl.attrs:
            when = "required" if default is REQUIRED else "default "
            assert f"    {key}: {attr.accepts} ({when}" in text, (name, key)
        for key in decl.runtime_keywords:
            assert f"    {key}: the runtime's" in text, (name, key)
    assert "    stride: int or three ints, each >= 1 (default 1)." in ops.help_text("conv3d")
    assert "(default 'inner')" in ops.help_text("sparse_cat")


def test_mypy_flags_a_misspelt_or_mistyped_keyword(tmp_path: Path) -> None:
    flagged, report = flagged_lines(
        tmp_path,
        "from typing import Unpack\n"
        "from lattice_contract.frontend.ops import Conv3dAttrs, Pool3dAttrs\n"
        "def conv(x: int, **attrs: Unpack[Conv3dAttrs]) -> None: ...\n"
        "def pool(x: int, **attrs: Unpack[Pool3dAttrs]) -> None: ...\n"
        "conv(1, kernel_size=3, stride=(1, 2, 1))\n"
        "pool(1, mode='max', kernel_size=2)\n"
        "conv(1, kernel_sise=3)\n"
        "conv(1, kernel_size=3, stride='2')\n"
        "pool(1, kernel_size=2)\n",
    )
    assert flagged == {7, 8, 9}, report
    assert any("kernel_sise" in line for line in report.splitlines() if ": error:" in line), report

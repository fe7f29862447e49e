"""``features`` and ``feats``: both spellings work alike on both runtimes.

The aliasing is declared once (:mod:`lattice_contract.frontend.feature_names`); here
each runtime is checked through its public surface: ``SparseTensor.features``
and ``with_features``; a program call binds by ABI name only, so ``feats=``
and ``<name>_feats=`` are refused with the ABI name suggested.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import mlx_lattice
import mlx_lattice.artifact as mart
import numpy as np
import pytest
import torch
import torch_lattice
import torch_lattice.artifact as tart
from lattice_contract import MLIRModuleBuilder
from lattice_contract.runtime import ProgramCallError

COORDS = np.array([[0, 0, 0, 0], [0, 2, 0, 0], [1, 0, 2, 2], [0, 2, 2, 0]], dtype=np.int32)
FEATS = np.arange(16, dtype=np.float32).reshape(4, 4) / 7


def _programs() -> tuple[Any, Any]:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32", stride=2)
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(3, 3, 3, 3, 4))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=3))
    graph = b.build()
    weight = np.random.default_rng(2).standard_normal((3, 3, 3, 3, 4)).astype(np.float32)
    return (
        mart.compile_lattice_artifact(mart.LatticeArtifact(graph, {"w": mx.array(weight)})),
        tart.compile_lattice_artifact(
            tart.LatticeArtifact(graph, {"w": torch.from_numpy(weight.copy())})
        ),
    )


def _arrays(runtime: str) -> tuple[Any, Any, Any]:
    active = np.array([4], dtype=np.int32)
    if runtime == "mlx":
        return mx.array(COORDS), mx.array(FEATS), mx.array(active)
    return torch.from_numpy(COORDS.copy()), torch.from_numpy(FEATS.copy()), torch.from_numpy(active)


def _feats(value: Any) -> np.ndarray:
    return (
        np.asarray(value.feats)
        if isinstance(value, mlx_lattice.SparseTensor)
        else value.feats.numpy()
    )


@pytest.mark.parametrize("runtime", ["mlx", "torch"])
def test_sparse_tensor_features_is_feats(runtime: str) -> None:
    coords, feats, _ = _arrays(runtime)
    cls = mlx_lattice.SparseTensor if runtime == "mlx" else torch_lattice.SparseTensor
    x = cls(coords, feats, stride=2)
    assert x.features is x.feats
    doubled = feats * 2
    y, z = x.with_features(doubled), x.with_feats(doubled)
    assert type(y) is cls and y.stride == z.stride == (2, 2, 2)
    assert np.array_equal(_feats(y), _feats(z)) and y.features is y.feats


def test_constructors_take_features_where_they_take_feats() -> None:
    messages = []
    for runtime in ("mlx", "torch"):
        coords, feats, _ = _arrays(runtime)
        cls = mlx_lattice.SparseTensor if runtime == "mlx" else torch_lattice.SparseTensor
        for make in (cls, cls.trusted):
            x = make(coords, features=feats, stride=2)
            assert np.array_equal(_feats(x), _feats(make(coords, feats, 2)))
        for bad in ({"feats": feats, "features": feats}, {}):
            with pytest.raises(TypeError) as info:
                cls(coords, stride=2, **bad)
            messages.append(str(info.value))
    assert messages[:2] == messages[2:]
    assert "pass the features once" in messages[0] and "features=" in messages[1]


def test_program_calls_bind_by_abi_names_and_suggest_them_for_feats() -> None:
    programs = _programs()
    results = []
    for runtime, program in zip(("mlx", "torch"), programs, strict=True):
        c, f, a = _arrays(runtime)
        reference = _feats(program(x_coords=c, x_features=f, x_active=a))
        # the one-sparse-input aliases are ABI names of the texts' call form
        assert np.array_equal(_feats(program(coords=c, features=f, active=a)), reference)
        for kwargs, right in (
            ({"x_coords": c, "x_feats": f, "x_active": a}, "x_features"),
            ({"coords": c, "feats": f, "active": a}, "features"),
        ):
            with pytest.raises(ProgramCallError, match=f"did you mean '{right}'"):
                program(**kwargs)
        results.append(reference)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


def _same_call_error(extra: str) -> str:
    """The ProgramCallError of an ABI call with keyword ``extra`` added, alike on both runtimes."""
    messages = []
    for runtime, program in zip(("mlx", "torch"), _programs(), strict=True):
        c, f, a = _arrays(runtime)
        with pytest.raises(ProgramCallError) as info:
            program(x_coords=c, x_features=f, x_active=a, **{extra: f})
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    return messages[0]


def test_a_feats_keyword_is_the_same_error_on_both() -> None:
    message = _same_call_error("x_feats")
    assert "unexpected input 'x_feats'" in message and "did you mean 'x_features'" in message


def test_unknown_keyword_lists_only_the_canonical_names() -> None:
    message = _same_call_error("y")
    assert "unexpected input 'y'" in message
    assert "features" in message and "feats" not in message

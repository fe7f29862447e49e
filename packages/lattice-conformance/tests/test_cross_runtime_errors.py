"""Both runtimes fail the same way: the same error type and the same words.

For one bad artifact, bad call or bad sparse input, ``mlx_lattice`` and
``torch_lattice`` must raise exceptions of exactly the same class with
exactly the same message, so a user (or a serving layer) can handle them
once.  The artifacts are built with the contract builder; the inputs are the
same NumPy arrays handed to each runtime.
"""

from __future__ import annotations

from collections.abc import Callable
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
from lattice_contract.plan import LatticeValidationError

CHANNELS = 4


def _graph(stride: int = 2) -> str:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=CHANNELS, dtype="f32", stride=stride)
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(6, 3, 3, 3, 4))
    bias = b.weight(storage_key="b", layout="bias_c", dtype="f32", shape=(6,))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, bias=bias, kernel_size=3))
    return b.build()


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(15)
    return {
        "w": rng.standard_normal((6, 3, 3, 3, 4)).astype(np.float32),
        "b": rng.standard_normal(6).astype(np.float32),
    }


def _artifacts(graph: str, weights: dict[str, np.ndarray]) -> tuple[Any, Any]:
    return (
        mart.LatticeArtifact(graph, {k: mx.array(v) for k, v in weights.items()}),
        tart.LatticeArtifact(graph, {k: torch.from_numpy(v.copy()) for k, v in weights.items()}),
    )


def _outcome(call: Callable[[], Any]) -> tuple[type[BaseException], str] | None:
    try:
        call()
    except Exception as error:
        return type(error), str(error)
    return None


def _same_failure(mlx_call: Callable[[], Any], torch_call: Callable[[], Any]) -> str:
    mlx_error, torch_error = _outcome(mlx_call), _outcome(torch_call)
    assert mlx_error is not None and torch_error is not None, (mlx_error, torch_error)
    assert mlx_error[0] is torch_error[0], (mlx_error, torch_error)
    assert mlx_error[1] == torch_error[1], (mlx_error[1], torch_error[1])
    return mlx_error[1]


# --- bad artifacts -------------------------------------------------------------------

DEEP = "[" * 300 + "]" * 300
BAD_GRAPHS: dict[str, Callable[[str], str]] = {
    "schema digest": lambda g: g.replace('schema_digest = "', 'schema_digest = "0'),
    "ir version": lambda g: g.replace("lattice.ir_version = 2", "lattice.ir_version = 3"),
    "unknown op": lambda g: g.replace("lattice.subm_conv3d", "lattice.fancy_conv3d"),
    "parser limit": lambda g: g.replace("module attributes {", f"module attributes {{x = {DEEP}, "),
    "not utf-8": lambda g: g.replace('storage_key = "w"', 'storage_key = "\\FF"'),
    "garbage": lambda g: g[: len(g) // 2],
}


@pytest.mark.parametrize("name", sorted(BAD_GRAPHS))
def test_bad_graph_same_error(name: str) -> None:
    graph = BAD_GRAPHS[name](_graph())
    assert graph != _graph()
    mlx_art, torch_art = _artifacts(graph, _weights())
    message = _same_failure(
        lambda: mart.compile_lattice_artifact(mlx_art),
        lambda: tart.compile_lattice_artifact(torch_art),
    )
    assert "graph.mlir:" in message
    with pytest.raises(LatticeValidationError):
        mart.compile_lattice_artifact(mlx_art)
    _same_failure(
        lambda: mart.validate_lattice_artifact(mlx_art),
        lambda: tart.validate_lattice_artifact(torch_art),
    )


BAD_WEIGHTS: dict[str, Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]] = {
    "missing": lambda w: {"b": w["b"]},
    "dtype": lambda w: {"w": w["w"].astype(np.float16), "b": w["b"]},
    "bias dtype": lambda w: {"w": w["w"], "b": w["b"].astype(np.float16)},
}


@pytest.mark.parametrize("name", sorted(BAD_WEIGHTS))
def test_bad_weights_same_error(name: str) -> None:
    mlx_art, torch_art = _artifacts(_graph(), BAD_WEIGHTS[name](_weights()))
    message = _same_failure(
        lambda: mart.compile_lattice_artifact(mlx_art),
        lambda: tart.compile_lattice_artifact(torch_art),
    )
    assert "'w'" in message or "'b'" in message  # it names the weight


def test_weight_shape_drift_same_error_at_the_first_call() -> None:
    """The graph types weights without shapes: C_in drift is found when the op runs."""
    weights = _weights()
    weights["w"] = weights["w"][..., :2]
    mlx_art, torch_art = _artifacts(_graph(), weights)
    mlx_program = mart.compile_lattice_artifact(mlx_art)
    torch_program = tart.compile_lattice_artifact(torch_art)
    coords, feats, active = _inputs()
    message = _same_failure(
        lambda: mlx_program(_mx(coords), _mx(feats), _mx(active)),
        lambda: torch_program(_torch(coords), _torch(feats), _torch(active)),
    )
    assert "weight 'w' has shape (6, 3, 3, 3, 2)" in message


# --- bad calls and bad sparse inputs ----------------------------------------------------


@pytest.fixture(scope="module")
def programs() -> tuple[Any, Any]:
    mlx_art, torch_art = _artifacts(_graph(), _weights())
    return mart.compile_lattice_artifact(mlx_art), tart.compile_lattice_artifact(torch_art)


def _inputs(rows: int = 12) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    spatial = rng.choice(10**3, size=rows, replace=False)
    coords = np.stack(
        [np.zeros(rows), spatial // 100, (spatial // 10) % 10, spatial % 10], axis=1
    ).astype(np.int32)
    coords[:, 1:] *= 2
    feats = rng.standard_normal((rows, CHANNELS)).astype(np.float32)
    return coords, feats, np.array([rows], dtype=np.int32)


def _mx(value: np.ndarray) -> mx.array:
    return mx.array(value)


def _torch(value: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(value).copy())


def _bad_abi(
    change: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, ...]],
) -> Callable[[Any, Callable[[np.ndarray], Any]], Any]:
    def call(program: Any, convert: Callable[[np.ndarray], Any]) -> Any:
        return program(*(convert(a) for a in change(*_inputs())))

    return call


def _dup(c: np.ndarray, f: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, ...]:
    c = c.copy()
    c[3] = c[1]
    return c, f, a


def _set(index: tuple[Any, ...], value: int) -> Callable[..., tuple[np.ndarray, ...]]:
    def change(c: np.ndarray, f: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, ...]:
        c = c.copy()
        c[index] = value
        return c, f, a

    return change


BAD_CALLS: dict[str, Callable[[Any, Callable[[np.ndarray], Any]], Any]] = {
    "duplicate rows": _bad_abi(_dup),
    "negative batch": _bad_abi(_set((2, 0), -1)),
    "not divisible by the stride": _bad_abi(_set((4, 2), 3)),
    "coords dtype": _bad_abi(lambda c, f, a: (c.astype(np.int64), f, a)),
    "coords rank": _bad_abi(lambda c, f, a: (c[:, :3], f, a)),
    "features dtype": _bad_abi(lambda c, f, a: (c, f.astype(np.int32), a)),
    "features width": _bad_abi(lambda c, f, a: (c, f[:, :3], a)),
    "row mismatch": _bad_abi(lambda c, f, a: (c, f[:-1], a)),
    "active too large": _bad_abi(lambda c, f, a: (c, f, a + 1)),
    "active negative": _bad_abi(lambda c, f, a: (c, f, -a)),
    "active shape": _bad_abi(lambda c, f, a: (c, f, np.concatenate([a, a]))),
    "missing input": lambda p, cv: p(*(cv(a) for a in _inputs()[:2])),
    "too many inputs": lambda p, cv: p(*(cv(a) for a in _inputs()), cv(_inputs()[2])),
    "unknown keyword": lambda p, cv: p(*(cv(a) for a in _inputs()), bogus=cv(_inputs()[2])),
    "mixed forms": lambda p, cv: p(cv(_inputs()[0]), features=cv(_inputs()[1])),
    "not an array": lambda p, cv: p([[0, 0, 0, 0]], cv(_inputs()[1]), cv(_inputs()[2])),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_call_same_error(programs: tuple[Any, Any], name: str) -> None:
    mlx_program, torch_program = programs
    call = BAD_CALLS[name]
    message = _same_failure(lambda: call(mlx_program, _mx), lambda: call(torch_program, _torch))
    assert message.strip()


def test_good_call_runs_on_both(programs: tuple[Any, Any]) -> None:
    mlx_program, torch_program = programs
    coords, feats, active = _inputs()
    out_mx = mlx_program(_mx(coords), _mx(feats), _mx(active))
    out_torch = torch_program(_torch(coords), _torch(feats), _torch(active))
    np.testing.assert_allclose(
        np.asarray(out_mx.feats), out_torch.feats.numpy(), rtol=1e-5, atol=1e-5
    )


SPARSE_CONSTRUCTION: dict[str, Callable[[Any, Callable[[np.ndarray], Any]], Any]] = {
    "stride zero": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), 0),
    "stride not dividing": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), 3),
    "row mismatch": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1][:-1]), 2),
    "coords float": lambda st, cv: st(cv(_inputs()[0].astype(np.float32)), cv(_inputs()[1]), 2),
    # the stride and active-row rules of lattice_contract.frontend.sparse_tensor
    "stride of two axes": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), (2, 2)),
    "stride bool": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), True),
    "stride text": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), "2"),
    "stride negative axis": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), (2, -2, 2)),
    "active negative": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), 2, -1),
    "active past the rows": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), 2, 99),
    "active bool": lambda st, cv: st(cv(_inputs()[0]), cv(_inputs()[1]), 2, True),
    "active float array": lambda st, cv: st(
        cv(_inputs()[0]), cv(_inputs()[1]), 2, cv(np.array([3.0], dtype=np.float32))
    ),
    "active of two entries": lambda st, cv: st(
        cv(_inputs()[0]), cv(_inputs()[1]), 2, cv(np.array([3, 3], dtype=np.int32))
    ),
}


@pytest.mark.parametrize("name", sorted(SPARSE_CONSTRUCTION))
def test_bad_sparse_tensor_same_error(name: str) -> None:
    build = SPARSE_CONSTRUCTION[name]
    _same_failure(
        lambda: build(mlx_lattice.SparseTensor, _mx),
        lambda: build(torch_lattice.SparseTensor, _torch),
    )

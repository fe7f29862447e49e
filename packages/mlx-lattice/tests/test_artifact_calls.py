"""LatticeProgram call forms on a multi-input, multi-output artifact, and every bad call.

The artifact takes a sparse input ``x`` and a target sparse input ``target``
and returns a sparse value (a target convolution) and a dense global pool of
it.  Every malformed call must fail in the binder: the tests replace the
interpreter with a function that fails the test if it is ever reached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lattice_contract.runtime.execute as execute
import mlx.core as mx
import numpy as np
import pytest
from artifact_support import assert_same, random_sparse, save_and_load, weight
from lattice_contract.builder import MLIRModuleBuilder
from mlx_lattice import SparseTensor, ops
from mlx_lattice.artifact import LatticeProgram, ProgramCallError


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    b = MLIRModuleBuilder()
    sx = b.add_sparse_input("x", channels=4, dtype="f32")
    st = b.add_sparse_input("target", channels=2, dtype="f32", stride=2)
    wv = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(6, 3, 3, 3, 4))
    y = b.target_conv3d(input=sx, target=st, weight=wv, kernel_size=3, stride=2, padding=1)
    b.add_output("y", y)
    b.add_output("pooled", b.global_pool(input=y, mode="sum", batch_size=2))
    w = weight(rng, 6, 3, 3, 3, 4)
    program = save_and_load(tmp_path_factory.mktemp("calls"), b, {"w": w})
    x = random_sparse(rng, 50, 4)
    t = random_sparse(rng, 30, 2, stride=2)
    y_ref = ops.conv3d(x, w, kernel_size=3, stride=2, padding=1, coordinates=t)
    pooled_ref = ops.global_pool(y_ref, mode="sum", batch_size=2)
    return {"program": program, "x": x, "t": t, "expected": (y_ref, pooled_ref)}


def _check(result: Any, expected: tuple[Any, Any]) -> None:
    assert isinstance(result, tuple) and len(result) == 2
    assert isinstance(result[0], SparseTensor) and isinstance(result[1], mx.array)
    assert_same(result[0], expected[0])
    assert_same(result[1], expected[1])


def _abi(x: SparseTensor, t: SparseTensor) -> dict[str, mx.array]:
    return {
        "x_coords": x.coords,
        "x_features": x.feats,
        "x_active": x.active_rows,
        "target_coords": t.coords,
        "target_features": t.feats,
        "target_active": t.active_rows,
    }


# ---------------------------------------------------------------------------
# The accepted forms.


def test_sparse_inputs_positionally(setup: dict[str, Any]) -> None:
    _check(setup["program"](setup["x"], setup["t"]), setup["expected"])


def test_sparse_inputs_by_logical_name(setup: dict[str, Any]) -> None:
    p, x, t = setup["program"], setup["x"], setup["t"]
    _check(p(x=x, target=t), setup["expected"])
    _check(p(target=t, x=x), setup["expected"])
    _check(p(x, target=t), setup["expected"])


def test_abi_arrays_positionally(setup: dict[str, Any]) -> None:
    arrays = list(_abi(setup["x"], setup["t"]).values())
    _check(setup["program"](*arrays), setup["expected"])


def test_abi_arrays_by_name(setup: dict[str, Any]) -> None:
    p = setup["program"]
    abi = _abi(setup["x"], setup["t"])
    _check(p(**abi), setup["expected"])
    first = list(abi.values())[:3]
    rest = dict(list(abi.items())[3:])
    _check(p(*first, **rest), setup["expected"])


def test_program_abi_metadata(setup: dict[str, Any]) -> None:
    p: LatticeProgram = setup["program"]
    assert [(i.name, i.kind) for i in p.logical_inputs] == [("x", "sparse"), ("target", "sparse")]
    assert [a.abi_name for a in p.inputs] == list(_abi(setup["x"], setup["t"]))
    assert [(o.abi_name, o.role) for o in p.outputs] == [
        ("y", "sparse_tensor"),
        ("pooled", "tensor"),
    ]
    assert repr(p) == "LatticeProgram((x, target) -> (y, pooled), 5 ops)"
    assert p.input_names == ("x", "target") and p.output_names == ("y", "pooled")


def test_single_output_is_unwrapped_and_aliases(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    b = MLIRModuleBuilder()
    sx = b.add_sparse_input("x", channels=3, dtype="f16")
    b.add_output("y", b.pool3d(input=sx, mode="sum", kernel_size=2, stride=2))
    program = save_and_load(tmp_path, b)
    x = random_sparse(rng, 40, 3, "f16")
    expected = ops.pool3d(x, mode="sum", kernel_size=2, stride=2)
    assert_same(program(x), expected)
    assert_same(program(x=x), expected)
    assert_same(program(x.coords, x.feats, x.active_rows), expected)
    assert_same(program(coords=x.coords, features=x.feats, active=x.active_rows), expected)
    assert_same(program(x_coords=x.coords, features=x.feats, x_active=x.active_rows), expected)
    with pytest.raises(ProgramCallError, match=r"'x_coords' is given twice.*'coords' aliases it"):
        program(x.coords, coords=x.coords, features=x.feats, active=x.active_rows)


# ---------------------------------------------------------------------------
# Every malformed call fails before any op runs.


@pytest.fixture
def no_execution(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an op ran although the call should have been rejected")

    # LatticeProgramBase (shared by both runtimes) runs programs through this function.
    monkeypatch.setattr(execute, "run_program", forbidden)


def _reject(setup: dict[str, Any], message: str, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(ProgramCallError, match=message):
        setup["program"](*args, **kwargs)


@pytest.mark.usefixtures("no_execution")
def test_mixing_sparse_and_abi_positionally(setup: dict[str, Any]) -> None:
    t = setup["t"]
    _reject(
        setup,
        r"4 positional inputs given, but the artifact takes 2",
        setup["x"],
        t.coords,
        t.feats,
        t.active_rows,
    )
    _reject(
        setup,
        r"input 'target' is a sparse input and takes a "
        r"SparseTensor \(of mlx_lattice on MLX, of torch_lattice on torch\), got "
        r"mlx.core.array; do not mix",
        setup["x"],
        t.feats,
    )


@pytest.mark.usefixtures("no_execution")
def test_mixing_sparse_and_abi_keywords(setup: dict[str, Any]) -> None:
    t = setup["t"]
    _reject(
        setup,
        r"keyword 'target_coords' is an ABI array name, but this call passes "
        r"SparseTensor",
        setup["x"],
        target_coords=t.coords,
        target_features=t.feats,
        target_active=t.active_rows,
    )
    abi = _abi(setup["x"], t)
    del abi["target_coords"]
    _reject(
        setup,
        r"keyword 'x_coords' is an ABI array name",
        target=t,
        **{k: v for k, v in abi.items() if k.startswith("x_")},
    )


@pytest.mark.usefixtures("no_execution")
def test_missing_inputs(setup: dict[str, Any]) -> None:
    _reject(setup, r"missing input\(s\) 'target'; the artifact's inputs are x, target", setup["x"])
    abi = _abi(setup["x"], setup["t"])
    del abi["target_active"]
    _reject(setup, r"missing input\(s\) 'target_active'", **abi)
    _reject(
        setup,
        r"missing input\(s\) 'x_coords', .*or pass one "
        r"SparseTensor \(of mlx_lattice on MLX, of torch_lattice on torch\) per "
        r"sparse input: x, target",
    )


@pytest.mark.usefixtures("no_execution")
def test_duplicate_inputs(setup: dict[str, Any]) -> None:
    x, t = setup["x"], setup["t"]
    _reject(setup, r"input 'x' is given twice", x, t, x=x)
    abi = _abi(x, t)
    _reject(setup, r"input 'x_coords' is given twice", x.coords, **abi)


@pytest.mark.usefixtures("no_execution")
def test_unexpected_inputs(setup: dict[str, Any]) -> None:
    x, t = setup["x"], setup["t"]
    _reject(
        setup, r"unexpected input 'weights'; this artifact's inputs are x, target", x, t, weights=x
    )
    _reject(
        setup,
        r"unexpected input 'x_feature'; this artifact's ABI inputs are",
        x_feature=x.feats,  # a misspelling (x_feats is an accepted spelling of x_features)
        **{k: v for k, v in _abi(x, t).items() if k != "x_features"},
    )
    _reject(setup, r"3 positional inputs given, but the artifact takes 2", x, t, t)
    arrays = list(_abi(x, t).values())
    _reject(setup, r"7 positional ABI inputs given, but the artifact takes 6", *arrays, x.coords)


@pytest.mark.usefixtures("no_execution")
def test_wrong_array_types(setup: dict[str, Any]) -> None:
    x, t = setup["x"], setup["t"]
    abi = _abi(x, t)
    cases: list[tuple[str, Any, str]] = [
        (
            "x_coords",
            np.array(x.coords),
            r"'x_coords' must be an array \(an mlx.core.array on MLX, a torch.Tensor on "
            r"torch\), got numpy.ndarray",
        ),
        (
            "x_features",
            [[0.0] * 4],
            r"must be an array \(an mlx.core.array on MLX, a torch.Tensor on torch\), got "
            r"builtins.list",
        ),
        (
            "x_coords",
            x.coords.astype(mx.float32),
            r"'x_coords' has element type f32 but the "
            r"artifact declares tensor<\?x4xi32>",
        ),
        ("x_features", x.feats.astype(mx.float16), r"element type f16 .* tensor<\?x4xf32>"),
        (
            "x_features",
            x.feats[:, :3],
            r"'x_features' has shape \(\d+, 3\) but the artifact "
            r"declares \(\?x4\)",
        ),
        (
            "x_active",
            mx.array(x.num_rows, dtype=mx.int32),
            r"'x_active' has shape \(\) but the "
            r"artifact declares \(1\)",
        ),
        (
            "target_features",
            t.feats[:-1],
            r"input 'target': coords have \d+ rows but features "
            r"have \d+",
        ),
    ]
    for name, value, message in cases:
        _reject(setup, message, **dict(abi, **{name: value}))


@pytest.mark.usefixtures("no_execution")
def test_wrong_sparse_values(setup: dict[str, Any]) -> None:
    x, t = setup["x"], setup["t"]
    _reject(
        setup,
        r"input 'x' \.feats has element type f16 but the artifact declares "
        r"tensor<\?x4xf32>",
        x.astype(mx.float16),
        t,
    )
    _reject(
        setup,
        r"input 'target' \.feats has shape \(\d+, 4\) but the artifact declares "
        r"\(\?x2\)",
        x,
        x,
    )
    _reject(
        setup,
        r"input 'x' is a SparseTensor at stride \(2, 2, 2\), but the artifact declares "
        r"stride \(1, 1, 1\)",
        random_sparse(np.random.default_rng(0), 20, 4, stride=2),
        t,
    )
    _reject(
        setup,
        r"input 'x' is a sparse input and takes a "
        r"SparseTensor \(of mlx_lattice on MLX, of torch_lattice on torch\), got "
        r"numpy.ndarray",
        np.zeros(3),
        target=t,
    )


def test_dense_input_rejects_sparse_values(tmp_path: Path, no_execution: None) -> None:
    rng = np.random.default_rng(9)
    b = MLIRModuleBuilder()
    sx = b.add_sparse_input("x", channels=4, dtype="f32")
    pv = b.add_input("points", "tensor<?x3xf32>")
    bv = b.add_input("batch", "tensor<?xi32>")
    av = b.add_input("active", "tensor<1xi32>")
    b.add_output(
        "y",
        b.devoxelize(
            points=pv, voxels=sx, batch_indices=bv, point_active_rows=av,
            voxel_size=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), interpolation="nearest",
        ),
    )  # fmt: skip
    program = save_and_load(tmp_path, b)
    x = random_sparse(rng, 20, 4)
    one = mx.array([2], dtype=mx.int32)
    with pytest.raises(
        ProgramCallError,
        match=r"input 'points' is a dense tensor input, got a SparseTensor \(of mlx_lattice",
    ):
        program(x, x, mx.zeros((1,), dtype=mx.int32), one)
    with pytest.raises(
        ProgramCallError,
        match=r"'points' has shape \(2, 4\) but the artifact "
        r"declares \(\?x3\)",
    ):
        program(x, points=mx.zeros((2, 4)), batch=mx.zeros((2,), dtype=mx.int32), active=one)


def test_sparse_abi_is_validated_before_kernels(setup: dict[str, Any]) -> None:
    x, t = setup["x"], setup["t"]
    dup = mx.concatenate([x.coords, x.coords[:1]], axis=0)
    feats = mx.concatenate([x.feats, x.feats[:1]], axis=0)
    active = mx.array([dup.shape[0]], dtype=mx.int32)
    with pytest.raises(ValueError, match=r"repeats an earlier row"):
        setup["program"](**dict(_abi(x, t), x_coords=dup, x_features=feats, x_active=active))
    # the trusted entry skips exactly the duplicate/divisibility checks
    setup["program"].call_with_trusted_sparse_inputs(
        **dict(_abi(x, t), x_coords=dup, x_features=feats, x_active=active)
    )
    bad_active = mx.array([x.num_rows + 1], dtype=mx.int32)
    with pytest.raises(ValueError, match=r"active"):
        setup["program"].call_with_trusted_sparse_inputs(**dict(_abi(x, t), x_active=bad_active))


def test_active_prefix_is_honoured(setup: dict[str, Any]) -> None:
    x, t = setup["x"], setup["t"]
    keep = x.num_rows - 5
    padded = _abi(x, t)
    padded["x_active"] = mx.array([keep], dtype=mx.int32)
    got = setup["program"](**padded)
    prefix = SparseTensor(x.coords[:keep], x.feats[:keep])
    want = setup["program"](prefix, t)
    _check(got, want)

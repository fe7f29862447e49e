"""Fixture generation on the torch side: model + inputs -> fixture archive.

The expected outputs are computed by the torch runtime *executing the
exported artifact* (``torch_lattice.artifact.load_lattice_program``), not by
the eager model: the exporter has already checked that the two agree on the
example inputs, and for packed int4/int8 artifacts only the artifact program
sees the packed-then-dequantized weights that a deployment runtime must
reproduce.

torch is imported lazily, inside the functions, so importing this module
(or the rest of ``lattice_conformance``) never loads torch.
"""

from __future__ import annotations

import os
import platform
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lattice_conformance.archive import (
    Array,
    FixtureArchiveError,
    FixtureCase,
    SparseArrays,
    write_fixture_archive,
)


def _tensor_to_numpy(tensor: Any, key: str, dtypes: dict[str, str]) -> Array:
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        dtypes[key] = "bf16"
        tensor = tensor.float()
    return np.ascontiguousarray(tensor.numpy())


def _flatten_inputs(inputs: Any) -> list[Any]:
    """One call's inputs as the flat ABI list: each SparseTensor gives three arrays."""
    from torch_lattice import SparseTensor

    items = inputs if isinstance(inputs, tuple | list) else (inputs,)
    flat: list[Any] = []
    for item in items:
        if isinstance(item, SparseTensor):
            flat += [item.coords, item.feats, item.active_rows]
        else:
            flat.append(item)
    return flat


def expected_case(
    program: Any,
    inputs: Any,
    *,
    name: str,
    atol: float,
    rtol: float,
    description: str = "",
) -> FixtureCase:
    """Run ``program`` (a torch ``LatticeProgram``) on one call's inputs; build the case."""
    import torch
    from torch_lattice import SparseTensor

    plan = program.plan
    flat = _flatten_inputs(inputs)
    if len(flat) != len(plan.args):
        raise FixtureArchiveError(
            "bad_case",
            f"case {name!r}: the artifact takes {len(plan.args)} ABI inputs "
            f"({[a.abi_name for a in plan.args]}), the case gives {len(flat)}",
        )
    dtypes: dict[str, str] = {}
    abi_inputs = {
        arg.abi_name: _tensor_to_numpy(value, arg.abi_name, dtypes)
        for arg, value in zip(plan.args, flat, strict=True)
    }
    with torch.no_grad():
        result = program(*flat)
    results = result if isinstance(result, tuple) else (result,)
    if len(results) != len(plan.outputs):
        raise FixtureArchiveError(
            "bad_case",
            f"case {name!r}: program returned {len(results)} values, plan declares "
            f"{len(plan.outputs)}",
        )
    expected: dict[str, SparseArrays | Array] = {}
    for out, value in zip(plan.outputs, results, strict=True):
        if isinstance(value, SparseTensor):
            stride = tuple(int(s) for s in value.stride)
            expected[out.abi_name] = SparseArrays(
                _tensor_to_numpy(value.coords, f"{out.abi_name}.coords", dtypes),
                _tensor_to_numpy(value.feats, f"{out.abi_name}.features", dtypes),
                (stride[0], stride[1], stride[2]),
            )
        else:
            expected[out.abi_name] = _tensor_to_numpy(value, f"{out.abi_name}.value", dtypes)
    return FixtureCase(
        name=name,
        inputs=abi_inputs,
        expected=expected,
        atol=atol,
        rtol=rtol,
        dtypes=dtypes,
        description=description,
    )


def fixtures_from_torch_model(
    model: Any,
    inputs_list: Sequence[Any],
    *,
    artifact_dir: str | os.PathLike[str],
    quantize: Any = None,
    atol: float,
    rtol: float,
    names: Sequence[str] | None = None,
    descriptions: Sequence[str] | None = None,
) -> list[FixtureCase]:
    """Export ``model`` to ``artifact_dir`` and compute one case per input.

    ``inputs_list[i]`` is one call's inputs: a ``torch_lattice.SparseTensor``,
    or a tuple of SparseTensors and tensors in the model's argument order.
    The first element is the exporter's example input.  ``quantize`` is passed
    to ``save_lattice_model_artifact`` unchanged.
    """
    from torch_lattice.artifact import load_lattice_program
    from torch_lattice.export import save_lattice_model_artifact

    if not inputs_list:
        raise FixtureArchiveError("bad_case", "inputs_list is empty; give at least one input")
    count = len(inputs_list)
    names = list(names) if names is not None else [f"case-{i:04d}" for i in range(count)]
    descriptions = list(descriptions) if descriptions is not None else [""] * count
    if len(names) != count or len(descriptions) != count:
        raise FixtureArchiveError(
            "bad_case", "names and descriptions must have one entry per input"
        )
    example = inputs_list[0]
    example_args = example if isinstance(example, tuple) else (example,)
    # The exporter's own check (artifact on torch vs eager model) uses the
    # fixture's tolerances: both measure legitimate reordering of f16 sums.
    save_lattice_model_artifact(
        model, example_args, artifact_dir, quantize=quantize, atol=atol, rtol=rtol
    )
    program = load_lattice_program(artifact_dir)
    return [
        expected_case(program, inputs, name=n, atol=atol, rtol=rtol, description=d)
        for inputs, n, d in zip(inputs_list, names, descriptions, strict=True)
    ]


def torch_producer(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Provenance for the manifest: runtime, versions, device."""
    import torch
    from lattice_contract.artifact import DISTRIBUTIONS, distribution_version

    info = {
        "runtime": "torch_lattice",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": "cpu",
    }
    for package in ("torch_lattice", "lattice_contract", "lattice_conformance"):
        info[DISTRIBUTIONS[package]] = distribution_version(package)
    info.update(extra or {})
    return info


def write_torch_fixture_archive(
    path: str | os.PathLike[str],
    model: Any,
    inputs_list: Sequence[Any],
    *,
    atol: float,
    rtol: float,
    quantize: Any = None,
    names: Sequence[str] | None = None,
    descriptions: Sequence[str] | None = None,
    artifact_dir: str | os.PathLike[str] | None = None,
    producer: Mapping[str, str] | None = None,
) -> Path:
    """Export, compute expected outputs on torch, and write the archive (atomically)."""
    with tempfile.TemporaryDirectory(prefix="lattice-artifact-") as tmp:
        target_artifact = Path(artifact_dir) if artifact_dir is not None else Path(tmp) / "model"
        cases = fixtures_from_torch_model(
            model,
            inputs_list,
            artifact_dir=target_artifact,
            quantize=quantize,
            atol=atol,
            rtol=rtol,
            names=names,
            descriptions=descriptions,
        )
        return write_fixture_archive(
            path, target_artifact, cases, producer=torch_producer(producer)
        )

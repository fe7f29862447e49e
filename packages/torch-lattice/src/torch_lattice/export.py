"""Exporting a torch_lattice model to a verified lattice artifact.

``save_lattice_model_artifact(model, example_inputs, path)`` runs the model
once, in eval mode and without autograd, while a tracer
(:mod:`torch_lattice._trace`) observes every public functional op the model
calls.  Each observed call becomes one op of an
:class:`~lattice_contract.builder.module.MLIRModuleBuilder` (the exporter never
formats MLIR text itself):

* values are followed by object identity: the example inputs become entry
  arguments (a SparseTensor becomes its three ABI arguments and a
  ``lattice.sparse.make`` at its stride; a dense tensor one ``tensor``
  argument), and every op result becomes the builder value of its op;
* a dense op that reads ``x.feats`` (or ``x.coords``) of a traced sparse
  value gets them from one ``lattice.sparse.decompose`` of that value, and
  ``x.with_feats(f)`` becomes ``lattice.sparse.with_features``;
* ``conv3d`` / ``conv_transpose3d`` with ``coordinates=`` become the target
  ops; everything else maps to the schema op of the same name;
* parameters and buffers are recognised by identity and bound as
  ``lattice.weight`` ops whose storage key is their ``named_parameters()`` /
  ``named_buffers()`` name, so artifact keys equal ``state_dict`` keys
  (BatchNorm exports weight, bias, running_mean and running_var).

A value that reaches a traced op (or the outputs) without coming from a
traced op -- the output of a plain ``torch.nn`` module, of ``torch.relu``, a
SparseTensor built by hand inside ``forward`` -- stops the export with an
:class:`ExportError` naming the module that produced it or the module it was
used in.

``quantize={"bits": 4|8, "group_size": 32|64|128}`` (or the shorthand
``"int8"`` / ``"int4"``, group size 32) packs every conv and linear weight
whose input-channel count the group size divides; each one left dense gets a
:class:`~torch_lattice.quant_report.DenseWeightWarning` saying why.  Biases
and norm vectors are never packed.  ``report.quantization`` then holds what
quantization costs: the artifact's outputs against the *float* eager model
(max and p99 absolute error, argmax agreement per output), also stored in the
artifact's safetensors header for ``lattice inspect``
(:mod:`lattice_contract.artifact.export_report`).

Nothing is written until the artifact has proven itself: the graph is
verified by the native MLIR dialect, its plan frozen and type-checked,
executed by the torch artifact runtime on the example inputs, and its
outputs compared with the eager model's (coordinates exactly after canonical
ordering, features within ``rtol``/``atol``; a quantized export is compared
with the model running the packed-then-dequantized weights).  Only then is
the bundle written, atomically.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lattice_contract.artifact import METADATA_KEY, QuantizationReport
from lattice_contract.builder import BuilderError, MLIRModuleBuilder, tensor_type
from lattice_contract.dialect import REFERENCE_SYSTEM, check_quantization, outside_reference

from torch_lattice._progress import StageBar
from torch_lattice._trace import tracing
from torch_lattice.artifact.backend import dtype_name
from torch_lattice.artifact.io import flatten_weights, save_lattice_artifact
from torch_lattice.artifact.runtime import (
    ArtifactCapabilityError,
    LatticeProgram,
    LatticeValidationError,
    import_lattice_plan,
)
from torch_lattice.export_compare import DEFAULT_TOLERANCES, OutputCheck, compare_outputs
from torch_lattice.export_guard import ControlFlowGuard
from torch_lattice.export_trace import ExportError, GraphTracer
from torch_lattice.ops.quant import QuantizedWeight
from torch_lattice.quant_report import (
    MAPPING_FORM,
    expand_quantize,
    measure_quantization,
    warn_dense_weights,
)
from torch_lattice.sparse import SparseTensor

__all__ = [
    "DEFAULT_TOLERANCES",
    "ExportError",
    "ExportReport",
    "OutputCheck",
    "compare_outputs",
    "save_lattice_model_artifact",
]


@dataclass(frozen=True)
class ExportReport:
    """What :func:`save_lattice_model_artifact` wrote and how it was checked."""

    path: Path
    graph: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    ops: tuple[str, ...]
    weights: tuple[str, ...]
    packed_weights: tuple[str, ...]
    dense_unpackable_weights: tuple[str, ...]
    checks: tuple[OutputCheck, ...] = field(default_factory=tuple)
    quantization: QuantizationReport | None = None
    """With ``quantize=``: the artifact against the float model (``checks`` compares it
    with the dequantized weights, which only proves the packing is read right)."""


# ---------------------------------------------------------------------------
# Inputs, outputs and the public entry point.


def _as_tuple(value: Any, what: str) -> tuple[Any, ...]:
    if isinstance(value, (SparseTensor, torch.Tensor)):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(value)
    raise ExportError(
        f"{what} must be a SparseTensor, a torch.Tensor or a tuple/list of them, "
        f"got {type(value).__name__}"
    )


def _names(given: Sequence[str] | None, count: int, stem: str, what: str) -> tuple[str, ...]:
    if given is None:
        return (stem,) if count == 1 else tuple(f"{stem}{i}" for i in range(count))
    names = (given,) if isinstance(given, str) else tuple(given)
    if len(names) != count:
        raise ExportError(f"{what} has {len(names)} names for {count} values")
    return names


def _check_quantize(quantize: Mapping[str, Any] | None) -> dict[str, int] | None:
    if quantize is None:
        return None
    if not isinstance(quantize, Mapping) or set(quantize) != {"bits", "group_size"}:
        raise ExportError(
            f'quantize must be "int8", "int4" or a mapping {MAPPING_FORM}, got {quantize!r}'
        )
    try:
        bits, group = check_quantization(quantize["bits"], quantize["group_size"])
    except ValueError as exc:
        raise ExportError(f"quantize {exc}") from None
    return {"bits": bits, "group_size": group}


@contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield
    finally:
        for module, mode in modes.items():
            module.training = mode


@contextmanager
def _swapped(model: torch.nn.Module, replacement: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """Temporarily give the named parameters other values (the same Parameter objects)."""
    params: dict[str, torch.Tensor] = dict(model.named_parameters())
    params.update(dict(model.named_buffers()))
    saved = {}
    with torch.no_grad():
        for key, value in replacement.items():
            saved[key] = params[key].data
            params[key].data = value.to(params[key].device)
    try:
        yield
    finally:
        with torch.no_grad():
            for key, value in saved.items():
                params[key].data = value


def _device_of(inputs: Sequence[Any]) -> torch.device:
    for item in inputs:
        if isinstance(item, SparseTensor):
            return item.device
    for item in inputs:
        if isinstance(item, torch.Tensor):
            return item.device
    return torch.device("cpu")


def save_lattice_model_artifact(
    model: torch.nn.Module,
    example_inputs: Any,
    path: str | os.PathLike[str],
    *,
    quantize: Mapping[str, int] | str | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    progress: bool | None = None,
    portable: bool = False,
) -> ExportReport:
    """Trace ``model`` on ``example_inputs``, verify and check the artifact, then write it.

    ``example_inputs`` is one SparseTensor or tensor, or a tuple of them
    (``model(*example_inputs)``).  Input names default to ``x`` (``x0``,
    ``x1``... for several) and output names to ``y`` (``y0``...); a sparse
    input named ``x`` has ABI arguments ``x_coords``, ``x_features`` and
    ``x_active``.  ``rtol``/``atol`` default per output dtype
    (:data:`DEFAULT_TOLERANCES`).  Raises :class:`ExportError` (and writes
    nothing) when the model uses something the exporter cannot trace, when
    MLIR rejects the graph, or when the artifact's outputs differ from the
    eager model's; :class:`~torch_lattice.artifact.ArtifactCapabilityError`
    when the native module is missing.

    ``progress`` draws a bar of the export's stages on stderr (with tqdm);
    ``None`` shows it for models of at least
    :data:`~torch_lattice._progress.LARGE_MODEL_PARAMETERS` parameters.

    ``portable=True`` keeps the artifact within the reference system's dialect
    (mlx-lattice 0.6, see :data:`lattice_contract.dialect.LATTICE_ONLY`): an
    export that needs one of Lattice's extras raises :class:`ExportError`
    naming each one, where it is and its portable form, and writes nothing.
    """
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    with StageBar(model, progress, len(_STAGES)) as bar:
        return _export(
            model,
            example_inputs,
            path,
            quantize=quantize,
            input_names=input_names,
            output_names=output_names,
            rtol=rtol,
            atol=atol,
            bar=bar,
            portable=portable,
        )


_STAGES = ("trace", "verify", "run artifact", "compare", "write")


def _export(
    model: torch.nn.Module,
    example_inputs: Any,
    path: str | os.PathLike[str],
    *,
    quantize: Mapping[str, int] | str | None,
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    rtol: float | None,
    atol: float | None,
    bar: StageBar,
    portable: bool = False,
) -> ExportReport:
    bar.stage("trace")
    inputs = _as_tuple(example_inputs, "example_inputs")
    if not inputs:
        raise ExportError("example_inputs is empty; pass the values model(...) takes")
    try:
        packing = _check_quantize(expand_quantize(quantize))
    except ValueError as exc:
        raise ExportError(str(exc)) from None
    in_names = _names(input_names, len(inputs), "x", "input_names")

    builder = MLIRModuleBuilder()
    tracer = GraphTracer(model, builder, packing)
    try:
        for name, item in zip(in_names, inputs, strict=True):
            if isinstance(item, SparseTensor):
                value = builder.add_sparse_input(
                    name,
                    channels=item.num_channels,
                    dtype=dtype_name(item.dtype),
                    stride=item.stride,
                )
            elif isinstance(item, torch.Tensor):
                # Rows are dynamic, except an int32 (1,) tensor: an active-row count
                # (tensor<1xi32>, as voxelize / devoxelize read it).
                count = item.dtype == torch.int32 and tuple(item.shape) == (1,)
                shape = [1] if count else [None, *(int(d) for d in item.shape[1:])]
                value = builder.add_input(name, tensor_type(shape, dtype_name(item.dtype)))
            else:
                raise ExportError(
                    f"example input {name!r} is a {type(item).__name__}; inputs must be "
                    "SparseTensors or tensors"
                )
            tracer.register(item, value)
    except BuilderError as exc:
        raise ExportError(f"cannot declare the inputs: {exc}") from None

    with (
        _eval_mode(model),
        torch.no_grad(),
        tracer.hooks(model),
        tracing(tracer),
        ControlFlowGuard(tracer),
    ):
        eager = model(*inputs)
    outputs = _as_tuple(eager, "the model's output")
    out_names = _names(output_names, len(outputs), "y", "output_names")
    try:
        for name, item in zip(out_names, outputs, strict=True):
            builder.add_output(name, tracer.lookup(item, f"output {name!r}"))
        graph = builder.build()
    except BuilderError as exc:
        raise ExportError(f"cannot declare the outputs: {exc}") from None

    expected = outputs
    if tracer.packed:
        dequantized = {}
        for key in tracer.packed:
            packed = tracer.weights[key]
            assert isinstance(packed, QuantizedWeight)
            dequantized[key] = packed.dequantize(packed.scales.dtype)
        with _eval_mode(model), torch.no_grad(), _swapped(model, dequantized):
            expected = _as_tuple(model(*inputs), "the model's output")

    bar.stage("verify")
    try:
        plan = import_lattice_plan(graph)
    except LatticeValidationError as exc:
        raise ExportError(
            f"MLIR rejected the exported graph (an exporter bug, please report):\n{exc.diagnostics}"
        ) from None
    outside = outside_reference(plan.ops) if portable else []
    if outside:
        raise ExportError(
            f"portable=True: the model needs Lattice-only features that {REFERENCE_SYSTEM}'s "
            "verifier refuses; change the model to their portable forms, or export with "
            "portable=False (the artifact then runs on Lattice's runtimes only). "
            "Nothing was written:\n" + "\n".join(f"  {line}" for line in outside)
        )
    flat = flatten_weights(tracer.weights)
    bar.stage("run artifact")
    try:
        program = LatticeProgram(plan, flat, device=_device_of(inputs))
        actual = _as_tuple(program(*inputs), "the artifact's output")
    except ArtifactCapabilityError:
        raise
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ExportError(f"the exported artifact does not run on torch: {exc}") from exc
    bar.stage("compare")
    checks = compare_outputs(expected, actual, out_names, rtol=rtol, atol=atol)
    failed = [c for c in checks if not c.passed]
    if failed:
        lines = "\n".join(
            f"  {c.name}: {c.problem} (max abs error {c.max_abs_error:.3g}, "
            f"max rel error {c.max_rel_error:.3g})"
            for c in failed
        )
        raise ExportError(
            "the exported artifact does not reproduce the eager model on the example inputs; "
            f"nothing was written:\n{lines}"
        )
    quantization = None
    metadata = None
    if packing is not None:
        quantization = measure_quantization(
            packing, tracer.packed, tracer.unpackable, tracer.weights, outputs, actual, out_names
        )
        warn_dense_weights(quantization)
        metadata = {METADATA_KEY: quantization.to_json()}
    bar.stage("write")
    save_lattice_artifact(path, graph, tracer.weights, metadata=metadata)
    return ExportReport(
        path=Path(path),
        graph=graph,
        input_names=in_names,
        output_names=out_names,
        ops=tuple(tracer.ops),
        weights=tuple(tracer.weights),
        packed_weights=tuple(tracer.packed),
        dense_unpackable_weights=tuple(tracer.unpackable),
        checks=checks,
        quantization=quantization,
    )

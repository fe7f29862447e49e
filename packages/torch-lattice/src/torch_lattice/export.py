"""Exporting a torch_lattice model to a verified lattice artifact.

``save_lattice_model_artifact(model, example_inputs, path)`` runs the model
once, in eval mode and without autograd, while a tracer
(:mod:`torch_lattice._trace`) observes every public functional op the model
calls.  Each observed call becomes one op of an
:class:`~lattice_contract.builder.MLIRModuleBuilder` (the exporter never
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
(:mod:`lattice_contract.export_report`).

Nothing is written until the artifact has proven itself: the graph is
verified by the native MLIR dialect, its plan frozen and type-checked,
executed by the torch artifact runtime on the example inputs, and its
outputs compared with the eager model's (coordinates exactly after canonical
ordering, features within ``rtol``/``atol``; a quantized export is compared
with the model running the packed-then-dequantized weights).  Only then is
the bundle written, atomically.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from lattice_contract.builder import BuilderError, MLIRModuleBuilder, Value, tensor_type
from lattice_contract.export_report import METADATA_KEY, QuantizationReport
from lattice_contract.schema import SCHEMA, OpDef, TypeKind, WeightFamily

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
from torch_lattice.coords import canonical_order
from torch_lattice.ops.quant import QuantizedWeight, quantize_weight
from torch_lattice.quant_report import (
    GROUP_SIZES,
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


class ExportError(ValueError):
    """The model cannot be exported, or its artifact does not reproduce it (nothing written)."""


DEFAULT_TOLERANCES: Mapping[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (5e-2, 1e-2),
}
"""``(rtol, atol)`` per output dtype used when the caller gives none."""

_LAYOUT_OF_FAMILY = {
    WeightFamily.conv3d: "conv3d_o_xyz_i",
    WeightFamily.linear: "linear_o_i",
    WeightFamily.bias: "bias_c",
    WeightFamily.channel: "channel_c",
    WeightFamily.embedding: "embedding_n_c",
}
_PACKABLE = (WeightFamily.conv3d, WeightFamily.linear)
# Functional parameter names that differ from the schema's operand names.
_RENAME = {"x": "input", "self": "input", "feats": "features", "coordinates": "target"}
_TARGET_VARIANT = {
    "conv3d": "target_conv3d",
    "conv_transpose3d": "target_conv_transpose3d",
    "normalized_conv_transpose3d": "target_normalized_conv_transpose3d",
}

# Ops whose target is an optional operand of the one op (``coordinates=`` -> ``target``).
_OPTIONAL_TARGET = frozenset(
    op.python_name
    for op in SCHEMA.ops.values()
    if any(o.name == "target" and o.optional for o in op.operands)
)

# ---------------------------------------------------------------------------
# Report and output comparison.


@dataclass(frozen=True)
class OutputCheck:
    """How one artifact output compared with the eager model's."""

    name: str
    kind: str  # "sparse" | "tensor"
    rows: int
    max_abs_error: float
    max_rel_error: float
    passed: bool
    problem: str = ""


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


def _feature_errors(
    expected: torch.Tensor, actual: torch.Tensor, rtol: float, atol: float
) -> tuple[float, float, bool]:
    """Max absolute error, max relative error (where ``|expected| > atol``), and pass/fail."""
    e = expected.detach().to(torch.float64)
    a = actual.detach().to(e.device, torch.float64)
    if e.numel() == 0:
        return 0.0, 0.0, True
    finite = torch.isfinite(e)
    # NaN and infinities must appear in the same places with the same values.
    same_special = torch.equal(torch.isnan(a), torch.isnan(e)) and torch.equal(
        torch.isinf(a), torch.isinf(e)
    )
    infinite = torch.isinf(e)
    same_special = same_special and torch.equal(a[infinite], e[infinite])
    diff = (a[finite] - e[finite]).abs()
    magnitude = e[finite].abs()
    if diff.numel() == 0:
        return 0.0, 0.0, same_special
    rel = torch.where(magnitude > atol, diff / magnitude, torch.zeros_like(diff))
    ok = same_special and bool(torch.all(diff <= atol + rtol * magnitude))
    return float(diff.max()), float(rel.max()), ok


def compare_outputs(
    expected: Sequence[Any],
    actual: Sequence[Any],
    names: Sequence[str],
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[OutputCheck, ...]:
    """Compare eager and artifact outputs value by value.

    Sparse values must have the same stride and, after canonical ordering,
    the same coordinates exactly; features (and dense tensors) must satisfy
    ``|actual - expected| <= atol + rtol * |expected|`` elementwise.  Default
    tolerances come from :data:`DEFAULT_TOLERANCES` by dtype.
    """
    checks: list[OutputCheck] = []
    for name, e, a in zip(names, expected, actual, strict=True):
        kind = "sparse" if isinstance(e, SparseTensor) else "tensor"
        ef = e.feats if isinstance(e, SparseTensor) else e
        r_default, a_default = DEFAULT_TOLERANCES.get(ef.dtype, (1e-4, 1e-5))
        rt = r_default if rtol is None else rtol
        at = a_default if atol is None else atol

        def fail(problem: str, *, kind: str = kind, name: str = name, rows: int = 0) -> None:
            checks.append(OutputCheck(name, kind, rows, float("inf"), float("inf"), False, problem))

        if isinstance(e, SparseTensor):
            if not isinstance(a, SparseTensor):
                fail(f"the artifact returned {type(a).__name__}, the model a SparseTensor")
                continue
            if a.stride != e.stride:
                fail(f"stride {a.stride} differs from the model's {e.stride}")
                continue
            if a.num_rows != e.num_rows:
                fail(f"{a.num_rows} rows, the model has {e.num_rows}", rows=e.num_rows)
                continue
            pe = canonical_order(e.coords)
            pa = canonical_order(a.coords)
            if not torch.equal(e.coords[pe].cpu(), a.coords[pa].cpu()):
                fail("coordinates differ after canonical ordering", rows=e.num_rows)
                continue
            ev, av = e.feats[pe], a.feats[pa]
        else:
            if not isinstance(a, torch.Tensor):
                fail(f"the artifact returned {type(a).__name__}, the model a tensor")
                continue
            if tuple(a.shape) != tuple(e.shape):
                fail(f"shape {tuple(a.shape)} differs from the model's {tuple(e.shape)}")
                continue
            ev, av = e, a
        if av.dtype != ev.dtype:
            fail(f"dtype {av.dtype} differs from the model's {ev.dtype}", rows=int(ev.shape[0]))
            continue
        abs_err, rel_err, ok = _feature_errors(ev, av, rt, at)
        problem = "" if ok else f"features differ beyond rtol={rt}, atol={at}"
        checks.append(OutputCheck(name, kind, int(ev.shape[0]), abs_err, rel_err, ok, problem))
    return tuple(checks)


# ---------------------------------------------------------------------------
# The tracer.


def _describe_module(name: str, module: torch.nn.Module) -> str:
    kind = type(module)
    where = f"module {name!r}" if name else "the model's own forward"
    return f"{where} ({kind.__module__}.{kind.__qualname__})"


def _walk(value: Any) -> Iterator[Any]:
    """Tensors and SparseTensors inside a (nested) module output."""
    if isinstance(value, (torch.Tensor, SparseTensor)):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk(item)


class _GraphTracer:
    """Records outermost traced op calls as builder ops, following values by identity."""

    def __init__(
        self,
        model: torch.nn.Module,
        builder: MLIRModuleBuilder,
        quantize: Mapping[str, int] | None,
    ) -> None:
        self.builder = builder
        self.quantize = quantize
        # id -> (object kept alive, builder value)
        self.values: dict[int, tuple[Any, Value]] = {}
        # id of a sparse value's feats / coords tensor -> the sparse value
        self.components: dict[int, SparseTensor] = {}
        self.decomposed: dict[int, tuple[Value, Value, Value]] = {}
        self.param_names: dict[int, str] = {}
        self.params: dict[int, torch.Tensor] = {}
        for name, p in model.named_parameters():
            self.param_names[id(p)] = name
            self.params[id(p)] = p
        for name, b in model.named_buffers():
            if id(b) not in self.param_names:
                self.param_names[id(b)] = name
                self.params[id(b)] = b
        self.bound: dict[str, tuple[WeightFamily, Value]] = {}
        self.weights: dict[str, torch.Tensor | QuantizedWeight] = {}
        self.packed: list[str] = []
        self.unpackable: list[str] = []
        self.ops: list[str] = []
        self.stack: list[tuple[str, torch.nn.Module]] = []
        # id -> (object kept alive, description of the untraced module that produced it)
        self.untraced: dict[int, tuple[Any, str]] = {}

    # -- module context -------------------------------------------------------

    @contextmanager
    def hooks(self, model: torch.nn.Module) -> Iterator[None]:
        handles = []
        for name, module in model.named_modules():

            def pre(mod: torch.nn.Module, args: Any, name: str = name) -> None:
                self.stack.append((name, mod))

            def post(mod: torch.nn.Module, args: Any, output: Any, name: str = name) -> None:
                if self.stack and self.stack[-1][1] is mod:
                    self.stack.pop()
                for item in _walk(output):
                    key = id(item)
                    if key not in self.values and key not in self.untraced | self.components:
                        self.untraced[key] = (item, _describe_module(name, mod))

            handles.append(module.register_forward_pre_hook(pre))
            handles.append(module.register_forward_hook(post))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def where(self) -> str:
        if not self.stack:
            return "the model's forward"
        name, module = self.stack[-1]
        return _describe_module(name, module)

    # -- values ---------------------------------------------------------------

    def register(self, obj: Any, value: Value) -> None:
        self.values[id(obj)] = (obj, value)
        if isinstance(obj, SparseTensor):
            self.components.setdefault(id(obj.feats), obj)
            self.components.setdefault(id(obj.coords), obj)

    def _decompose(self, sparse: SparseTensor) -> tuple[Value, Value, Value]:
        key = id(sparse)
        if key not in self.decomposed:
            parts = self.builder.emit("sparse.decompose", input=self.values[key][1])
            assert isinstance(parts, tuple)
            self.decomposed[key] = (parts[0], parts[1], parts[2])
            self.ops.append("lattice.sparse.decompose")
        return self.decomposed[key]

    def _untraced_problem(self, obj: Any) -> str:
        found = self.untraced.get(id(obj))
        kind = "a SparseTensor" if isinstance(obj, SparseTensor) else "a tensor"
        if found is not None:
            return (
                f"{kind} produced by {found[1]}, which is not traced by the exporter; build "
                "the model from torch_lattice.nn modules and torch_lattice.ops functions"
            )
        if isinstance(obj, SparseTensor):
            return (
                f"{kind} built outside the traced ops (e.g. SparseTensor(...) inside forward); "
                "derive it with torch_lattice.ops or x.with_feats(...)"
            )
        return (
            f"{kind} computed by a torch operation outside torch_lattice.ops (such as "
            "torch.relu, slicing or +); use the torch_lattice.ops / torch_lattice.nn "
            "equivalent"
        )

    def lookup(self, obj: Any, what: str) -> Value:
        """The builder value of a traced object (decomposing sparse values on demand)."""
        found = self.values.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        if isinstance(obj, torch.Tensor):
            owner = self.components.get(id(obj))
            if owner is not None:
                coords, feats, _ = self._decompose(owner)
                if obj is owner.feats:
                    return feats
                if obj is owner.coords:
                    return coords
        if id(obj) in self.params:
            raise ExportError(
                f"{what} in {self.where()} is the parameter/buffer "
                f"{self.param_names[id(obj)]!r}, used where a data value is expected; "
                "weights can only feed weight operands"
            )
        raise ExportError(f"{what} in {self.where()} is {self._untraced_problem(obj)}")

    # -- weights --------------------------------------------------------------

    def weight(self, obj: Any, family: WeightFamily, what: str, in_dtype: str | None) -> Value:
        if isinstance(obj, QuantizedWeight):
            raise ExportError(
                f"{what} in {self.where()} is a QuantizedWeight object; keep float "
                "parameters in the model and pass quantize={...} to the exporter"
            )
        if not isinstance(obj, torch.Tensor) or id(obj) not in self.params:
            raise ExportError(
                f"{what} in {self.where()} is not a parameter or buffer of the model; "
                "weights must be registered on a module (nn.Parameter or register_buffer) "
                "so that they get a storage key"
            )
        key = self.param_names[id(obj)]
        if key in self.bound:
            bound_family, value = self.bound[key]
            if bound_family is not family:
                raise ExportError(
                    f"{what} in {self.where()}: parameter {key!r} is used both as a "
                    f"{bound_family.value} weight and as a {family.value} weight; one storage "
                    "key has one meaning"
                )
            return value
        tensor = obj.detach()
        if not tensor.is_floating_point():
            raise ExportError(f"{what} in {self.where()}: parameter {key!r} is not floating point")
        dtype = dtype_name(tensor.dtype)
        if in_dtype is not None and dtype != in_dtype:
            raise ExportError(
                f"{what} in {self.where()}: parameter {key!r} is {tensor.dtype} but the "
                f"features are {in_dtype}; convert the whole model and its example inputs to "
                "one dtype (e.g. model.half() and half features) before exporting"
            )
        kwargs: dict[str, Any] = {
            "storage_key": key,
            "layout": _LAYOUT_OF_FAMILY[family],
            "shape": tuple(int(d) for d in tensor.shape),
        }
        stored: torch.Tensor | QuantizedWeight = tensor
        if self.quantize is not None and family in _PACKABLE:
            bits, group = self.quantize["bits"], self.quantize["group_size"]
            if tensor.shape[-1] % group == 0:
                stored = quantize_weight(tensor, bits=bits, group_size=group)
                kwargs["packing"] = {
                    "bits": f"int{bits}",
                    "group_size": group,
                    "scale_dtype": dtype,
                    "mode": "affine",
                }
                self.packed.append(key)
            else:
                self.unpackable.append(key)
        if "packing" not in kwargs:
            kwargs["dtype"] = dtype
        value = self._emit("weight", kwargs)
        self.bound[key] = (family, value)
        self.weights[key] = stored
        return value

    # -- ops ------------------------------------------------------------------

    def _emit(self, op: str, kwargs: dict[str, Any]) -> Value:
        try:
            value = self.builder.emit(op, **kwargs)
        except BuilderError as exc:
            raise ExportError(f"{self.where()}: {exc}") from None
        assert isinstance(value, Value)
        self.ops.append(SCHEMA.op(op).mlir_name)
        return value

    def record(
        self,
        op_name: str,
        fn: Callable[..., Any],
        bound_arguments: inspect.BoundArguments,
        result: Any,
    ) -> None:
        bound_arguments.apply_defaults()
        args = dict(bound_arguments.arguments)
        if op_name in _TARGET_VARIANT and args.get("coordinates") is not None:
            op_name = _TARGET_VARIANT[op_name]
        elif op_name not in _OPTIONAL_TARGET:
            args.pop("coordinates", None)
        try:
            definition = SCHEMA.op(op_name)
        except KeyError:
            raise ExportError(
                f"{self.where()} calls traced op {op_name!r}, which is not a lattice dialect op"
            ) from None
        kwargs = self._arguments(definition, args)
        value = self._emit(definition.name, kwargs)
        if isinstance(result, (SparseTensor, torch.Tensor)):
            self.register(result, value)
        else:  # pragma: no cover - every traced op returns one value
            raise ExportError(f"traced op {op_name!r} returned {type(result).__name__}")

    def _arguments(self, definition: OpDef, args: Mapping[str, Any]) -> dict[str, Any]:
        operands = {o.name: o for o in definition.operands}
        attributes = {a.name for a in definition.attributes}
        kwargs: dict[str, Any] = {}
        pending_weights: list[tuple[str, Any, WeightFamily]] = []
        for raw_name, raw in args.items():
            name = _RENAME.get(raw_name, raw_name)
            what = f"argument {raw_name!r} of {definition.mlir_name}"
            if definition.name == "cast" and raw_name == "dtype":
                kwargs["dtype"] = _float_dtype_name(raw, what)
            elif name in operands:
                operand = operands[name]
                if raw is None:
                    if operand.optional:
                        continue
                    hint = ""
                    if operand.type.kind is TypeKind.active:
                        hint = (
                            "; the artifact reads the active-row count from an input: make it "
                            "an argument of forward (an int32 tensor of shape (1,)) and pass it"
                        )
                    raise ExportError(f"{what} in {self.where()} is None but is required{hint}")
                if operand.type.kind is TypeKind.weight:
                    pending_weights.append((name, raw, operand.type.families[0]))
                else:
                    kwargs[name] = self.lookup(raw, what)
            elif name in attributes:
                kwargs[name] = raw
            else:
                raise ExportError(
                    f"{self.where()}: {definition.mlir_name} has no operand or attribute for "
                    f"the functional argument {raw_name!r}; the exporter and the schema disagree"
                )
        in_dtype = _input_dtype(kwargs)
        for name, raw, family in pending_weights:
            what = f"argument {name!r} of {definition.mlir_name}"
            kwargs[name] = self.weight(raw, family, what, in_dtype)
        return kwargs


def _input_dtype(kwargs: Mapping[str, Any]) -> str | None:
    """The float type the op's weights must share; None when it has no float input.

    ``embedding_lookup`` reads only an i32 index vector, so its table's own
    dtype decides the result's.
    """
    for key in ("input", "lhs", "features"):
        value = kwargs.get(key)
        if isinstance(value, Value):
            return value.dtype
    return None


def _float_dtype_name(raw: Any, what: str) -> str:
    if isinstance(raw, torch.dtype):
        return dtype_name(raw)
    if isinstance(raw, str):
        return {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}.get(raw, raw)
    raise ExportError(f"{what} is {raw!r}; expected a float dtype")


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
            'quantize must be "int8", "int4" or a mapping {"bits": 4|8, "group_size": '
            f"32|64|128}}, got {quantize!r}"
        )
    bits, group = quantize["bits"], quantize["group_size"]
    if bits not in (4, 8) or isinstance(bits, bool):
        raise ExportError(f"quantize bits must be 4 or 8, got {bits!r}")
    if group not in GROUP_SIZES or isinstance(group, bool):
        raise ExportError(f"quantize group_size must be 32, 64 or 128, got {group!r}")
    return {"bits": int(bits), "group_size": int(group)}


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
    tracer = _GraphTracer(model, builder, packing)
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

    with _eval_mode(model), torch.no_grad(), tracer.hooks(model), tracing(tracer):
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

"""The export tracer: observed functional op calls become contract builder ops.

While the model runs once under :func:`torch_lattice._trace.tracing`,
:class:`GraphTracer` receives every outermost public op call, follows
values by object identity (entry arguments, op results, the ``feats`` and
``coords`` of a traced sparse value through one ``lattice.sparse.decompose``),
binds parameters and buffers as ``lattice.weight`` ops under their
``state_dict`` names (packing conv and linear weights when asked to), and
emits each op through :class:`~lattice_contract.builder.module.MLIRModuleBuilder`.
A value that did not come from a traced op is an :class:`ExportError` naming
the module that produced it.  See :mod:`torch_lattice.export` for the whole
export.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from lattice_contract.builder import BuilderError, MLIRModuleBuilder, Value
from lattice_contract.dialect import SCHEMA, OpDef, TypeKind, WeightFamily

from torch_lattice.artifact.backend import dtype_name
from torch_lattice.ops.quant import QuantizedWeight, quantize_weight
from torch_lattice.sparse import SparseTensor

__all__ = ["ExportError", "GraphTracer"]


class ExportError(ValueError):
    """The model cannot be exported, or its artifact does not reproduce it (nothing written)."""


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


class GraphTracer:
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
            "layout": family.layout.value,
            "shape": tuple(int(d) for d in tensor.shape),
        }
        stored: torch.Tensor | QuantizedWeight = tensor
        if self.quantize is not None and family.packable:
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
        value = self._emit("weight", kwargs, key.rpartition(".")[0] or None)
        self.bound[key] = (family, value)
        self.weights[key] = stored
        return value

    # -- ops ------------------------------------------------------------------

    def _emit(self, op: str, kwargs: dict[str, Any], location: str | None = None) -> Value:
        # The op's MLIR location is the module path it came from: the weight's
        # module, else the innermost module running (``lattice view`` and runtime
        # errors show it).
        if location is None and self.stack:
            location = self.stack[-1][0]
        self.builder.set_location(location or None)
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

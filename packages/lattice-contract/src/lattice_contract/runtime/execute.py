"""Compiling a plan against a runtime's lowerings, binding calls, and running it.

This is the part of program execution no backend changes:

* :func:`compile_plan` type-checks the plan (with the runtime's primitive
  implementations), requires a lowering for every schema op, resolves every
  ``lattice.weight`` against the safetensors entries, runs the static weight
  checks, and produces :class:`CompiledStep` records that bind each lowering
  parameter to a value label or an attribute value by schema name.
* :func:`bind_call` turns ``program(...)`` arguments into values for the
  entry labels.  It accepts exactly three call forms -- logical inputs (one
  SparseTensor per logical sparse input, positional or by logical name),
  positional ABI arrays, and keyword ABI arrays (positional first, then
  keywords, like a Python call) -- and rejects mixed forms, missing,
  duplicate, unexpected and wrong-typed inputs before any op runs.
* :func:`run_program` is the interpreter loop: ops run in plan order (the
  ``sparse.make`` ops fed only by entry arguments first, so the sparse ABI is
  validated before any kernel runs), values are released after their last
  use, and the returned labels come back in order.

Runtimes supply a :class:`~lattice_contract.runtime.lowering.RuntimeBackend` and a
:class:`~lattice_contract.runtime.lowering.LoweringRegistry`; see ``mlx_lattice.artifact``
for one complete use.  Each runtime's ``LatticeProgram`` derives from
:class:`LatticeProgramBase`, which holds the ABI properties and the call glue
so both runtimes expose the same surface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from lattice_contract.frontend import ARRAY_TYPES, feature_keyword_aliases
from lattice_contract.plan import (
    LogicalInput,
    PlanArgument,
    PlanOperation,
    PlanOutput,
    RuntimePlan,
    TypedPlan,
    ValueType,
    typecheck_plan,
)
from lattice_contract.runtime.lowering import (
    ArtifactLowering,
    ExecutionContext,
    LoweringError,
    LoweringRegistry,
    ResolvedWeight,
    RuntimeBackend,
    WeightContractError,
    resolve_weight,
)

__all__ = [
    "SPARSE_COMPONENT_ALIASES",
    "CompiledProgram",
    "CompiledStep",
    "LatticeProgramBase",
    "ProgramCallError",
    "bind_call",
    "compile_plan",
    "run_program",
    "unwrap_results",
]

SPARSE_COMPONENT_ALIASES: tuple[str, str, str] = ("coords", "features", "active")
"""Keyword aliases of the three ABI arrays when a program has one sparse input."""


class ProgramCallError(TypeError, ValueError):
    """A program call does not match the artifact's input ABI (nothing ran)."""


@dataclass(frozen=True)
class CompiledStep:
    """One op bound to its lowering.

    ``operands`` lists ``(parameter, labels, arity)`` with arity ``one``,
    ``optional`` or ``variadic``; ``attrs`` holds every attribute parameter
    (``None`` for an absent optional one); ``weights`` the resolved weight of
    each weight parameter; ``release`` the labels whose last use is this step;
    ``result_types`` the checked types of the op's results.
    """

    index: int
    operation: PlanOperation
    lowering: ArtifactLowering
    operands: tuple[tuple[str, tuple[str, ...], str], ...]
    attrs: Mapping[str, Any]
    weights: Mapping[str, ResolvedWeight]
    release: tuple[str, ...]
    result_types: tuple[ValueType, ...] = ()

    @property
    def where(self) -> str:
        """``op #3 (lattice.conv3d -> v3)`` for diagnostics."""
        return f"op #{self.index} ({self.operation.describe()})"


@dataclass(frozen=True)
class CompiledProgram:
    """A type-checked plan, its resolved weights and its bound steps."""

    plan: RuntimePlan
    typed: TypedPlan
    steps: tuple[CompiledStep, ...]
    weights: Mapping[str, ResolvedWeight]
    registry: LoweringRegistry
    backend: RuntimeBackend

    def context(self, *, trusted_sparse_inputs: bool = False) -> ExecutionContext:
        """A fresh execution context for one call."""
        return ExecutionContext(
            backend=self.backend,
            weights=self.weights,
            primitives=self.registry.primitives,
            trusted_sparse_inputs=trusted_sparse_inputs,
        )


def _resolve_weights(
    plan: RuntimePlan, typed: TypedPlan, store: Mapping[str, Any], backend: RuntimeBackend
) -> tuple[dict[str, ResolvedWeight], dict[str, ResolvedWeight]]:
    by_key: dict[str, ResolvedWeight] = {}
    by_label: dict[str, ResolvedWeight] = {}
    for op in plan.weight_operations():
        label = op.results[0]
        vt = typed[label]
        key = op.attrs["storage_key"]
        packing = op.attrs.get("packing")
        assert vt.family is not None
        previous = by_key.get(key)
        if previous is not None:
            if (previous.family, previous.layout, previous.dtype, previous.packing) != (
                vt.family,
                op.attrs["layout"],
                vt.dtype,
                packing,
            ):
                raise WeightContractError(
                    f"storage key {key!r} is declared twice with different types, layouts or "
                    "packing; each key has one meaning"
                )
            by_label[label] = previous
            continue
        resolved = resolve_weight(
            store,
            backend,
            storage_key=key,
            layout=op.attrs["layout"],
            family=vt.family,
            dtype=vt.dtype,
            packing=packing,
        )
        by_key[key] = resolved
        by_label[label] = resolved
    return by_key, by_label


def _schedule(plan: RuntimePlan) -> list[int]:
    """Op order: sparse.make ops fed only by entry arguments first, then the rest."""
    arg_labels = {a.name for a in plan.args}
    first = [
        i
        for i, op in enumerate(plan.ops)
        if op.definition.name == "sparse.make" and all(x in arg_labels for x in op.operands)
    ]
    taken = set(first)
    return first + [i for i in range(len(plan.ops)) if i not in taken]


def compile_plan(
    plan: RuntimePlan,
    registry: LoweringRegistry,
    backend: RuntimeBackend,
    weights: Mapping[str, Any],
) -> CompiledProgram:
    """Check and bind ``plan`` for one runtime; nothing runs yet.

    Raises :class:`~lattice_contract.plan.typecheck.PlanTypeError` for type errors,
    :class:`~lattice_contract.runtime.lowering.LoweringError` when the runtime lacks a
    lowering for any schema op, and
    :class:`~lattice_contract.runtime.lowering.WeightContractError` for weight payloads
    that do not match the graph.
    """
    registry.check_complete()
    typed = typecheck_plan(plan, registry.implemented_primitives)
    by_key, by_label = _resolve_weights(plan, typed, weights, backend)

    order = _schedule(plan)
    last_use: dict[str, int] = {}
    for position, index in enumerate(order):
        for label in plan.ops[index].operands:
            last_use[label] = position
    keep = set(plan.returns)

    steps: list[CompiledStep] = []
    for position, index in enumerate(order):
        op = plan.ops[index]
        lowering = registry.lowering(op.definition)
        operands: list[tuple[str, tuple[str, ...], str]] = []
        step_weights: dict[str, ResolvedWeight] = {}
        for (param, labels), operand_def in zip(
            op.operand_groups(), op.definition.operands, strict=True
        ):
            arity = (
                "variadic"
                if operand_def.variadic
                else "optional"
                if operand_def.optional
                else "one"
            )
            operands.append((param, labels, arity))
            for label in labels:
                if label in by_label:
                    step_weights[param] = by_label[label]
        attrs = {a.name: op.attrs.get(a.name) for a in op.definition.attributes}
        where = f"op #{index} ({op.describe()})"
        for param, spec in lowering.weights.items():
            if param in step_weights:
                spec.check_static(step_weights[param], attrs, step_weights, where)
                _check_declared_width(spec.kind, step_weights[param], typed[op.results[0]], where)
        release = tuple(
            sorted({x for x in op.operands if last_use.get(x) == position and x not in keep})
        )
        steps.append(
            CompiledStep(
                index=index,
                operation=op,
                lowering=lowering,
                operands=tuple(operands),
                attrs=MappingProxyType(
                    {k: v for k, v in attrs.items() if k not in lowering.omitted}
                ),
                weights=MappingProxyType(step_weights),
                release=release,
                result_types=tuple(typed[label] for label in op.results),
            )
        )
    return CompiledProgram(
        plan=plan,
        typed=typed,
        steps=tuple(steps),
        weights=MappingProxyType(by_key),
        registry=registry,
        backend=backend,
    )


def run_program(
    program: CompiledProgram,
    inputs: Mapping[str, Any],
    *,
    trusted_sparse_inputs: bool = False,
) -> tuple[Any, ...]:
    """Run every step on ``inputs`` (entry label -> value); return the returned values.

    An exception raised inside a lowering gets a note naming the op it came from.
    """
    context = program.context(trusted_sparse_inputs=trusted_sparse_inputs)
    env: dict[str, Any] = dict(inputs)
    missing = [a.name for a in program.plan.args if a.name not in env]
    if missing:
        raise ProgramCallError(f"no value bound for entry argument(s) {', '.join(missing)}")
    backend = program.backend
    for step in program.steps:
        kwargs: dict[str, Any] = {}
        for param, labels, arity in step.operands:
            if arity == "variadic":
                kwargs[param] = tuple(env[x] for x in labels)
            elif arity == "optional":
                kwargs[param] = env[labels[0]] if labels else None
            else:
                kwargs[param] = env[labels[0]]
        for param, spec in step.lowering.weights.items():
            if param in step.weights:
                spec.check_runtime(step.weights[param], kwargs, backend, step.where)
        kwargs.update(step.attrs)
        context.current_results = step.result_types
        context.current_op = step.operation.definition
        try:
            if step.lowering.takes_context:
                produced = step.lowering.function(context, **kwargs)
            else:
                produced = step.lowering.function(**kwargs)
        except Exception as exc:
            exc.add_note(f"while running {step.where} on the {backend.name} runtime")
            raise
        results = step.operation.results
        if len(results) == 1:
            env[results[0]] = produced
        else:
            if not isinstance(produced, (tuple, list)) or len(produced) != len(results):
                raise LoweringError(
                    f"{step.where}: the {backend.name} lowering returned "
                    f"{type(produced).__name__}; it must return {len(results)} values"
                )
            for label, value in zip(results, produced, strict=True):
                env[label] = value
        for label, declared in zip(results, step.result_types, strict=True):
            _check_declared_shape(backend, env[label], declared, step.where)
        for label in step.release:
            env.pop(label, None)
    results = tuple(env[label] for label in program.plan.returns)
    _check_outputs(program, results)
    return results


def _check_declared_width(
    kind: str, weight: ResolvedWeight, declared: ValueType, where: str
) -> None:
    """A linear or conv weight's C_out must be the static width its result type declares.

    The graph states feature widths only in tensor types (``tensor<?x8xf16>``);
    a weight file whose ``C_out`` differs would make the program return another
    width than its types say, so it is refused at load, naming the key.
    """
    if kind not in ("linear", "conv") or declared.kind != "tensor" or not declared.shape:
        return
    width = declared.shape[-1]
    c_out = weight.logical_shape[0]
    if width >= 0 and width != c_out:
        raise WeightContractError(
            f"{where}: weight {weight.storage_key!r} has {c_out} output channels (shape "
            f"{weight.logical_shape}) but the graph declares the result {declared.describe()} "
            f"({width} channels); re-export so the weights and the graph agree"
        )


def _check_declared_shape(
    backend: RuntimeBackend, value: Any, declared: ValueType, where: str
) -> None:
    """Every static dimension of a tensor result must hold (never a silently wider value)."""
    if declared.kind != "tensor" or declared.shape is None or not backend.is_array(value):
        return
    shape = backend.shape(value)
    want = declared.shape
    if len(shape) != len(want) or any(w >= 0 and s != w for s, w in zip(shape, want, strict=True)):
        raise WeightContractError(
            f"{where} produced shape {tuple(shape)} but the graph declares "
            f"{declared.describe()}; the weights do not match the graph's types, re-export them"
        )


def _check_outputs(program: CompiledProgram, results: Sequence[Any]) -> None:
    """Each returned value must be what the output ABI declares (a lowering bug otherwise)."""
    backend = program.backend
    for output, value in zip(program.plan.outputs, results, strict=True):
        declared = program.typed[output.name]
        if output.role == "sparse_tensor":
            if not backend.is_sparse(value):
                raise LoweringError(
                    f"output {output.abi_name!r} must be a {backend.sparse_type_name}, but the "
                    f"{backend.name} lowering produced {_type_name(value)}"
                )
            stored = backend.dtype_name(backend.decompose(value)[1])
        elif backend.is_array(value):
            stored = backend.dtype_name(value)
        else:
            raise LoweringError(
                f"output {output.abi_name!r} must be a {backend.array_type_name}, but the "
                f"{backend.name} lowering produced {_type_name(value)}"
            )
        if stored != declared.dtype:
            raise LoweringError(
                f"output {output.abi_name!r} is declared {declared.describe()} but the "
                f"{backend.name} lowering produced element type {stored}"
            )


def unwrap_results(values: Sequence[Any]) -> Any:
    """One returned value as itself; several as a tuple in return order."""
    return values[0] if len(values) == 1 else tuple(values)


# ---------------------------------------------------------------------------
# Call forms.


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


# What a call takes, in words that do not depend on the runtime: a bad call
# gets the same message from every runtime.
_ARRAY = f"array ({ARRAY_TYPES})"
_SPARSE = "SparseTensor (of mlx_lattice on MLX, of torch_lattice on torch)"


def _check_array(
    plan: RuntimePlan, backend: RuntimeBackend, arg: PlanArgument, value: Any, what: str
) -> None:
    if not backend.is_array(value):
        raise ProgramCallError(f"{what} must be an {_ARRAY}, got {_type_name(value)}")
    info = plan.type_info(arg.type)
    dtype = backend.dtype_name(value)
    if dtype != info.dtype:
        raise ProgramCallError(
            f"{what} has element type {dtype} but the artifact declares {arg.type}; convert "
            "it before the call"
        )
    shape = backend.shape(value)
    want = info.shape or ()
    if len(shape) != len(want) or any(w >= 0 and s != w for s, w in zip(shape, want, strict=False)):
        dims = "x".join("?" if d < 0 else str(d) for d in want)
        raise ProgramCallError(
            f"{what} has shape {tuple(shape)} but the artifact declares ({dims}) ({arg.type})"
        )


def _check_sparse_rows(
    backend: RuntimeBackend, group: Sequence[PlanArgument], values: Sequence[Any], what: str
) -> None:
    coords, feats = backend.shape(values[0]), backend.shape(values[1])
    if coords[0] != feats[0]:
        raise ProgramCallError(
            f"{what}: coords have {coords[0]} rows but features have {feats[0]}; row i of "
            f"{group[1].abi_name} belongs to row i of {group[0].abi_name}"
        )


def _aliases(plan: RuntimePlan, logical: Sequence[LogicalInput]) -> dict[str, str]:
    """Keyword aliases of ABI names: ``coords``/``features``/``active`` for one sparse input.

    Nothing else: a ``feats`` spelling is not bound (see :func:`_spelling_hint`).
    """
    sparse = [item for item in logical if item.kind == "sparse"]
    taken = {a.abi_name for a in plan.args} | {item.name for item in logical}
    aliases: dict[str, str] = {}
    if len(sparse) == 1 and not any(alias in taken for alias in SPARSE_COMPONENT_ALIASES):
        aliases = {
            alias: arg.abi_name
            for alias, arg in zip(SPARSE_COMPONENT_ALIASES, sparse[0].args, strict=True)
        }
    return aliases


def _spelling_hint(plan: RuntimePlan, key: str, aliases: Mapping[str, str]) -> str:
    """``; did you mean 'x_features'?`` for a ``feats`` spelling of an ABI name, else ``""``.

    Keywords bind by ABI name only: an artifact may name one input ``feats``
    and another ``features``, so a spelling is never taken for a name.
    """
    names = [*(a.abi_name for a in plan.args), *aliases]
    spelled = feature_keyword_aliases(names, set())
    return f"; did you mean {spelled[key]!r}?" if key in spelled else ""


def _assign(
    names: Sequence[str],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    rename: Mapping[str, str],
    what: str,
    check: Callable[[str, Any], None],
    hint: str,
    suggest: Callable[[str], str] = lambda key: "",
) -> dict[str, Any]:
    """Python-call style assignment of positional then keyword values to ``names``.

    ``check(name, value)`` validates each value as it is assigned, so a wrong
    value is reported as such even when other inputs are also missing.
    """
    if len(args) > len(names):
        raise ProgramCallError(
            f"{len(args)} positional {what} given, but the artifact takes {len(names)} "
            f"({', '.join(names)})"
        )
    chosen = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        name = rename.get(key, key)
        if name not in names:
            valid = [*names, *rename]
            raise ProgramCallError(
                f"unexpected input {key!r}; this artifact's {what} are {', '.join(valid)}"
                + suggest(key)
            )
        if name in chosen:
            raise ProgramCallError(
                f"input {name!r} is given twice (positionally and by name)"
                + (f"; keyword {key!r} aliases it" if key != name else "")
            )
        chosen[name] = value
    for name, value in chosen.items():
        check(name, value)
    missing = [n for n in names if n not in chosen]
    if missing:
        raise ProgramCallError(
            f"missing input(s) {', '.join(map(repr, missing))}; the artifact's {what} are "
            f"{', '.join(names)}{hint}"
        )
    return chosen


def _declared_stride(plan: RuntimePlan, item: LogicalInput) -> tuple[int, int, int] | None:
    """The stride ``lattice.sparse.make`` records for a sparse input, if one consumes it.

    The ABI arrays carry no stride; a SparseTensor does, so the shorthand call
    form can catch a value built at another lattice scale than the graph's.
    """
    coords = item.args[0].name
    for op in plan.ops:
        if op.definition.name == "sparse.make" and op.operands[:1] == (coords,):
            x, y, z = op.attrs["stride"]
            return (int(x), int(y), int(z))
    return None


def bind_call(
    plan: RuntimePlan,
    backend: RuntimeBackend,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> dict[str, Any]:
    """Map one ``program(*args, **kwargs)`` call to entry-label values.

    Logical form: every sparse logical input takes one SparseTensor (its three
    arrays are bound to the ABI arguments), every tensor input an array;
    values go positionally in input order or by logical name.  ABI form:
    arrays for the ABI arguments, positionally and/or by ABI name (and, for a
    program with one sparse input, by the aliases ``coords``, ``features``,
    ``active``).  Keywords bind by ABI name only: ``feats=`` for an input
    named ``features`` is refused with the right name suggested, since an
    artifact may have both names.  Passing any SparseTensor or logical-only name selects the
    logical form; everything else must then follow it.
    """
    logical = plan.logical_inputs
    abi = plan.args
    abi_names = [a.abi_name for a in abi]
    logical_names = [item.name for item in logical]
    aliases = _aliases(plan, logical)
    values = (*args, *kwargs.values())
    sparse_given = any(backend.is_sparse(v) for v in values)
    logical_only = [k for k in kwargs if k in logical_names and k not in abi_names]
    bound: dict[str, Any] = {}

    if sparse_given or logical_only:
        for key in kwargs:
            if key not in logical_names and (key in abi_names or key in aliases):
                raise ProgramCallError(
                    f"keyword {key!r} is an ABI array name, but this call passes SparseTensor "
                    "or logical inputs; use one form: program(x) with one SparseTensor per "
                    "sparse input, or ABI arrays only"
                )
        by_name = {item.name: item for item in logical}

        def check_logical(name: str, value: Any) -> None:
            item = by_name[name]
            if item.kind == "sparse":
                if not backend.is_sparse(value):
                    raise ProgramCallError(
                        f"input {name!r} is a sparse input and takes a "
                        f"{_SPARSE}, got {_type_name(value)}; do not mix "
                        "SparseTensor inputs with ABI arrays"
                    )
                parts = backend.decompose(value)
                for arg, part, label in zip(
                    item.args, parts, ("coords", "feats", "active_rows"), strict=True
                ):
                    _check_array(plan, backend, arg, part, f"input {name!r} .{label}")
                _check_sparse_rows(backend, item.args, parts, f"input {name!r}")
                declared = _declared_stride(plan, item)
                given = backend.stride(value)
                if declared is not None and given != declared:
                    raise ProgramCallError(
                        f"input {name!r} is a SparseTensor at stride {given}, but the artifact "
                        f"declares stride {declared} for it (lattice.sparse.make); pass "
                        "coordinates at the declared stride"
                    )
                for arg, part in zip(item.args, parts, strict=True):
                    bound[arg.name] = part
            else:
                if backend.is_sparse(value):
                    raise ProgramCallError(
                        f"input {name!r} is a dense tensor input, got a {_SPARSE}"
                    )
                _check_array(plan, backend, item.args[0], value, f"input {name!r}")
                bound[item.args[0].name] = value

        _assign(logical_names, args, kwargs, {}, "inputs", check_logical, "")
        return bound

    by_abi = {a.abi_name: a for a in abi}

    def check_abi(name: str, value: Any) -> None:
        _check_array(plan, backend, by_abi[name], value, f"input {name!r}")
        bound[by_abi[name].name] = value

    sparse_names = [item.name for item in logical if item.kind == "sparse"]
    hint = (
        f" (or pass one {_SPARSE} per sparse input: {', '.join(sparse_names)})"
        if sparse_names
        else ""
    )
    _assign(
        abi_names,
        args,
        kwargs,
        aliases,
        "ABI inputs",
        check_abi,
        hint,
        lambda key: _spelling_hint(plan, key, aliases),
    )
    for item in logical:
        if item.kind == "sparse":
            _check_sparse_rows(
                backend, item.args, [bound[a.name] for a in item.args], f"input {item.name!r}"
            )
    return bound


# ---------------------------------------------------------------------------
# The shared LatticeProgram surface.


class LatticeProgramBase:
    """The part of ``LatticeProgram`` that no runtime changes: ABI and call glue.

    A runtime's subclass checks the plan with :meth:`_check_plan`, sets
    ``plan`` and ``_compiled`` (from :func:`compile_plan`) in its own
    constructor, and keeps its own ``from_artifact`` and device handling.  It
    may override :meth:`_run` (to prepare arguments before binding),
    :meth:`_execute` (to wrap the interpreter, e.g. without autograd) and
    :meth:`_repr_extras`.  Keeping the rest here means both runtimes answer
    the same properties and bind calls the same way.
    """

    plan: RuntimePlan
    _compiled: CompiledProgram

    @staticmethod
    def _check_plan(plan: object) -> RuntimePlan:
        """``plan`` itself, or a ``TypeError`` when it is not a frozen ``RuntimePlan``."""
        if not isinstance(plan, RuntimePlan):
            raise TypeError(
                f"LatticeProgram needs a RuntimePlan (from RuntimePlan.from_native), got "
                f"{type(plan).__name__}"
            )
        return plan

    # -- ABI ------------------------------------------------------------------

    @property
    def inputs(self) -> tuple[PlanArgument, ...]:
        """The entry arguments (ABI names, types, roles) in order."""
        return self.plan.args

    @property
    def logical_inputs(self) -> tuple[LogicalInput, ...]:
        """The public inputs, sparse triples grouped under their logical names."""
        return self.plan.logical_inputs

    @property
    def outputs(self) -> tuple[PlanOutput, ...]:
        """The entry results (ABI names, types, roles) in order."""
        return self.plan.outputs

    @property
    def compiled(self) -> CompiledProgram:
        """The type-checked, weight-resolved, lowering-bound program."""
        return self._compiled

    @property
    def input_names(self) -> tuple[str, ...]:
        """Logical input names, in call order."""
        return tuple(item.name for item in self.plan.logical_inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        """ABI names of the returned values, in order."""
        return tuple(o.abi_name for o in self.plan.outputs)

    # -- execution ------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program; sparse inputs are fully validated first (see ``docs/semantics.md``).

        See the class docstring of the runtime's ``LatticeProgram`` for the call forms.
        """
        return self._run(args, kwargs, trusted=False)

    def call_with_trusted_sparse_inputs(self, *args: Any, **kwargs: Any) -> Any:
        """Run without the divisibility and duplicate-row checks of sparse inputs.

        For callers that already guarantee both (for example, inputs produced by
        this runtime); every other check still runs.
        """
        return self._run(args, kwargs, trusted=True)

    def _run(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], *, trusted: bool) -> Any:
        bound = bind_call(self.plan, self._compiled.backend, args, kwargs)
        return unwrap_results(self._execute(bound, trusted=trusted))

    def _execute(self, bound: Mapping[str, Any], *, trusted: bool) -> tuple[Any, ...]:
        return run_program(self._compiled, bound, trusted_sparse_inputs=trusted)

    def _repr_extras(self) -> tuple[str, ...]:
        """Runtime-specific trailing fields of the repr (the torch device, say)."""
        return ()

    def __repr__(self) -> str:
        ins = ", ".join(self.input_names)
        outs = ", ".join(self.output_names)
        fields = (f"({ins}) -> ({outs})", f"{len(self.plan.ops)} ops", *self._repr_extras())
        return f"LatticeProgram({', '.join(fields)})"

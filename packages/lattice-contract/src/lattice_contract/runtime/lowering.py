"""Schema-bound lowerings and weight resolution, shared by every runtime.

A runtime (``mlx_lattice``, ``torch_lattice``) owns one
:class:`LoweringRegistry` and registers one Python function per schema op::

    LOWERINGS = LoweringRegistry("mlx")

    @LOWERINGS.artifact_lowering(op="conv3d", weights={"weight": conv_weight(input="input")})
    def conv3d_from_artifact(input, weight, bias=None, *, kernel_size, stride, padding,
                             dilation, accumulation):
        return ops.conv3d(input, weight, bias, kernel_size=kernel_size, ...)

The two runtimes do not write their lowerings one by one: each builds its
registry with :func:`lattice_contract.runtime.standard_lowerings.standard_lowerings`,
which registers the one standard table through this same decorator, bound
to the runtime's :class:`~lattice_contract.runtime.ops.RuntimeAdapter`.

Registration checks the function against the schema: its parameters must be
exactly the op's operands (positional-or-keyword, in any order) and its
attributes (keyword-only), plus an optional leading ``context`` parameter
that receives the :class:`ExecutionContext`.  The executor then calls it
with every operand and attribute by name, so no lowering ever indexes raw
operand lists or attribute dicts, and a schema change that renames or adds
an operand or attribute breaks registration loudly instead of silently
misbinding.  Optional operands arrive as ``None`` when absent; a variadic
operand arrives as a tuple.

Ops that share exactly the same operands and attributes (``conv3d``,
``conv_transpose3d`` and ``generative_conv_transpose3d``, say) may share one
lowering: ``op=("conv3d", "conv_transpose3d", ...)`` registers the function
for each of them after checking that their signatures really are identical,
so a runtime states each distinct signature once.  Such a lowering takes
``context`` and tells the ops apart by ``context.op``.

``weights`` attaches a :class:`WeightSpec` to weight operands: the contract
checks the resolved weight's logical shape against the consumer (kernel size
at compile time, the input channel count at run time) and names the
safetensors key on mismatch.

Weights themselves are resolved once per program by :func:`resolve_weight`
from the safetensors entries (dense: ``<key>``; packed: ``<key>.weight``,
``<key>.scales``, ``<key>.biases``), with contract errors for missing
entries, incomplete triplets, shape mismatches and dtype drift.  Array
access goes through the runtime's :class:`RuntimeBackend` hooks, so this
module never imports a backend.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from lattice_contract.dialect import (
    SCHEMA,
    Op,
    OpDef,
    TypeKind,
    WeightLayout,
    layout_family,
    packed_geometry,
    rule_message,
)
from lattice_contract.plan import PlanError, ValueType

__all__ = [
    "ArtifactLowering",
    "ExecutionContext",
    "LoweringError",
    "LoweringRegistry",
    "ResolvedWeight",
    "RuntimeBackend",
    "WeightContractError",
    "WeightSpec",
    "bias_weight",
    "channel_weight",
    "conv_weight",
    "linear_weight",
    "resolve_weight",
]

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_PARAMETER = "context"
"""Name of the optional leading lowering parameter that receives the execution context."""

_LAYOUT_AXES: Mapping[str, str] = MappingProxyType(
    {
        WeightLayout.conv3d_o_xyz_i.value: "(C_out, Kx, Ky, Kz, C_in)",
        WeightLayout.linear_o_i.value: "(C_out, C_in)",
        WeightLayout.bias_c.value: "(C,)",
        WeightLayout.channel_c.value: "(C,)",
        WeightLayout.embedding_n_c.value: "(num_embeddings, C)",
    }
)
_BITS = MappingProxyType({"int4": 4, "int8": 8})


class LoweringError(PlanError):
    """A lowering registration or the registry's coverage breaks the contract."""


class WeightContractError(PlanError):
    """A weight payload does not match what the graph declares; names the storage key."""


class RuntimeBackend(Protocol):
    """What the shared contract code needs to know about a runtime's arrays.

    Each runtime implements this once, through
    :class:`~lattice_contract.runtime.ops.RuntimeAdapter` (MLX arrays, torch
    tensors).  ``dtype_name``
    returns MLIR-style element names: ``f16``, ``bf16``, ``f32``, ``u32``,
    ``i32`` and so on.
    """

    name: str
    sparse_type_name: str
    array_type_name: str

    def shape(self, array: Any) -> tuple[int, ...]:
        """Shape of an array as ints."""
        ...

    def dtype_name(self, array: Any) -> str:
        """Element type of an array as an MLIR-style name."""
        ...

    def make_packed(self, weight: Any, scales: Any, biases: Any, bits: int, group_size: int) -> Any:
        """The runtime's packed-weight value (``QuantizedWeight``) from its three entries."""
        ...

    def is_sparse(self, value: Any) -> bool:
        """Whether ``value`` is the runtime's SparseTensor."""
        ...

    def is_array(self, value: Any) -> bool:
        """Whether ``value`` is the runtime's dense array type."""
        ...

    def decompose(self, value: Any) -> tuple[Any, Any, Any]:
        """``(coords, feats, active_rows)`` of a SparseTensor."""
        ...

    def channels(self, value: Any) -> int:
        """Channel count of a SparseTensor or of a rank-2 feature array."""
        ...

    def stride(self, value: Any) -> tuple[int, int, int]:
        """The stride a SparseTensor carries (checked against the declared one)."""
        ...

    def non_finite_counts(self, arrays: Any) -> list[int]:
        """NaN and infinity counts of every array (refuses weights that overflow)."""
        ...


# ---------------------------------------------------------------------------
# Weights.


@dataclass(frozen=True)
class ResolvedWeight:
    """A weight bound to its storage, with its logical (unpacked) shape.

    ``value`` is what lowerings receive: a dense array, or the runtime's
    packed-weight object for ``i4``/``i8`` weights.
    """

    storage_key: str
    family: str
    layout: str
    dtype: str
    packing: Mapping[str, Any] | None
    logical_shape: tuple[int, ...]
    value: Any

    @property
    def parameter_count(self) -> int:
        """Number of logical weight values (before packing)."""
        count = 1
        for dim in self.logical_shape:
            count *= dim
        return count

    @property
    def storage_keys(self) -> tuple[str, ...]:
        """The safetensors entries this weight reads."""
        if self.packing is None:
            return (self.storage_key,)
        return tuple(f"{self.storage_key}.{part}" for part in ("weight", "scales", "biases"))


def resolve_weight(
    store: Mapping[str, Any],
    backend: RuntimeBackend,
    *,
    storage_key: str,
    layout: str,
    family: str,
    dtype: str,
    packing: Mapping[str, Any] | None,
) -> ResolvedWeight:
    """Bind one ``lattice.weight`` to its safetensors entries, checking every rule.

    Dense weights read ``store[storage_key]`` and must have the declared dtype
    and the layout's rank.  Packed weights read the ``.weight``/``.scales``/
    ``.biases`` triplet in the stored layout of
    :func:`lattice_contract.dialect.values.packed_geometry` (uint32 words, scales and
    biases of the declared scale dtype); their ``logical_shape`` is
    ``(C_out, padded C_in)`` for a linear weight and ``(C_out, K, padded C_in)``
    for a conv weight, refined by the consuming op.  Every violation raises
    :class:`WeightContractError` naming the key.
    """
    rank = layout_family(WeightLayout(layout)).rank
    axes = _LAYOUT_AXES[layout]
    if packing is None:
        if storage_key not in store:
            hint = ""
            if f"{storage_key}.weight" in store:
                hint = (
                    f"; the file has a packed triplet {storage_key}.weight/.scales/.biases, "
                    "so the graph's lattice.weight needs its #lattice.packing attribute"
                )
            raise WeightContractError(
                f"weights.safetensors has no entry {storage_key!r} for the {family} weight "
                f"declared by lattice.weight{hint}"
            )
        array = store[storage_key]
        shape = backend.shape(array)
        if len(shape) != rank:
            raise WeightContractError(
                f"weight {storage_key!r} has shape {shape}; layout {layout} needs rank {rank} "
                f"{axes}"
            )
        stored = backend.dtype_name(array)
        if stored != dtype:
            raise WeightContractError(
                f"weight {storage_key!r} is stored as {stored} but the graph declares "
                f"!lattice.weight<{family}, {dtype}>; re-export so storage and graph agree"
            )
        _refuse_empty(storage_key, shape, layout)
        return ResolvedWeight(storage_key, family, layout, dtype, None, shape, array)

    parts = {part: f"{storage_key}.{part}" for part in ("weight", "scales", "biases")}
    missing = [key for key in parts.values() if key not in store]
    if missing:
        present = [key for key in parts.values() if key in store]
        raise WeightContractError(
            f"packed weight {storage_key!r} is incomplete: missing {', '.join(missing)}"
            + (f" (present: {', '.join(present)})" if present else "")
            + f"; a packed weight needs all of {storage_key}.weight/.scales/.biases"
        )
    words, scales, biases = (store[parts[p]] for p in ("weight", "scales", "biases"))
    bits = _BITS[packing["bits"]]
    group_size = int(packing["group_size"])
    scale_dtype = packing["scale_dtype"]
    if backend.dtype_name(words) != "u32":
        raise WeightContractError(
            f"{parts['weight']} is {backend.dtype_name(words)}; packed {packing['bits']} "
            "values are stored in uint32 words"
        )
    for key, array in ((parts["scales"], scales), (parts["biases"], biases)):
        stored = backend.dtype_name(array)
        if stored != scale_dtype:
            raise WeightContractError(
                f"{key} is stored as {stored} but the packing declares scale_dtype = "
                f"{scale_dtype} (scale dtype drift); re-export with matching scales"
            )
    word_shape = backend.shape(words)
    scale_shape = backend.shape(scales)
    bias_shape = backend.shape(biases)
    try:
        taps, c_out, padded = packed_geometry(word_shape, scale_shape, bits, group_size)
    except ValueError as error:
        raise WeightContractError(
            f"packed weight {storage_key!r} ({parts['weight']} {word_shape}, "
            f"{parts['scales']} {scale_shape}): {error}"
        ) from None
    if bias_shape != scale_shape:
        raise WeightContractError(
            f"{parts['biases']} has shape {bias_shape}; it must match the scales {scale_shape}"
        )
    if rank == 2 and taps != 1:
        raise WeightContractError(
            f"packed weight {storage_key!r} has {taps} tap matrices but layout {layout} is one "
            f"matrix {axes}; its words must be (1, C_out, words)"
        )
    # The stored triplet fixes K, C_out and the padded C_in; the consuming op
    # supplies the kernel's three sizes and the real C_in (WeightSpec checks).
    logical = (c_out, padded) if rank == 2 else (c_out, taps, padded)
    _refuse_empty(storage_key, logical, layout)
    try:
        value = backend.make_packed(words, scales, biases, bits, group_size)
    except (TypeError, ValueError) as error:
        # The runtime's packed type has limits of its own (MLX supports only
        # some group sizes); report them against the storage key like every
        # other contract error instead of letting a bare ValueError escape.
        raise WeightContractError(
            f"packed weight {storage_key!r} cannot be used by this runtime: {error}"
        ) from error
    _refuse_overflow(backend, storage_key, scales, biases, bits, scale_dtype)
    return ResolvedWeight(storage_key, family, layout, dtype, packing, logical, value)


def _refuse_empty(storage_key: str, shape: tuple[int, ...], layout: str) -> None:
    """A zero extent is no weight at all: refused here, before a kernel divides by it.

    The graph does not carry weight shapes, so an empty payload (a conv with
    no output channels, say) would otherwise reach the runtimes, where one
    raised an unrelated reshape error and the other could die of a
    division by zero inside its kernel.
    """
    if all(int(dim) > 0 for dim in shape):
        return
    raise WeightContractError(
        rule_message(
            "weight.shape",
            f"weight {storage_key!r} has logical shape {tuple(shape)}, an empty extent for "
            f"layout {layout} {_LAYOUT_AXES[layout]}",
        )
    )


def _refuse_overflow(
    backend: RuntimeBackend,
    storage_key: str,
    scales: Any,
    biases: Any,
    bits: int,
    scale_dtype: str,
) -> None:
    """Refuse packed weights whose dequantized values are not finite in the scale dtype.

    A code ``q`` dequantizes to ``scale * q + bias``, linear in ``q``: its
    extremes are ``bias`` (``q = 0``, already checked finite at load) and
    ``scale * q_max + bias``.  The product is checked alone too, because a
    runtime may round it before adding the bias.  Finite scales of f16's
    maximum times 15 overflow to infinity, and a program would quietly
    return infinities, which dense weights are refused for.
    """
    top = (1 << bits) - 1
    product = scales * top
    counts = backend.non_finite_counts([product, product + biases])
    if any(counts):
        raise WeightContractError(
            f"packed weight {storage_key!r} dequantizes to {max(counts)} non-finite value(s): "
            f"scale * {top} + bias overflows {scale_dtype}; deployed weights must be finite, "
            "so re-quantize with smaller scales or a wider scale_dtype"
        )


@dataclass(frozen=True)
class WeightSpec:
    """How a lowering's weight operand relates to the rest of the op.

    ``kind`` is ``conv`` (``(C_out, Kx, Ky, Kz, C_in)``, kernel size from the
    op's ``kernel_size`` attribute), ``linear`` (``(C_out, C_in)``),
    ``channel`` (``(C,)``) or ``bias`` (``(C_out,)`` of the weight operand
    ``of``).  ``input`` names the operand whose channel count is ``C_in``
    (or ``C`` for channel vectors).  Packed weights are checked on their
    logical, unpacked shape, so a packed conv weight is resolved against the
    input's channel count exactly like a dense one.
    """

    kind: str
    input: str | None = None
    of: str | None = None

    def check_static(
        self,
        weight: ResolvedWeight,
        attrs: Mapping[str, Any],
        others: Mapping[str, ResolvedWeight],
        where: str,
    ) -> None:
        """Checks that need only the graph and the weights (run at compile time)."""
        shape = weight.logical_shape
        key = weight.storage_key
        if self.kind == "conv" and "kernel_size" in attrs and weight.packing is not None:
            kernel = tuple(attrs["kernel_size"])
            if shape[1] != math.prod(kernel):
                raise WeightContractError(
                    f"{where}: packed weight {key!r} holds {shape[1]} tap matrices but "
                    f"kernel_size {kernel} has {math.prod(kernel)} taps"
                )
        elif self.kind == "conv" and "kernel_size" in attrs:
            kernel = tuple(attrs["kernel_size"])
            if tuple(shape[1:4]) != kernel:
                raise WeightContractError(
                    f"{where}: weight {key!r} has shape {shape} but kernel_size is {kernel}; "
                    "conv3d_o_xyz_i weights are (C_out, Kx, Ky, Kz, C_in)"
                )
        if self.kind == "bias" and self.of is not None and self.of in others:
            c_out = others[self.of].logical_shape[0]
            if shape != (c_out,):
                raise WeightContractError(
                    f"{where}: bias {key!r} has shape {shape} but weight "
                    f"{others[self.of].storage_key!r} has {c_out} output channels"
                )

    def check_runtime(
        self, weight: ResolvedWeight, bound: Mapping[str, Any], backend: RuntimeBackend, where: str
    ) -> None:
        """Checks against the op's run-time operands (input channel counts)."""
        if self.input is None:
            return
        value = bound.get(self.input)
        if value is None:
            return
        channels = backend.channels(value)
        shape = weight.logical_shape
        want = shape[0] if self.kind == "channel" else shape[-1]
        if weight.packing is not None and self.kind in ("conv", "linear"):
            group = int(weight.packing["group_size"])
            if -(-channels // group) * group != want:
                raise WeightContractError(
                    f"{where}: packed weight {weight.storage_key!r} is {want} input channels "
                    f"wide (C_in padded to group_size {group}) but operand {self.input!r} has "
                    f"{channels} channels"
                )
            return
        if channels != want:
            what = "channels" if self.kind == "channel" else "input channels"
            raise WeightContractError(
                f"{where}: weight {weight.storage_key!r} has shape {shape} ({want} {what}) "
                f"but operand {self.input!r} has {channels} channels"
            )


def conv_weight(input: str = "input") -> WeightSpec:
    """A ``(C_out, Kx, Ky, Kz, C_in)`` weight whose ``C_in`` is ``input``'s channel count."""
    return WeightSpec("conv", input=input)


def linear_weight(input: str = "input") -> WeightSpec:
    """A ``(C_out, C_in)`` weight whose ``C_in`` is ``input``'s channel count."""
    return WeightSpec("linear", input=input)


def bias_weight(of: str = "weight") -> WeightSpec:
    """A ``(C_out,)`` bias matching the output channels of weight operand ``of``."""
    return WeightSpec("bias", of=of)


def channel_weight(input: str = "input") -> WeightSpec:
    """A ``(C,)`` per-channel vector matching ``input``'s channel count."""
    return WeightSpec("channel", input=input)


# ---------------------------------------------------------------------------
# Registry.


@dataclass(frozen=True)
class ArtifactLowering:
    """One registered lowering: the op it implements and how to call it."""

    definition: OpDef
    function: Callable[..., Any]
    weights: Mapping[str, WeightSpec]
    takes_context: bool
    omitted: frozenset[str] = frozenset()
    """Attributes with one permitted value that the function leaves out (not passed)."""


@dataclass
class ExecutionContext:
    """Per-program state a lowering may ask for through its ``context`` parameter.

    ``weights`` maps storage keys to resolved weights; ``primitives`` maps
    registered ``lattice.call`` names to the runtime's implementations;
    ``trusted_sparse_inputs`` is set for ``call_with_trusted_sparse_inputs``
    (``sparse.make`` then skips the divisibility and duplicate checks);
    ``current_results`` holds the declared result types of the op being run
    and ``current_op`` its schema definition.
    """

    backend: RuntimeBackend
    weights: Mapping[str, ResolvedWeight]
    primitives: Mapping[str, Callable[..., Any]]
    trusted_sparse_inputs: bool = False
    current_results: tuple[ValueType, ...] = ()
    current_op: OpDef | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def op(self) -> OpDef:
        """Schema definition of the op being lowered.

        A lowering registered for several ops (``artifact_lowering(op=(...))``)
        reads ``context.op.name`` to pick the runtime function of the one it runs.
        """
        if self.current_op is None:
            raise LoweringError("the execution context is not lowering any op right now")
        return self.current_op

    def result_type(self, index: int = 0) -> ValueType:
        """Declared type of result ``index`` of the op being lowered.

        For ops whose meaning depends on the result type rather than an
        attribute (``lattice.cast``'s target element type).
        """
        return self.current_results[index]

    def weight(self, storage_key: str) -> Any:
        """The runtime value of the weight stored under ``storage_key``."""
        try:
            return self.weights[storage_key].value
        except KeyError:
            raise WeightContractError(
                f"no weight was resolved for storage key {storage_key!r}"
            ) from None

    def primitive(self, name: str) -> Callable[..., Any]:
        """The runtime's implementation of registered primitive ``name``."""
        try:
            return self.primitives[name]
        except KeyError:
            raise LoweringError(
                f"this runtime has no implementation of primitive {name!r}"
            ) from None


OpRef = str | OpDef | type[Op] | Callable[..., Any]
"""How a lowering names a schema op: MLIR or Python name, ``OpDef``, the schema class, or a
runtime's public op function (``mlx_lattice.ops.conv3d``: its name is the op's)."""


def _signature_of(definition: OpDef) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """What a lowering's parameters and call binding depend on: operands and attribute names."""
    operands = tuple(
        (o.name, o.optional, o.variadic, o.type.kind is TypeKind.weight)
        for o in definition.operands
    )
    return operands, tuple(a.name for a in definition.attributes)


def _describe_signature(definition: OpDef) -> str:
    operands = ", ".join(
        o.name + ("?" if o.optional else "") + ("..." if o.variadic else "")
        for o in definition.operands
    )
    attrs = ", ".join(a.name for a in definition.attributes) or "none"
    return f"{definition.mlir_name}(operands {operands}; attributes {attrs})"


def _definitions_of(op: OpRef | tuple[OpRef, ...] | list[OpRef]) -> tuple[OpDef, ...]:
    """The op(s) of one registration; several must share operands and attributes exactly."""
    if not isinstance(op, (tuple, list)):
        return (_definition_of(op),)
    definitions = tuple(_definition_of(one) for one in op)
    if not definitions:
        raise LoweringError("op= names no op; give one op or a non-empty tuple of ops")
    names = [d.name for d in definitions]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise LoweringError(f"op= names {', '.join(repeated)} more than once")
    first = definitions[0]
    for other in definitions[1:]:
        if _signature_of(other) != _signature_of(first):
            raise LoweringError(
                "one lowering can serve several ops only when their operands and attributes "
                f"are identical: {_describe_signature(first)} differs from "
                f"{_describe_signature(other)}; register a separate lowering for "
                f"{other.mlir_name}"
            )
    return definitions


def _definition_of(op: OpRef) -> OpDef:
    if isinstance(op, OpDef):
        return op
    if isinstance(op, type) and issubclass(op, Op):
        return SCHEMA.op(op.__mnemonic__)
    if isinstance(op, str):
        try:
            return SCHEMA.op(op)
        except KeyError as exc:
            raise LoweringError(str(exc.args[0])) from None
    name = getattr(op, "__name__", None)
    if callable(op) and isinstance(name, str) and name in SCHEMA.ops:
        return SCHEMA.op(name)  # a runtime's public op function, e.g. mlx_lattice.ops.conv3d
    raise LoweringError(
        f"op= must be a schema op name, OpDef, schema class or a runtime's op function "
        f"named like a schema op, got {op!r}"
    )


class LoweringRegistry:
    """The lowerings and primitive implementations of one runtime."""

    def __init__(self, runtime: str) -> None:
        self.runtime = runtime
        self._lowerings: dict[str, ArtifactLowering] = {}
        self._primitives: dict[str, Callable[..., Any]] = {}
        self._standard: dict[str, ArtifactLowering] = {}

    def mark_standard(self) -> None:
        """Record the lowerings registered so far as this runtime's standard table.

        A later registration for one of these ops is an extension that
        overrides the standard lowering (the artifact API's documented use
        of ``artifact_lowering``); :meth:`restore_standard` undoes it.
        """
        self._standard = dict(self._lowerings)

    def restore_standard(self, op: OpRef | None = None) -> None:
        """Put the standard lowering of ``op`` (of every op when None) back in place."""
        names = [d.name for d in _definitions_of(op)] if op is not None else list(self._standard)
        for name in names:
            if name in self._standard:
                self._lowerings[name] = self._standard[name]

    # -- registration -------------------------------------------------------

    def artifact_lowering(
        self,
        *,
        op: OpRef | tuple[OpRef, ...] | list[OpRef],
        weights: Mapping[str, WeightSpec] | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]:
        """Decorator registering ``function`` as this runtime's lowering of ``op``.

        ``op`` is a schema op name, an ``OpDef`` or a runtime's public op
        function (``mlx_lattice.ops.conv3d``: its name is the op's); it may
        also be a tuple or list of ops with identical operands and
        attributes; the function is then registered for each of them (see
        :attr:`ExecutionContext.op`).  The function may leave out an
        attribute that has one permitted value (``accumulation``): it is then
        not passed.  A lowering for an op of the standard table overrides the
        standard one (:meth:`restore_standard` puts it back); replacing a
        lowering registered after the table takes ``replace=True``, so two
        extensions never silently shadow each other.

        Raises :class:`LoweringError` at registration when the parameters are
        not exactly the op's operands and attributes, when several ops given
        together differ in their operands or attributes, when ``weights`` names
        a parameter that is not a weight operand, or when an op already has a
        non-standard lowering and ``replace`` is false.
        """
        definitions = _definitions_of(op)
        specs = dict(weights or {})

        def register(function: F) -> F:
            takes_context = False
            omitted: frozenset[str] = frozenset()
            for definition in definitions:
                takes_context, omitted = _check_signature(definition, function, specs)
            for definition in definitions:
                current = self._lowerings.get(definition.name)
                overrides = current is not None and current is self._standard.get(definition.name)
                if current is not None and not (replace or overrides):
                    raise LoweringError(
                        f"{self.runtime}: {definition.mlir_name} already has a lowering "
                        f"({self._lowerings[definition.name].function.__qualname__}); pass "
                        f"replace=True to replace it deliberately"
                    )
            for definition in definitions:
                self._lowerings[definition.name] = ArtifactLowering(
                    definition, function, MappingProxyType(specs), takes_context, omitted
                )
            return function

        return register

    def primitive(self, name: str) -> Callable[[F], F]:
        """Decorator registering the implementation of a schema primitive ``name``."""
        if name not in SCHEMA.primitives:
            raise LoweringError(
                f"{name!r} is not a registered primitive of the schema; registered: "
                f"{', '.join(sorted(SCHEMA.primitives))}"
            )

        def register(function: F) -> F:
            if name in self._primitives:
                raise LoweringError(f"{self.runtime}: primitive {name!r} is already implemented")
            self._primitives[name] = function
            return function

        return register

    # -- queries --------------------------------------------------------------

    @property
    def implemented_primitives(self) -> frozenset[str]:
        """Names of the primitives this runtime implements."""
        return frozenset(self._primitives)

    @property
    def primitives(self) -> Mapping[str, Callable[..., Any]]:
        """Primitive implementations by name (read-only)."""
        return MappingProxyType(self._primitives)

    def missing(self, ops: Iterable[OpDef] | None = None) -> tuple[str, ...]:
        """MLIR names of the schema ops (or of ``ops``) without a lowering."""
        wanted = SCHEMA.ops.values() if ops is None else ops
        return tuple(sorted(d.mlir_name for d in wanted if d.name not in self._lowerings))

    def check_complete(self) -> None:
        """Raise :class:`LoweringError` naming every schema op this runtime cannot lower."""
        missing = self.missing()
        if missing:
            raise LoweringError(
                f"the {self.runtime} runtime has no lowering for {', '.join(missing)}; every "
                "schema op needs one before any artifact compiles"
            )

    def lowering(self, op: str | OpDef) -> ArtifactLowering:
        """The lowering of ``op``; :class:`LoweringError` names it when absent."""
        definition = _definition_of(op)
        try:
            return self._lowerings[definition.name]
        except KeyError:
            raise LoweringError(
                f"the {self.runtime} runtime has no lowering for {definition.mlir_name}"
            ) from None

    def __contains__(self, op: object) -> bool:
        if isinstance(op, (str, OpDef)):
            try:
                return _definition_of(op).name in self._lowerings
            except LoweringError:
                return False
        return False


def _check_signature(
    definition: OpDef, function: Callable[..., Any], specs: Mapping[str, WeightSpec]
) -> tuple[bool, frozenset[str]]:
    name = f"{getattr(function, '__qualname__', function)!s} for {definition.mlir_name}"
    params = list(inspect.signature(function).parameters.values())
    takes_context = bool(params) and params[0].name == CONTEXT_PARAMETER
    if takes_context:
        params = params[1:]
    operand_names = [o.name for o in definition.operands]
    attr_names = [a.name for a in definition.attributes]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise LoweringError(
                f"{name}: *args/**kwargs are not allowed; name each operand and attribute"
            )
    got = [p.name for p in params]
    fixed = {a.name for a in definition.attributes if len(a.spec.allowed) == 1}
    omitted = frozenset(n for n in attr_names if n in fixed and n not in got)
    missing = [n for n in operand_names + attr_names if n not in got and n not in omitted]
    extra = [n for n in got if n not in operand_names and n not in attr_names]
    if missing or extra:
        raise LoweringError(
            f"{name}: parameters must be exactly the operands ({', '.join(operand_names)}) "
            f"and attributes ({', '.join(attr_names) or 'none'}) of the op"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unexpected {', '.join(extra)}" if extra else "")
        )
    for p in params:
        if p.name in attr_names and p.kind is not p.KEYWORD_ONLY:
            raise LoweringError(f"{name}: attribute {p.name!r} must be a keyword-only parameter")
        if p.name in operand_names and p.kind is not p.POSITIONAL_OR_KEYWORD:
            raise LoweringError(
                f"{name}: operand {p.name!r} must be a positional-or-keyword parameter"
            )
    for key, spec in specs.items():
        if not isinstance(spec, WeightSpec):
            raise LoweringError(f"{name}: weights[{key!r}] must be a WeightSpec")
        if key not in operand_names or definition.operand(key).type.kind is not TypeKind.weight:
            raise LoweringError(f"{name}: weights names {key!r}, which is not a weight operand")
        for ref in (spec.input, spec.of):
            if ref is not None and ref not in operand_names:
                raise LoweringError(
                    f"{name}: weights[{key!r}] refers to {ref!r}, which is not an operand"
                )
    return takes_context, omitted

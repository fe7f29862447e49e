"""An artifact's graph as a reader thinks of it: layers and the values between them.

The verified :class:`~lattice_contract.plan.RuntimePlan` is faithful but
noisy to look at: every weight is its own ``lattice.weight`` op, and every
feature op on a sparse value is wrapped in a ``sparse.decompose`` /
``sparse.with_features`` pair.  :func:`graph_model` folds those away:

* weight ops become the weights of the op that reads them (storage key,
  logical shape, dtype, packing), and the op takes its module name from the
  storage keys (``enc.0.conv.weight`` -> ``enc.0.conv``);
* ``sparse.decompose`` results stand for the sparse value they came from, and
  a ``sparse.with_features`` result stands for the feature op whose output it
  wraps, so ``conv -> decompose -> batch_norm -> with_features -> relu`` reads
  as ``conv -> batch_norm -> relu``;
* the ``sparse.make`` of an entry sparse input folds into the input node.

Edges carry the static facts of the value they stand for: for sparse values
the feature dtype, channel count and stride, for tensors the shape.  Those
come from replaying the plan through the contract's
:class:`~lattice_contract.builder.module.MLIRModuleBuilder`, which is where stride
and channel inference is defined once; if a graph uses something the replay
cannot follow, the edges fall back to the MLIR result types.

The plan comes from the native importer (Python never parses MLIR text) and
the weight shapes from compiling it for MLX against the weight file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lattice_contract.builder import BuilderError, MLIRModuleBuilder, Value
from lattice_contract.plan import PlanOperation, RuntimePlan
from lattice_contract.runtime import ResolvedWeight, compile_plan
from mlx_lattice.artifact.backend import MLX_BACKEND
from mlx_lattice.artifact.io import load_lattice_artifact
from mlx_lattice.artifact.lowerings import MLX_LOWERINGS
from mlx_lattice.artifact.validation import ArtifactCapabilityError, native_module

__all__ = ["GraphEdge", "GraphModel", "GraphNode", "graph_model", "load_graph_model"]

_DECOMPOSE = "lattice.sparse.decompose"
_WITH_FEATURES = "lattice.sparse.with_features"
_MAKE = "lattice.sparse.make"
_WEIGHT = "lattice.weight"


@dataclass
class GraphNode:
    """One drawn node: an input, an output, or an op with its folded weights."""

    id: str
    kind: str  # "input" | "op" | "output"
    op: str
    module: str
    attrs: dict[str, Any] = field(default_factory=dict)
    weights: list[dict[str, Any]] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)
    """The plan ops this node stands for (itself, its weights, its wrappers)."""


@dataclass(frozen=True)
class GraphEdge:
    """A value flowing from one node to another, labelled with its static shape."""

    source: str
    target: str
    label: str
    value: str
    """The plan's own label (``v4``), for matching ``lattice inspect``'s op list."""
    name: str = ""
    """The model's name for the value: an input's ABI name, or the module (weight
    prefix) that computed it, ``blocks.0.conv1``, with ``/activation`` and the like
    for the weight-free ops after it."""


@dataclass
class GraphModel:
    """Nodes in program order and the edges between them."""

    name: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    plan_ops: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, what the HTML page embeds."""
        return {
            "name": self.name,
            "plan_ops": self.plan_ops,
            "nodes": [n.__dict__ for n in self.nodes],
            "edges": [e.__dict__ for e in self.edges],
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(getattr(value, "value", value))


def _module_name(keys: list[str]) -> str:
    """The common dotted prefix of storage keys, minus the parameter name."""
    if not keys:
        return ""
    parts = [k.split(".")[:-1] for k in keys]
    common: list[str] = []
    for items in zip(*parts, strict=False):
        if len(set(items)) != 1:
            break
        common.append(items[0])
    return ".".join(common)


def _stride_text(value: Value | None) -> str:
    stride = (value.type.stride if value is not None else None) or (1, 1, 1)
    return str(stride[0]) if len(set(stride)) == 1 else "x".join(map(str, stride))


def _value_label(value: Value | None, mlir_type: str, rows_of: Value | None) -> str:
    """``sparse f16 ×32 · stride 2``, or ``N×32 f16 · stride 2`` for features of a sparse value."""
    if value is None:
        return mlir_type
    vt = value.type
    if vt.kind == "sparse":
        return f"sparse {vt.dtype} ×{vt.channels} · stride {_stride_text(value)}"
    if vt.shape is not None:
        # A dynamic dimension (the row count) is N, whether the type says None or -1.
        dims = "×".join("N" if d is None or d < 0 else str(d) for d in vt.shape)
        text = f"{dims} {vt.dtype}"
        return text if rows_of is None else f"{text} · stride {_stride_text(rows_of)}"
    return vt.text


class _Replay:
    """Rebuild the plan in a builder to learn each value's stride, channels and shape."""

    def __init__(self, plan: RuntimePlan, weights: Mapping[str, ResolvedWeight]) -> None:
        self.builder = MLIRModuleBuilder()
        self.values: dict[str, Value] = {}
        self.weights = weights
        self.ok = True
        # A packed conv weight's stored triplet fixes (C_out, taps, padded C_in) only; the
        # kernel's three sizes come from the op that reads it.
        self.kernels = {
            label: tuple(op.attrs["kernel_size"])
            for op in plan.ops
            if "kernel_size" in op.attrs
            for label in op.operands
        }
        self.args = {a.name: a for a in plan.args}
        for item in plan.logical_inputs:
            if item.kind == "tensor":
                arg = item.args[0]
                self._guard(
                    lambda arg=arg: self._set(
                        arg.name, self.builder.add_input(arg.abi_name, arg.type)
                    )
                )

    def _set(self, label: str, value: Value) -> None:
        self.values[label] = value

    def _guard(self, action: Any) -> None:
        if not self.ok:
            return
        try:
            action()
        except (BuilderError, KeyError, TypeError, ValueError):
            self.ok = False

    def op(self, op: PlanOperation, sparse_input: str | None) -> None:
        if not self.ok:
            return
        if op.name == _MAKE and sparse_input is not None:
            features = self.args[op.operands[1]]
            channels = int(features.type.split("x")[-2])
            dtype = features.type.rsplit("x", 1)[-1].rstrip(">")
            stride = op.attrs["stride"]
            self._guard(
                lambda: self._set(
                    op.results[0],
                    self.builder.add_sparse_input(
                        sparse_input, channels=channels, dtype=dtype, stride=stride
                    ),
                )
            )
            return
        if op.name == _WEIGHT:
            key = op.attrs["storage_key"]
            bound = self.weights.get(key)
            if bound is None:
                self.ok = False
                return
            shape = tuple(bound.logical_shape)
            kernel = self.kernels.get(op.results[0])
            if bound.packing is not None and len(shape) == 3 and kernel is not None:
                shape = (shape[0], *kernel, shape[2])
            kwargs: dict[str, Any] = {
                "storage_key": key,
                "layout": op.attrs["layout"],
                "shape": shape,
            }
            if bound.packing is None:
                kwargs["dtype"] = bound.dtype
            else:
                kwargs["packing"] = dict(bound.packing)
            self._guard(lambda: self._set(op.results[0], self._emit("weight", kwargs)))
            return
        kwargs = {k: v for k, v in op.attrs.items() if k != "sym_name"}
        for name, labels in op.operand_groups():
            definition = next(o for o in op.definition.operands if o.name == name)
            if definition.variadic:
                kwargs[name] = tuple(self.values[label] for label in labels)
            elif labels:
                kwargs[name] = self.values[labels[0]]

        def emit() -> None:
            result = self.builder.emit(op.definition.name, **_plain_attrs(kwargs))
            results = result if isinstance(result, tuple) else (result,)
            for label, value in zip(op.results, results, strict=True):
                self._set(label, value)

        self._guard(emit)

    def _emit(self, name: str, kwargs: dict[str, Any]) -> Value:
        value = self.builder.emit(name, **kwargs)
        assert isinstance(value, Value)
        return value


def _plain_attrs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in kwargs.items()}


def graph_model(plan: RuntimePlan, weights: Mapping[str, ResolvedWeight]) -> GraphModel:
    """Fold ``plan`` into the reader's graph (see the module docstring)."""
    nodes: dict[str, GraphNode] = {}
    owner: dict[str, str] = {}  # value label -> id of the node that stands for it
    value_type: dict[str, str] = {}
    name_of: dict[str, str] = {}  # value label -> the model's name for it
    weight_of: dict[str, dict[str, Any]] = {}
    edges: dict[tuple[str, str], GraphEdge] = {}
    replay = _Replay(plan, weights)
    # dense feature label -> the sparse value whose rows it holds (for the edge's stride)
    rows_of: dict[str, str] = {}

    sparse_inputs: dict[tuple[str, ...], str] = {}
    for item in plan.logical_inputs:
        node = GraphNode(
            id=f"input:{item.name}",
            kind="input",
            op=f"input {item.name}",
            module="",
            attrs={"abi": {a.abi_name: f"{a.role} {a.type}" for a in item.args}},
        )
        nodes[node.id] = node
        for arg in item.args:
            owner[arg.name] = node.id
            name_of[arg.name] = arg.abi_name
            value_type[arg.name] = arg.type
        if item.kind == "sparse":
            sparse_inputs[tuple(a.name for a in item.args)] = item.name

    def connect(label: str, target: str) -> None:
        source = owner.get(label)
        if source is None or source == target or (source, target) in edges:
            return
        aligned = replay.values.get(rows_of[label]) if label in rows_of else None
        shown = _value_label(replay.values.get(label), value_type.get(label, ""), aligned)
        edges[(source, target)] = GraphEdge(source, target, shown, label, name_of.get(label, label))

    for index, op in enumerate(plan.ops):
        for label, mlir_type in zip(op.results, op.result_types, strict=False):
            value_type[label] = mlir_type
        entry_make = sparse_inputs.get(tuple(op.operands)) if op.name == _MAKE else None
        replay.op(op, entry_make)
        if op.name == _WEIGHT:
            bound = weights.get(op.attrs["storage_key"])
            weight_of[op.results[0]] = {
                "storage_key": op.attrs["storage_key"],
                "layout": op.attrs["layout"],
                "dtype": bound.dtype if bound else "?",
                "shape": list(bound.logical_shape) if bound else None,
                "packing": _plain(bound.packing) if bound and bound.packing else None,
            }
            continue
        if entry_make is not None:
            node = nodes[f"input:{entry_make}"]
            node.attrs["stride"] = _plain(op.attrs["stride"])
            node.folded.append(op.name)
            owner[op.results[0]] = node.id
            name_of[op.results[0]] = entry_make
            continue
        if op.name == _DECOMPOSE:
            for label in op.results:
                owner[label] = owner.get(op.operands[0], "")
                rows_of[label] = op.operands[0]
                name_of[label] = name_of.get(op.operands[0], label)
            continue
        if op.name == _WITH_FEATURES:
            support, feats = op.operands
            stands_for = owner.get(feats) or owner.get(support, "")
            owner[op.results[0]] = stands_for
            name_of[op.results[0]] = name_of.get(feats, feats)
            if stands_for in nodes:
                nodes[stands_for].folded.append(op.name)
            connect(support, stands_for)
            continue
        node_id = f"op:{index}"
        op_weights = [weight_of[label] for label in op.operands if label in weight_of]
        node = GraphNode(
            id=node_id,
            kind="op",
            op=op.name,
            module=op.location or _module_name([w["storage_key"] for w in op_weights]),
            attrs={k: _plain(v) for k, v in op.attrs.items() if k != "sym_name"},
            weights=op_weights,
            folded=[op.name] + [_WEIGHT] * len(op_weights),
        )
        nodes[node_id] = node
        for label in op.operands:
            if label not in weight_of:
                connect(label, node_id)
        first = op.operands[0] if op.operands else None
        short = op.name.removeprefix("lattice.").removeprefix("sparse.")
        if node.module:
            named = node.module
        else:  # a weight-free op: named after the module whose output it transforms
            base = name_of.get(first, "") if first is not None else ""
            named = f"{base.split('/')[0]}/{short}" if base else short
        for label in op.results:
            owner[label] = node_id
            name_of[label] = named
        if first in rows_of and not any(t.startswith("!lattice.sparse") for t in op.operand_types):
            for label in op.results:  # row-wise feature ops keep their input's rows
                rows_of[label] = rows_of[first]

    for out, label in zip(plan.outputs, plan.returns, strict=True):
        node = GraphNode(
            id=f"output:{out.abi_name}",
            kind="output",
            op=f"output {out.abi_name}",
            module="",
            attrs={"role": out.role, "type": out.type},
        )
        nodes[node.id] = node
        connect(label, node.id)

    return GraphModel(plan.name, list(nodes.values()), list(edges.values()), len(plan.ops))


def load_graph_model(path: str) -> GraphModel:
    """Read an artifact directory, verify and import it natively, and fold its graph."""
    native = native_module()
    if native is None:
        raise ArtifactCapabilityError(
            "lattice view needs the native lattice_mlir importer (Python never parses MLIR "
            "text); install latticekit-mlir"
        )
    artifact = load_lattice_artifact(path)
    plan = RuntimePlan.from_native(native.import_plan(artifact.graph))
    weights = compile_plan(plan, MLX_LOWERINGS, MLX_BACKEND, artifact.weights).weights
    return graph_model(plan, weights)

"""What the standard lowerings ask of a runtime: :class:`RuntimeOps` and :class:`RuntimeAdapter`.

The lowerings of every schema op are written once
(:mod:`lattice_contract.runtime.standard_lowerings`) over two things a runtime supplies:

* :class:`RuntimeOps`, its functional ops (``conv3d``, ``pool3d``,
  ``linear``, ``sparse_cat``...).  Both runtimes' ``ops`` modules satisfy it
  *as modules*: ``mlx_lattice.ops`` and ``torch_lattice.ops`` are assigned to
  a ``RuntimeOps``-typed name in each runtime's adapter, so mypy checks every
  member's parameters against the protocol, and
  :func:`missing_runtime_ops` checks the same at run time.
* one :class:`RuntimeAdapter` object: the few things that really differ
  between array libraries (dtype objects, the SparseTensor class, how a
  safetensors file is read and written, argmax and row gathers).  The
  questions the shared plan code asks about values (shapes, element-type
  names, sparse or dense) are answered here once, from the adapter's class
  attributes, so a runtime's adapter holds only its library calls.

The protocol's array parameters are positional-only and typed ``Any``: each
runtime has its own array type, and the lowerings pass arrays positionally;
attributes are keyword-only under the schema's names, as the lowerings pass
them.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from lattice_contract.dialect import Triple

__all__ = [
    "ELEMENT_DTYPES",
    "RUNTIME_OP_NAMES",
    "RuntimeAdapter",
    "RuntimeOps",
    "missing_runtime_ops",
    "runtime_ops_problems",
]


class RuntimeOps(Protocol):
    """The functional ops the standard lowerings call, by their ``ops`` names."""

    @property
    def QuantizedWeight(self) -> type[Any]:
        """The packed weight class, built as ``QuantizedWeight(w, scales, biases, bits, group)``."""

    # -- convolutions ---------------------------------------------------------

    def conv3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        /,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        coordinates: Any = None,
    ) -> Any:
        """Strided convolution (at ``coordinates`` when given)."""

    def full_conv3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        /,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
    ) -> Any:
        """spconv's regular convolution over its expanded support."""

    def conv_transpose3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        /,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        coordinates: Any = None,
    ) -> Any:
        """Transposed convolution (at ``coordinates`` when given)."""

    def generative_conv_transpose3d(
        self, input: Any, weight: Any, bias: Any = None, /, *, kernel_size: Triple, stride: Triple
    ) -> Any:
        """Support expansion ``o = c*s + k``."""

    def subm_conv3d(
        self, input: Any, weight: Any, bias: Any = None, /, *, kernel_size: Triple, dilation: Triple
    ) -> Any:
        """Submanifold convolution."""

    def normalized_subm_conv3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        /,
        *,
        kernel_size: Triple,
        dilation: Triple,
        eps: float,
    ) -> Any:
        """Weight-normalised submanifold convolution."""

    def normalized_conv_transpose3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        /,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        eps: float,
        coordinates: Any = None,
    ) -> Any:
        """Weight-normalised transposed convolution (at ``coordinates`` when given)."""

    def normalized_generative_conv_transpose3d(
        self,
        input: Any,
        weight: Any,
        bias: Any = None,
        /,
        *,
        kernel_size: Triple,
        stride: Triple,
        eps: float,
    ) -> Any:
        """Weight-normalised support expansion."""

    # -- pooling and upsampling -------------------------------------------------

    def pool3d(
        self,
        input: Any,
        /,
        *,
        mode: str,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
    ) -> Any:
        """Local pooling over the centred relation."""

    def full_pool3d(
        self,
        input: Any,
        /,
        *,
        mode: str,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
    ) -> Any:
        """Local pooling over the indexed relation (spconv's)."""

    def global_pool(self, input: Any, /, *, mode: str, batch_size: int) -> Any:
        """Per-batch reduction to a dense ``(B, C)`` array."""

    def pool_transpose3d(
        self,
        input: Any,
        /,
        *,
        kernel_size: Triple,
        stride: Triple,
        padding: Triple,
        dilation: Triple,
        coordinates: Any = None,
    ) -> Any:
        """Mean of the coarse rows reaching each fine row."""

    def trilinear_upsample3d(
        self, input: Any, /, *, stride: Triple, coordinates: Any = None
    ) -> Any:
        """Renormalised trilinear upsampling."""

    # -- points -----------------------------------------------------------------

    def voxelize(
        self,
        points: Any,
        features: Any,
        batch_indices: Any,
        active_rows: Any = None,
        /,
        *,
        voxel_size: Sequence[float],
        origin: Sequence[float],
        reduction: str,
        stride: Triple,
    ) -> Any:
        """Active points merged into voxels."""

    def devoxelize(
        self,
        points: Any,
        voxels: Any,
        batch_indices: Any,
        point_active_rows: Any = None,
        /,
        *,
        voxel_size: Sequence[float],
        origin: Sequence[float],
        interpolation: str,
    ) -> Any:
        """Voxel features read back at the active points."""

    # -- feature-only ops -------------------------------------------------------

    def linear(self, x: Any, weight: Any, bias: Any = None, /) -> Any:
        """Dense projection of feature rows."""

    def activation(
        self,
        x: Any,
        /,
        *,
        kind: str,
        approximate: str,
        alpha: float,
        beta: float,
        threshold: float,
    ) -> Any:
        """Pointwise nonlinearity."""

    def batch_norm(
        self, x: Any, scale: Any, bias: Any, mean: Any, var: Any, /, *, eps: float
    ) -> Any:
        """Frozen-statistics batch norm."""

    def layer_norm(self, x: Any, scale: Any, bias: Any, /, *, eps: float) -> Any:
        """Layer norm over channels."""

    def rms_norm(self, x: Any, scale: Any, /, *, eps: float) -> Any:
        """RMS norm over channels."""

    def softmax(self, x: Any, /, *, axis: int) -> Any:
        """Softmax over channels."""

    def elementwise(self, x: Any, /, *, kind: str) -> Any:
        """Unary exp or round."""

    def embedding_lookup(self, indices: Any, weight: Any, /) -> Any:
        """Rows of an embedding table."""

    def cast(self, x: Any, dtype: Any, /, *, rounding: str) -> Any:
        """Exact float conversion with explicit rounding."""

    # -- sparse algebra ---------------------------------------------------------

    def sparse_binary(
        self, lhs: Any, rhs: Any, /, *, op: str, join: str, lhs_fill: float, rhs_fill: float
    ) -> Any:
        """Coordinate-aligned elementwise op."""

    def sparse_cat(self, lhs: Any, rhs: Any, /, *, join: str) -> Any:
        """Coordinate-aligned channel concatenation."""

    def sparse_reindex(self, input: Any, target: Any, /, *, fill: float) -> Any:
        """Features gathered onto a target's rows."""

    # -- grid bounds and the dense hand-off --------------------------------------

    def sparse_crop(self, input: Any, /, *, lower: Triple, upper: Triple) -> Any:
        """The rows inside a static box (spconv's grid bounds)."""

    def sparse_to_dense(
        self, input: Any, /, *, spatial_shape: Triple, batch_size: int, layout: str
    ) -> Any:
        """The value scattered into a zero dense grid (spconv's dense())."""


RUNTIME_OP_NAMES: tuple[str, ...] = tuple(
    sorted(
        name
        for name, member in vars(RuntimeOps).items()
        if not name.startswith("_") and not isinstance(member, property)
    )
)
"""Every op of :class:`RuntimeOps` (its functions, not the ``QuantizedWeight`` class),
read from the protocol itself (one list)."""


def missing_runtime_ops(ops: object, names: Sequence[str] = RUNTIME_OP_NAMES) -> tuple[str, ...]:
    """The members of ``names`` that ``ops`` lacks or holds as something not callable."""
    return tuple(name for name in names if not callable(getattr(ops, name, None)))


def runtime_ops_problems(ops: object) -> tuple[str, ...]:
    """What keeps ``ops`` from satisfying :class:`RuntimeOps`, checked at run time.

    The run-time half of the mypy check: each member must exist, take the
    protocol's positional arrays and accept every keyword it is called with.
    Reads signatures (``inspect``), so it is for tests and diagnostics, not
    for every import.
    """
    problems = [f"{name}: missing" for name in missing_runtime_ops(ops)]
    for name in RUNTIME_OP_NAMES:
        function = getattr(ops, name, None)
        if not callable(function):
            continue
        wanted = list(inspect.signature(getattr(RuntimeOps, name)).parameters.values())[1:]
        params = inspect.signature(function).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            keywords_ok: set[str] | None = None
        else:
            keywords_ok = {
                k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            }
        positional = [p for p in params.values() if p.kind is not p.KEYWORD_ONLY]
        arrays = [p for p in wanted if p.kind is p.POSITIONAL_ONLY]
        if len(positional) < len(arrays) and not any(
            p.kind is p.VAR_POSITIONAL for p in params.values()
        ):
            problems.append(
                f"{name}: takes {len(positional)} positional arrays, needs {len(arrays)}"
            )
        for p in wanted:
            if p.kind is p.KEYWORD_ONLY and keywords_ok is not None and p.name not in keywords_ok:
                problems.append(f"{name}: does not take keyword {p.name!r}")
    return tuple(problems)


ELEMENT_DTYPES: tuple[tuple[str, str], ...] = (
    ("f16", "float16"),
    ("bf16", "bfloat16"),
    ("f32", "float32"),
    ("f64", "float64"),
    ("i8", "int8"),
    ("i16", "int16"),
    ("i32", "int32"),
    ("i64", "int64"),
    ("u8", "uint8"),
    ("u16", "uint16"),
    ("u32", "uint32"),
    ("u64", "uint64"),
    ("i1", "bool"),
)
"""MLIR-style element names and the dtype attribute both array libraries give them.

MLX and torch spell their dtypes alike (``mx.float16``, ``torch.float16``);
a library that differs names its exceptions in ``RuntimeAdapter.dtype_spellings``;
one that lacks a dtype simply has no entry for it.
"""


class RuntimeAdapter:
    """One runtime's array library, as the shared artifact code needs it.

    A runtime subclasses this once and sets only what is its own: ``name``,
    ``array_type`` and ``ops`` (its ``ops`` module, which mypy checks against
    :class:`RuntimeOps` at that assignment).  The rest follows from them here,
    once: the SparseTensor class (``SparseTensor`` of the ops' package's
    ``sparse`` module) and the packed weight (the ops module's
    ``QuantizedWeight``, an op name of both), the names in messages
    (``mlx_lattice.SparseTensor``,
    ``torch.Tensor``), the ``lattice-opt`` environment variable
    (``MLX_LATTICE_LATTICE_OPT``), the dtype table (read from the array
    type's module by :data:`ELEMENT_DTYPES`), and the generic answers
    (shapes, dtype names, SparseTensor parts, building a SparseTensor from
    the ABI arrays).  The methods that raise ``NotImplementedError`` are the
    library calls a runtime must supply.  An adapter satisfies
    :class:`~lattice_contract.runtime.lowering.RuntimeBackend`.
    """

    name: str
    """Runtime name in diagnostics (``mlx``, ``torch``)."""
    array_type: ClassVar[type[Any]]
    """The runtime's dense array type; its module holds the dtypes."""
    ops: RuntimeOps
    """The runtime's functional ops (its ``ops`` module)."""
    sparse_type: ClassVar[type[Any]]
    """The runtime's SparseTensor class (its constructor and ``trusted`` build from ABI
    arrays; derived from ``ops``)."""
    packed_type: ClassVar[type[Any]]
    """The runtime's packed weight, built as ``packed_type(w, scales, biases, bits, group)``
    (``ops.QuantizedWeight``, derived)."""
    dtype_spellings: ClassVar[Mapping[str, str]] = {}
    """Element name -> the library's dtype attribute, where it is not :data:`ELEMENT_DTYPES`'s."""

    sparse_type_name: str
    """Qualified name of the SparseTensor class, for messages (derived)."""
    array_type_name: str
    """Qualified name of the dense array type, for messages (derived)."""
    lattice_opt_env: str
    """Environment variable that names a ``lattice-opt`` executable for this runtime (derived)."""
    dtype_names: ClassVar[Mapping[Any, str]]
    """Library dtype -> MLIR-style element name (derived)."""
    _name_dtypes: ClassVar[Mapping[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "ops" not in cls.__dict__:
            return
        if "sparse_type" not in cls.__dict__:  # an adapter may still name its own
            ops_package = getattr(cls.ops, "__name__", "").partition(".")[0]
            cls.sparse_type = importlib.import_module(f"{ops_package}.sparse").SparseTensor
        package = cls.sparse_type.__module__.partition(".")[0]
        if "packed_type" not in cls.__dict__:
            cls.packed_type = cls.ops.QuantizedWeight
        cls.sparse_type_name = f"{package}.{cls.sparse_type.__qualname__}"
        cls.array_type_name = f"{cls.array_type.__module__}.{cls.array_type.__qualname__}"
        cls.lattice_opt_env = f"{cls.name.upper()}_LATTICE_LATTICE_OPT"
        library = sys.modules[cls.array_type.__module__]
        spelled = {
            name: getattr(library, cls.dtype_spellings.get(name, attribute), None)
            for name, attribute in ELEMENT_DTYPES
        }
        cls._name_dtypes = {name: dtype for name, dtype in spelled.items() if dtype is not None}
        cls.dtype_names = {dtype: name for name, dtype in cls._name_dtypes.items()}

    # -- RuntimeBackend -------------------------------------------------------

    def shape(self, array: Any) -> tuple[int, ...]:
        """Shape of an array as ints."""
        return tuple(int(d) for d in array.shape)

    def dtype_name(self, array: Any) -> str:
        """Element type of an array as an MLIR-style name."""
        return self.element_name(array.dtype)

    def element_name(self, dtype: Any) -> str:
        """MLIR-style name of a library dtype (its ``str`` when it has none)."""
        return self.dtype_names.get(dtype, str(dtype))

    def element_dtype(self, name: str) -> Any:
        """The library dtype of an MLIR-style element name; KeyError names unknown ones."""
        try:
            return self._name_dtypes[name]
        except KeyError:
            raise KeyError(f"no {self.name} dtype for element type {name!r}") from None

    def make_packed(self, weight: Any, scales: Any, biases: Any, bits: int, group_size: int) -> Any:
        """The packed triplet as the runtime's ``QuantizedWeight``."""
        return self.packed_type(weight, scales, biases, bits, group_size)

    def is_sparse(self, value: Any) -> bool:
        """Whether ``value`` is the runtime's SparseTensor."""
        return isinstance(value, self.sparse_type)

    def is_array(self, value: Any) -> bool:
        """Whether ``value`` is the runtime's dense array type."""
        return isinstance(value, self.array_type)

    def decompose(self, value: Any) -> tuple[Any, Any, Any]:
        """``(coords, feats, active_rows)`` of a SparseTensor."""
        return value.coords, value.feats, value.active_rows

    def stride(self, value: Any) -> tuple[int, int, int]:
        """The stride of a SparseTensor."""
        x, y, z = value.stride
        return (int(x), int(y), int(z))

    def channels(self, value: Any) -> int:
        """Channel count of a SparseTensor or of a feature array."""
        if isinstance(value, self.sparse_type):
            return int(value.num_channels)
        return int(value.shape[-1])

    # -- what the standard lowerings add ----------------------------------------

    def sparse_tensor(
        self, coords: Any, features: Any, stride: Triple, active: Any, *, trusted: bool
    ) -> Any:
        """A SparseTensor from the ABI arrays, fully validated unless ``trusted``."""
        make = self.sparse_type.trusted if trusted else self.sparse_type
        return make(coords, features, stride, active_rows=active)

    def argmax_rows(self, x: Any) -> Any:
        """Index of each row's largest entry as int32 (first on ties; zero rows give zero)."""
        raise NotImplementedError(f"{type(self).__name__} must implement argmax_rows")

    def index_span(self, index: Any) -> tuple[int, int] | None:
        """``(min, max)`` of an integer vector, or None when it is empty."""
        raise NotImplementedError(f"{type(self).__name__} must implement index_span")

    def take_rows(self, x: Any, index: Any) -> Any:
        """Rows of ``x`` at ``index`` (already bounds-checked)."""
        raise NotImplementedError(f"{type(self).__name__} must implement take_rows")

    # -- bundle IO ----------------------------------------------------------------

    def storage_buffer(self, array: Any) -> Any:
        """An array as safetensors stores it (a runtime may detach, move or copy it)."""
        return array

    def write_weights(
        self, path: Path, entries: Mapping[str, Any], metadata: Mapping[str, str] | None
    ) -> None:
        """Write flat safetensors entries (and ``__metadata__``) to ``path``."""
        raise NotImplementedError(f"{type(self).__name__} must implement write_weights")

    def read_weights(self, path: str | os.PathLike[str]) -> Mapping[str, Any]:
        """Every entry of a safetensors file, on the host; library errors pass through."""
        raise NotImplementedError(f"{type(self).__name__} must implement read_weights")

    read_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError, ValueError, RuntimeError)
    """What :meth:`read_weights` raises for a file it cannot read (reported as a BundleError)."""

    def loaded_shape_problem(self, name: str, stored: tuple[int, ...], got: Any) -> str | None:
        """Why an entry read as ``got`` does not match its header shape ``stored``, if it does not.

        A library with narrower dimensions than the file format (MLX's are
        32-bit) says so here; the default compares the shapes.
        """
        shape = tuple(int(d) for d in got.shape)
        if shape != stored:
            return f"has shape {list(stored)} but {self.name} read it as {shape}"
        return None

    def non_finite_counts(self, arrays: Sequence[Any]) -> list[int]:
        """How many NaN or infinite values each float array holds (one batched pass)."""
        raise NotImplementedError(f"{type(self).__name__} must implement non_finite_counts")

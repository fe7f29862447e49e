"""Each public functional op's call signature, declared once, generic in the runtime's types.

:mod:`lattice_contract.frontend.ops` declares each op's keywords; this module
declares the whole call: the positional arrays (their names, order and
defaults), the runtime-typed keywords and the keyword attributes, as one
callable ``Protocol`` per op, generic in the runtime's classes (``S`` its
SparseTensor, ``A`` its dense array, ``W`` what a weight may be: its array
or its ``QuantizedWeight``, ``D`` its dtype).  A runtime writes an op as its
array code plus one binding::

    def _conv3d(input: Any, weight: Any, bias: Any, coordinates: Any, attrs: Attrs) -> SparseTensor:
        ...  # the array code; attrs["kernel_size"] is a checked triple

    conv3d: Conv3d[SparseTensor, mx.array, ConvWeight] = implement("conv3d", _conv3d)

:func:`implement` returns the public function: it binds a call by the
declared signature (positionally or by name, as Python would), applies the
keyword attributes' defaults and checks (:func:`lattice_contract.frontend.ops.normalise`),
and calls the implementation with the arrays in declared order, the
runtime keywords, and the normalised attributes.  The public function
carries the declared docstring and the explicit ``__signature__``, which
``help()``, ``inspect.signature``, the torch exporter's tracer and
:func:`lattice_contract.runtime.ops.runtime_ops_problems` read.  mypy checks
every call against the ``Protocol`` with the runtime's own types, misspelt
keywords included; each ``ops`` module still satisfies
:class:`lattice_contract.runtime.ops.RuntimeOps`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, Unpack

import lattice_contract.frontend.ops as ops
from lattice_contract.frontend.grid import SparseCropAttrs, SparseToDenseAttrs
from lattice_contract.frontend.op_attrs import REQUIRED, keyword_error, normalise_attrs
from lattice_contract.frontend.ops import (
    ActivationAttrs,
    BatchNormAttrs,
    CastAttrs,
    Conv3dAttrs,
    ConvTranspose3dAttrs,
    DevoxelizeAttrs,
    ElementwiseAttrs,
    FullConv3dAttrs,
    FullPool3dAttrs,
    GenerativeConvTranspose3dAttrs,
    GlobalPoolAttrs,
    LayerNormAttrs,
    NormalizedConvTranspose3dAttrs,
    NormalizedGenerativeConvTranspose3dAttrs,
    NormalizedSubmConv3dAttrs,
    Pool3dAttrs,
    PoolTranspose3dAttrs,
    QuantizeWeightAttrs,
    RmsNormAttrs,
    SoftmaxAttrs,
    SparseBinaryAttrs,
    SparseCatAttrs,
    SparseReindexAttrs,
    SubmConv3dAttrs,
    TrilinearUpsample3dAttrs,
    VoxelizeAttrs,
)

__all__ = ["OLD_SPELLINGS", "SIGNATURES", "Attrs", "implement", "public_signature", "trusted"]

Attrs = dict[str, Any]
"""An op's keyword attributes after :func:`ops.normalise`: every one present, checked."""

S = TypeVar("S")
S_in = TypeVar("S_in", contravariant=True)
S_out = TypeVar("S_out", covariant=True)
A = TypeVar("A")
A_in = TypeVar("A_in", contravariant=True)
A_out = TypeVar("A_out", covariant=True)
W = TypeVar("W", contravariant=True)
D = TypeVar("D", contravariant=True)
Q = TypeVar("Q", covariant=True)

# -- convolutions --------------------------------------------------------------


class Conv3d(Protocol[S, A_in, W]):
    def __call__(
        self,
        input: S,
        weight: W,
        bias: A_in | None = None,
        *,
        coordinates: S | None = None,
        **attrs: Unpack[Conv3dAttrs],
    ) -> S: ...


class FullConv3d(Protocol[S, A_in, W]):
    def __call__(
        self, input: S, weight: W, bias: A_in | None = None, **attrs: Unpack[FullConv3dAttrs]
    ) -> S: ...


class SubmConv3d(Protocol[S, A_in, W]):
    def __call__(
        self, input: S, weight: W, bias: A_in | None = None, **attrs: Unpack[SubmConv3dAttrs]
    ) -> S: ...


class ConvTranspose3d(Protocol[S, A_in, W]):
    def __call__(
        self,
        input: S,
        weight: W,
        bias: A_in | None = None,
        *,
        coordinates: S | None = None,
        **attrs: Unpack[ConvTranspose3dAttrs],
    ) -> S: ...


class GenerativeConvTranspose3d(Protocol[S, A_in, W]):
    def __call__(
        self,
        input: S,
        weight: W,
        bias: A_in | None = None,
        **attrs: Unpack[GenerativeConvTranspose3dAttrs],
    ) -> S: ...


class NormalizedSubmConv3d(Protocol[S, A_in, W]):
    def __call__(
        self,
        input: S,
        weight: W,
        bias: A_in | None = None,
        **attrs: Unpack[NormalizedSubmConv3dAttrs],
    ) -> S: ...


class NormalizedConvTranspose3d(Protocol[S, A_in, W]):
    def __call__(
        self,
        input: S,
        weight: W,
        bias: A_in | None = None,
        *,
        coordinates: S | None = None,
        **attrs: Unpack[NormalizedConvTranspose3dAttrs],
    ) -> S: ...


class NormalizedGenerativeConvTranspose3d(Protocol[S, A_in, W]):
    def __call__(
        self,
        input: S,
        weight: W,
        bias: A_in | None = None,
        **attrs: Unpack[NormalizedGenerativeConvTranspose3dAttrs],
    ) -> S: ...


# -- pooling and upsampling ----------------------------------------------------


class Pool3d(Protocol[S]):
    def __call__(self, input: S, **attrs: Unpack[Pool3dAttrs]) -> S: ...


class FullPool3d(Protocol[S]):
    def __call__(self, input: S, **attrs: Unpack[FullPool3dAttrs]) -> S: ...


class GlobalPool(Protocol[S_in, A_out]):
    def __call__(self, input: S_in, **attrs: Unpack[GlobalPoolAttrs]) -> A_out: ...


class PoolTranspose3d(Protocol[S]):
    def __call__(
        self, input: S, *, coordinates: S | None = None, **attrs: Unpack[PoolTranspose3dAttrs]
    ) -> S: ...


class TrilinearUpsample3d(Protocol[S]):
    def __call__(
        self, input: S, *, coordinates: S | None = None, **attrs: Unpack[TrilinearUpsample3dAttrs]
    ) -> S: ...


# -- points ----------------------------------------------------------------------


class Voxelize(Protocol[S_out, A_in]):
    def __call__(
        self,
        points: A_in,
        features: A_in,
        batch_indices: A_in | None = None,
        active_rows: A_in | int | None = None,
        **attrs: Unpack[VoxelizeAttrs],
    ) -> S_out: ...


class Devoxelize(Protocol[S_in, A]):
    def __call__(
        self,
        points: A,
        voxels: S_in,
        batch_indices: A | None = None,
        point_active_rows: A | int | None = None,
        **attrs: Unpack[DevoxelizeAttrs],
    ) -> A: ...


# -- feature-only ops ------------------------------------------------------------


class Linear(Protocol[A, W]):
    def __call__(self, input: A, weight: W, bias: A | None = None) -> A: ...


class Activation(Protocol[A]):
    def __call__(self, input: A, **attrs: Unpack[ActivationAttrs]) -> A: ...


class BatchNorm(Protocol[A]):
    def __call__(
        self, input: A, scale: A, bias: A, mean: A, var: A, **attrs: Unpack[BatchNormAttrs]
    ) -> A: ...


class LayerNorm(Protocol[A]):
    def __call__(
        self, input: A, scale: A | None, bias: A | None, **attrs: Unpack[LayerNormAttrs]
    ) -> A: ...


class RmsNorm(Protocol[A]):
    def __call__(self, input: A, scale: A | None, **attrs: Unpack[RmsNormAttrs]) -> A: ...


class Softmax(Protocol[A]):
    def __call__(self, input: A, **attrs: Unpack[SoftmaxAttrs]) -> A: ...


class Elementwise(Protocol[A]):
    def __call__(self, input: A, **attrs: Unpack[ElementwiseAttrs]) -> A: ...


class EmbeddingLookup(Protocol[A]):
    def __call__(self, indices: A, weight: A) -> A: ...


class Cast(Protocol[A, D]):
    def __call__(self, input: A, dtype: D | str, **attrs: Unpack[CastAttrs]) -> A: ...


class QuantizeWeight(Protocol[A_in, D, Q]):
    def __call__(
        self, w: A_in, *, scale_dtype: D | None = None, **attrs: Unpack[QuantizeWeightAttrs]
    ) -> Q: ...


# -- sparse algebra --------------------------------------------------------------


class SparseBinary(Protocol[S]):
    def __call__(self, lhs: S, rhs: S, **attrs: Unpack[SparseBinaryAttrs]) -> S: ...


class SparseCat(Protocol[S]):
    def __call__(self, lhs: S, rhs: S, **attrs: Unpack[SparseCatAttrs]) -> S: ...


class SparseReindex(Protocol[S]):
    def __call__(self, input: S, target: S, **attrs: Unpack[SparseReindexAttrs]) -> S: ...


class SparseCrop(Protocol[S]):
    def __call__(self, input: S, **attrs: Unpack[SparseCropAttrs]) -> S: ...


class SparseToDense(Protocol[S_in, A_out]):
    def __call__(self, input: S_in, **attrs: Unpack[SparseToDenseAttrs]) -> A_out: ...


SIGNATURES: Mapping[str, type] = {
    "activation": Activation,
    "batch_norm": BatchNorm,
    "cast": Cast,
    "conv3d": Conv3d,
    "conv_transpose3d": ConvTranspose3d,
    "devoxelize": Devoxelize,
    "elementwise": Elementwise,
    "embedding_lookup": EmbeddingLookup,
    "full_conv3d": FullConv3d,
    "full_pool3d": FullPool3d,
    "generative_conv_transpose3d": GenerativeConvTranspose3d,
    "global_pool": GlobalPool,
    "layer_norm": LayerNorm,
    "linear": Linear,
    "normalized_conv_transpose3d": NormalizedConvTranspose3d,
    "normalized_generative_conv_transpose3d": NormalizedGenerativeConvTranspose3d,
    "normalized_subm_conv3d": NormalizedSubmConv3d,
    "pool3d": Pool3d,
    "pool_transpose3d": PoolTranspose3d,
    "quantize_weight": QuantizeWeight,
    "rms_norm": RmsNorm,
    "softmax": Softmax,
    "sparse_binary": SparseBinary,
    "sparse_cat": SparseCat,
    "sparse_crop": SparseCrop,
    "sparse_reindex": SparseReindex,
    "sparse_to_dense": SparseToDense,
    "subm_conv3d": SubmConv3d,
    "trilinear_upsample3d": TrilinearUpsample3d,
    "voxelize": Voxelize,
}
"""Every public op's call ``Protocol``, by op name (the keys of ``ops.DECLARATIONS``)."""


OLD_SPELLINGS: Mapping[str, Mapping[str, str]] = {
    op: {"x": "input"}
    for op in (
        "activation",
        "batch_norm",
        "cast",
        "elementwise",
        "layer_norm",
        "linear",
        "rms_norm",
        "softmax",
    )
}
"""Argument names an op accepted before it took the dialect's (old -> declared).

The dense feature ops named their features ``x``; the dialect (and the builder,
and ``torch.nn.functional``) calls that operand ``input``, which is now the
declared name.  ``x=`` keeps working at run time; typed code should say
``input=`` (or pass it positionally, as almost every call does)."""


def public_signature(op: str) -> inspect.Signature:
    """The signature users see: the declared arrays, then every keyword with its default.

    Array parameters carry no annotation (their types are the runtime's);
    keyword attributes carry their declared types.
    """
    decl = ops.DECLARATIONS[op]
    params = list(inspect.signature(SIGNATURES[op].__call__).parameters.values())[1:]
    arrays = [p.replace(annotation=p.empty) for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    own = [p.replace(annotation=p.empty) for p in params if p.kind is p.KEYWORD_ONLY]
    if [p.name for p in own] != list(decl.runtime_keywords):  # pragma: no cover
        raise TypeError(f"{op}: the Protocol's keywords and the declaration's disagree")
    types = typing.get_type_hints(ops.keywords_type(op))
    declared = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if default is REQUIRED else default,
            annotation=types[name],
        )
        for name, _, default in decl.attrs
    ]
    return inspect.Signature([*arrays, *declared, *own])


R = TypeVar("R")


Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


def implement(op: str, impl: Callable[..., R], note: str = "", around: Wrap | None = None) -> Any:
    """The public function of ``op`` on a runtime whose array code is ``impl``.

    ``impl`` takes the declared arrays in order, then the runtime keywords
    (``coordinates``...), then the normalised attributes; its parameter
    names must be those or their :data:`OLD_SPELLINGS` (checked here, at
    import).  ``note`` is a paragraph about this runtime's implementation,
    added to the declared help text.  ``around`` wraps the bound call
    (torch's export ``traced``, which records calls by the declared
    signature); an old spelling is renamed before it.  The result is typed
    ``Any``: the runtime annotates the name it binds it to with the op's
    ``Protocol`` (e.g. ``Conv3d[SparseTensor, ...]``).
    """
    decl = ops.DECLARATIONS[op]
    signature = _annotated(public_signature(op), impl)
    arrays = [p for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    names = tuple(p.name for p in arrays)
    defaults = tuple(p.default for p in arrays)
    runtime_keywords = decl.runtime_keywords
    old = OLD_SPELLINGS.get(op, {})
    wanted = [*names, *runtime_keywords]
    got = [old.get(name, name) for name in list(inspect.signature(impl).parameters)[:-1]]
    if got != wanted:  # pragma: no cover - an implementation error
        raise TypeError(f"{impl.__qualname__}: parameters must be {wanted} and the attributes")

    keywords = decl.names
    known = frozenset((*names, *keywords))
    takes = f"{op}: takes {len(names)} positional argument" + ("" if len(names) == 1 else "s")

    def call(*args: Any, **kwargs: Any) -> R:
        if len(args) > len(names):
            raise TypeError(f"{takes} but {len(args)} were given")
        for key in kwargs:  # before the arrays: a misspelt array name is not "missing"
            if key not in known:
                raise keyword_error(op, key, keywords, names)
        values = list(args)
        for name in names[: len(args)]:
            if name in kwargs:
                raise TypeError(f"{op}: got multiple values for argument {name!r}")
        for name, default in zip(names[len(args) :], defaults[len(args) :], strict=True):
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif default is inspect.Parameter.empty:
                raise TypeError(f"{op}: missing required argument {name!r}")
            else:
                values.append(default)
        values.extend(kwargs.pop(name, None) for name in runtime_keywords)
        return impl(*values, normalise_attrs(decl, kwargs))

    def call_trusted(*args: Any, **attrs: Any) -> R:
        values = [*args, *defaults[len(args) :]]
        values.extend(attrs.pop(name, None) for name in runtime_keywords)
        return impl(*values, attrs)

    _publish(call, op, impl.__module__, ops.help_text(op, note), signature)
    _publish(call_trusted, op, impl.__module__, call.__doc__ or "", signature)
    inner = call if around is None else around(call)
    inner.__dict__[_TRUSTED] = call_trusted if around is None else around(call_trusted)
    if not old:
        return inner

    def renamed(*args: Any, **kwargs: Any) -> Any:
        for spelling, name in old.items():
            if spelling in kwargs:
                if name in kwargs:
                    raise TypeError(f"{op}: got both {name!r} and its old spelling {spelling!r}")
                kwargs[name] = kwargs.pop(spelling)
        return inner(*args, **kwargs)

    renamed.__dict__.update(inner.__dict__)
    _publish(renamed, op, impl.__module__, call.__doc__ or "", signature)
    return renamed


def _annotated(signature: inspect.Signature, impl: Callable[..., Any]) -> inspect.Signature:
    """``signature`` with the runtime's own types where ``impl`` declares them.

    The arrays, runtime keywords and result take ``impl``'s annotations
    (``torch.Tensor``, ``SparseTensor``) unless they are ``Any``, so
    ``help()`` shows the types a caller passes; if a hint cannot be resolved
    at import time the signature stays unannotated.
    """
    try:
        hints = typing.get_type_hints(impl)
    except (NameError, TypeError):  # pragma: no cover - a name only under TYPE_CHECKING
        return signature
    own = [p for p in signature.parameters.values() if p.annotation is p.empty]
    names = list(inspect.signature(impl).parameters)[:-1]  # impl's order is the same
    types = dict(zip((p.name for p in own), names, strict=True))
    params = [
        p.replace(annotation=hints[types[p.name]])
        if p.name in types and hints.get(types[p.name], Any) is not Any
        else p
        for p in signature.parameters.values()
    ]
    result = hints.get("return", Any)
    return signature.replace(
        parameters=params, return_annotation=signature.empty if result is Any else result
    )


_TRUSTED = "__lattice_trusted__"


def trusted(public: Callable[..., R]) -> Callable[..., R]:
    """The public op ``public`` for a caller whose attributes are already normalised.

    An nn layer checks its attributes once, at construction, with the same
    shared check the op's normaliser runs (an activation's
    :func:`~lattice_contract.frontend.nn_args.activation_params`); calling the op
    through this skips the per-call binding and normalising, which cost
    more than a small op's array code.  The caller passes the arrays
    positionally and every attribute as its normalised value (what
    :func:`~lattice_contract.frontend.ops.normalise` returns); ``around`` (the
    torch exporter's tracer) still sees and records the call.
    """
    found: Callable[..., R] = public.__dict__[_TRUSTED]
    return found


def _publish(fn: Any, op: str, module: str, doc: str, signature: inspect.Signature) -> None:
    fn.__name__ = fn.__qualname__ = op
    fn.__module__ = module
    fn.__doc__ = doc
    fn.__signature__ = signature
    fn.__lattice_api__ = op

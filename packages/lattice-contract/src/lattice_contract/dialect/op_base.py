"""How an op is declared: the :class:`Op` base class and the annotated parts ops are made of.

An op is a class whose annotations declare its operands, results and
attributes in order::

    class Conv3d(Op):
        "Support-generating sparse convolution."
        input: Annotated[Operand, SPARSE]
        weight: Annotated[Operand, weight_of(WeightFamily.conv3d)]
        bias: Annotated[Operand, weight_of(WeightFamily.bias), OPTIONAL]
        result: Annotated[Result, SPARSE]
        kernel_size: Annotated[Attribute, POSITIVE_TRIPLE]

Annotation order is declaration order, which is the operand, result and
attribute order of the MLIR op and of the builder's keyword arguments.
Every subclass registers itself; :mod:`.schema` collects the registry into
``SCHEMA`` after importing :mod:`.ops` and :mod:`.extra_ops`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, get_type_hints

from lattice_contract.dialect.rules import (
    RuleUse,
)
from lattice_contract.dialect.types import (
    ACCUMULATION,
    DEFAULT_ACCUMULATION,
    FEATURES,
    FILL,
    NONNEGATIVE_TRIPLE,
    OP_DECLARATIONS,
    OPTIONAL,
    POSITIVE_F32,
    POSITIVE_TRIPLE,
    SPARSE,
    VARIADIC,
    AttrDef,
    Attribute,
    AttrSpec,
    ChannelRule,
    OpDef,
    Operand,
    OperandDef,
    Result,
    ResultDef,
    StrideRule,
    TypeConstraint,
    WeightFamily,
    weight_of,
)


class Op:
    """Base class of op declarations; subclasses are collected into ``SCHEMA``."""

    __mnemonic__: ClassVar[str]
    __traits__: ClassVar[tuple[str, ...]] = ()
    __stride__: ClassVar[StrideRule] = StrideRule.none
    __channels__: ClassVar[ChannelRule] = ChannelRule.none
    __rules__: ClassVar[tuple[RuleUse, ...]] = ()
    _registry: ClassVar[list[type[Op]]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Op._registry.append(cls)


def op_def(cls: type[Op]) -> OpDef:
    hints = get_type_hints(cls, include_extras=True)  # each base in its own module
    operands: list[OperandDef] = []
    results: list[ResultDef] = []
    attributes: list[AttrDef] = []
    # Base classes first: an op may extend another's declaration (FullConv3d(Conv3d)).
    declaring = [k for k in reversed(cls.__mro__) if issubclass(k, Op) and k is not Op]
    names = {n: None for k in declaring for n in vars(k).get("__annotations__", {})}
    for name in names:
        hint = hints[name]
        base, meta = hint.__origin__, hint.__metadata__
        if base is Operand:
            constraint = next(m for m in meta if isinstance(m, TypeConstraint))
            operands.append(
                OperandDef(
                    name,
                    constraint,
                    optional=any(m is OPTIONAL for m in meta),
                    variadic=any(m is VARIADIC for m in meta),
                )
            )
        elif base is Result:
            results.append(ResultDef(name, next(m for m in meta if isinstance(m, TypeConstraint))))
        elif base is Attribute:
            attributes.append(AttrDef(name, next(m for m in meta if isinstance(m, AttrSpec))))
        else:  # pragma: no cover - a schema authoring error
            raise TypeError(f"{cls.__name__}.{name}: annotate with Operand, Result or Attribute")
    summary = (cls.__doc__ or "").strip().splitlines()[0]
    if not summary:  # pragma: no cover - a schema authoring error
        raise TypeError(f"{cls.__name__} needs a one-line docstring summary")
    OP_DECLARATIONS[cls.__mnemonic__] = (tuple(cls.__rules__), cls.__channels__)
    return OpDef(
        name=cls.__mnemonic__,
        class_name=cls.__name__,
        summary=summary,
        operands=tuple(operands),
        results=tuple(results),
        attributes=tuple(attributes),
        traits=tuple(cls.__traits__),
        stride=cls.__stride__,
    )


# The annotated parts the op declarations share.
# The operations.  Attribute annotations use the shared specs above.

_Conv = Annotated[Operand, weight_of(WeightFamily.conv3d)]
_Bias = Annotated[Operand, weight_of(WeightFamily.bias), OPTIONAL]
_Sparse = Annotated[Operand, SPARSE]
_SparseResult = Annotated[Result, SPARSE]
_Features = Annotated[Operand, FEATURES]
_FeaturesResult = Annotated[Result, FEATURES]
_Triple = Annotated[Attribute, POSITIVE_TRIPLE]
_Padding = Annotated[Attribute, NONNEGATIVE_TRIPLE]
_Accumulation = Annotated[Attribute, ACCUMULATION]
_DefaultAccumulation = Annotated[Attribute, DEFAULT_ACCUMULATION]
_Fill = Annotated[Attribute, FILL]
_Eps = Annotated[Attribute, POSITIVE_F32]
_Channel = Annotated[Operand, weight_of(WeightFamily.channel)]
_ChannelBias = Annotated[Operand, weight_of(WeightFamily.bias)]

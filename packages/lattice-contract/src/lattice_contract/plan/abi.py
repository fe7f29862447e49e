"""The call ABI of a plan: arguments, outputs, their roles and the logical inputs.

An artifact's entry function takes flat ABI arguments and returns flat
results; ``lattice.input_roles`` / ``lattice.output_roles`` and the names
give them meaning.  These checks make that meaning unambiguous before any
runtime binds a caller's arrays: every role is known and fits its value's
type, each sparse input is three consecutive arguments named
``<name>_coords``, ``<name>_features``, ``<name>_active`` (or, for the only
sparse input, ``coords``, ``features``, ``active``), no ABI name or
label is used twice, and every output names the value it returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lattice_contract.dialect import (
    INPUT_ROLES,
    OUTPUT_ROLES,
    SPARSE_ABI_SUFFIXES,
    SPARSE_INPUT_ROLES,
)
from lattice_contract.plan.payload import record, require_list, require_str
from lattice_contract.plan.records import (
    LogicalInput,
    PlanArgument,
    PlanError,
    PlanOutput,
    ValueType,
)

__all__ = [
    "BARE_INPUT_NAME",
    "BARE_SPARSE_NAMES",
    "check_role_types",
    "freeze_arguments",
    "freeze_outputs",
    "logical_inputs",
]

_IO_FIELDS = ("name", "abi_name", "type", "role")


def _freeze_io(
    payload: Mapping[str, Any], key: str, roles: tuple[str, ...]
) -> list[tuple[str, str, str, str]]:
    """``(name, abi_name, type, role)`` of each ABI record in ``payload[key]``, roles checked."""
    what, attribute = (
        ("argument", "lattice.input_roles") if key == "args" else ("output", "lattice.output_roles")
    )
    records: list[tuple[str, str, str, str]] = []
    for i, entry in enumerate(require_list(payload[key], f"plan '{key}'")):
        where = f"{what} #{i}"
        item = record(entry, where, _IO_FIELDS)
        fields = tuple(require_str(item[k], f"{where}.{k}") for k in _IO_FIELDS)
        if fields[3] not in roles:
            raise PlanError(
                f"{where} ({fields[1]!r}) has role {fields[3]!r}; {attribute} entries must be "
                f"one of {', '.join(roles)}"
            )
        records.append((fields[0], fields[1], fields[2], fields[3]))
    return records


def freeze_arguments(payload: Mapping[str, Any]) -> tuple[PlanArgument, ...]:
    """The entry arguments, their roles, grouping, labels and ABI names checked."""
    args = tuple(PlanArgument(*r) for r in _freeze_io(payload, "args", INPUT_ROLES))
    logical_inputs(args)  # raises on role/ABI-name inconsistencies
    labels: set[str] = set()
    abi_seen: set[str] = set()
    for i, arg in enumerate(args):
        if arg.name in labels:
            raise PlanError(f"argument #{i} reuses value label {arg.name!r}")
        if arg.abi_name in abi_seen:
            raise PlanError(f"argument #{i} reuses ABI name {arg.abi_name!r}")
        labels.add(arg.name)
        abi_seen.add(arg.abi_name)
    return args


def freeze_outputs(
    payload: Mapping[str, Any], returns: Sequence[str], defined: Mapping[str, str]
) -> tuple[PlanOutput, ...]:
    """The outputs, one per returned label, each naming and typing the value it returns."""
    outputs = [PlanOutput(*r) for r in _freeze_io(payload, "outputs", OUTPUT_ROLES)]
    if len(outputs) != len(returns):
        raise PlanError(
            f"the plan declares {len(outputs)} output(s) for {len(returns)} returned value(s); "
            "lattice.output_names/roles must have one entry per return"
        )
    out_names: set[str] = set()
    for i, (out, label) in enumerate(zip(outputs, returns, strict=True)):
        if out.name != label:
            raise PlanError(f"output #{i} names value {out.name!r} but return #{i} is {label!r}")
        if out.type != defined[label]:
            raise PlanError(
                f"output #{i} ({out.abi_name!r}) declares type {out.type!r} but {label!r} "
                f"has type {defined[label]!r}"
            )
        if out.abi_name in out_names:
            raise PlanError(f"output #{i} reuses ABI name {out.abi_name!r}")
        out_names.add(out.abi_name)
    return tuple(outputs)


BARE_SPARSE_NAMES: tuple[str, str, str] = ("coords", "features", "active")
"""The ABI names of a program's only sparse input when it has no ``<name>_`` prefix."""

BARE_INPUT_NAME = "input"
"""The logical name of a bare-named sparse input (``program(input=x)``)."""


def _bare_input(
    i: int, args: Sequence[PlanArgument], group: tuple[PlanArgument, ...]
) -> LogicalInput:
    """The sparse input named ``coords``, ``features``, ``active``: allowed when it is the only one.

    With one sparse input the bare names are unambiguous (the call form
    ``program(coords=..., features=..., active=...)``); with several, every
    input needs its ``<name>_`` prefix so that each keyword names one array.
    """
    sparse = sum(1 for a in args if a.role == "sparse_coords")
    if sparse != 1:
        raise PlanError(
            f"argument #{i} is the bare sparse input name 'coords' but the entry has {sparse} "
            f"sparse inputs; the bare names are for a single sparse input, so name each one "
            f"<name>_coords, <name>_features, <name>_active"
        )
    for offset, (member, want) in enumerate(zip(group, BARE_SPARSE_NAMES, strict=True)):
        if member.abi_name != want:
            raise PlanError(
                f"argument #{i + offset} of the bare sparse input is named "
                f"{member.abi_name!r}; expected {want!r}"
            )
    return LogicalInput(BARE_INPUT_NAME, "sparse", group)


def logical_inputs(args: Sequence[PlanArgument]) -> tuple[LogicalInput, ...]:
    """Public inputs in argument order: sparse triples grouped under their shared prefix."""
    found: list[LogicalInput] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.role == "tensor":
            found.append(LogicalInput(arg.abi_name, "tensor", (arg,)))
            i += 1
            continue
        group = tuple(args[i : i + 3])
        roles = tuple(a.role for a in group)
        if roles != SPARSE_INPUT_ROLES:
            raise PlanError(
                f"argument #{i} ({arg.abi_name!r}) starts a sparse input but the roles from "
                f"there are {list(roles)}; each logical sparse input must be three consecutive "
                f"arguments with roles {', '.join(SPARSE_INPUT_ROLES)}"
            )
        suffix = SPARSE_ABI_SUFFIXES[0]
        if arg.abi_name == BARE_SPARSE_NAMES[0]:
            found.append(_bare_input(i, args, group))
            i += 3
            continue
        if not arg.abi_name.endswith(suffix) or len(arg.abi_name) == len(suffix):
            raise PlanError(
                f"argument #{i} has role sparse_coords but ABI name {arg.abi_name!r}; sparse "
                f"inputs are named <name>_coords, <name>_features, <name>_active (a single "
                f"sparse input may be coords, features, active)"
            )
        prefix = arg.abi_name[: -len(suffix)]
        for offset, (member, want) in enumerate(zip(group, SPARSE_ABI_SUFFIXES, strict=True)):
            if member.abi_name != prefix + want:
                raise PlanError(
                    f"argument #{i + offset} of sparse input {prefix!r} is named "
                    f"{member.abi_name!r}; expected {prefix + want!r}"
                )
        found.append(LogicalInput(prefix, "sparse", group))
        i += 3
    names = [f.name for f in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PlanError(
            f"logical input name(s) {', '.join(map(repr, duplicates))} are used twice; every "
            "public input needs its own name"
        )
    return tuple(found)


def _check_role_type(what: str, role: str, info: ValueType) -> None:
    ok: bool
    if role == "sparse_coords":
        ok = info.kind == "tensor" and info.dtype == "i32" and info.rank == 2
        ok = ok and info.shape is not None and info.shape[1] == 4
        want = "tensor<?x4xi32>"
    elif role == "sparse_active":
        ok = info.kind == "tensor" and info.dtype == "i32" and info.shape == (1,)
        want = "tensor<1xi32>"
    elif role == "sparse_features":
        ok = info.kind == "tensor" and info.rank == 2 and info.dtype in ("f16", "bf16", "f32")
        want = "a rank-2 float tensor"
    elif role == "sparse_tensor":
        ok = info.kind == "sparse"
        want = "!lattice.sparse_tensor"
    else:  # tensor
        ok = info.kind == "tensor"
        want = "a ranked tensor"
    if not ok:
        raise PlanError(f"{what} has role {role!r} but its type is not {want}")


def check_role_types(
    args: Sequence[PlanArgument],
    outputs: Sequence[PlanOutput],
    types: Mapping[str, ValueType],
) -> None:
    """Every argument's and output's type fits its role (coords are ``tensor<?x4xi32>``...)."""
    for i, arg in enumerate(args):
        _check_role_type(f"argument #{i} ({arg.abi_name!r})", arg.role, types[arg.type])
    for i, out in enumerate(outputs):
        _check_role_type(f"output #{i} ({out.abi_name!r})", out.role, types[out.type])

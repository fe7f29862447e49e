"""The ``--kernel-spec`` file: which framework, version and layout each key is.

A flattened ``(27, 16, 32)`` kernel carries neither its framework nor its
kernel shape, an ``(8, ...)`` kernel may be ``2x2x2`` or ``8x1x1``, spconv
2.1 saved some layers ``(C_out, K0, K1, K2, C_in)`` and others ``(K0, K1, K2,
C_out, C_in)`` depending on the kernel volume and the build, and a spconv
``1x1x1`` kernel is read with another channel order depending on the conv's
stride.  A wrong guess gives a model that runs and is silently wrong, so every
kernel key is declared here, and whatever the declaration leaves open is
either decided from the tensor's shape when only one reading fits or refused.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lattice_contract.artifact import read_regular_file
from lattice_contract.dialect import Triple, as_triple

__all__ = [
    "FRAMEWORKS",
    "LEGACY_FRAMEWORKS",
    "SPCONV_LAYOUTS",
    "VERSIONS",
    "ConversionError",
    "KernelDeclaration",
    "KernelSpec",
]

SPEC_FORMAT = "lattice-kernel-spec"

MAX_SPEC_BYTES = 16 << 20
"""Largest kernel-spec file read (a spec lists patterns, not data)."""

FRAMEWORKS: tuple[str, ...] = ("torchsparse", "spconv", "minkowski")
"""Source frameworks ``convert-checkpoint`` understands."""

VERSIONS: Mapping[str, tuple[str, ...]] = {
    "torchsparse": ("2.0", "2.1"),
    "spconv": ("1", "2.0", "2.1", "2.2"),
    "minkowski": ("0.5",),
}
"""Versions per framework whose weight conventions differ.

spconv ``"2.2"`` stands for every release from 2.2 on (they all save KRSC);
``"2.3"`` is accepted as a synonym of it.
"""

LEGACY_FRAMEWORKS: Mapping[str, tuple[str, str | None]] = {
    "torchsparse-2.0": ("torchsparse", "2.0"),
    "torchsparse-2.1": ("torchsparse", "2.1"),
    "spconv-1": ("spconv", "1"),
    "spconv-2": ("spconv", None),  # some 2.x: the layout is detected or declared
}
"""Framework names of spec version 1 files, still accepted: name -> (framework, version)."""

SPCONV_LAYOUTS: tuple[str, ...] = ("KRSC", "RSKC", "RSCK")
"""spconv's saved 5-D layouts.

KRSC ``(C_out, K0, K1, K2, C_in)``, RSKC ``(K0, K1, K2, C_out, C_in)``, RSCK
``(K0, K1, K2, C_in, C_out)``.
"""

_VERSION_SYNONYMS = {"2.3": "2.2", "1.x": "1", "0.5.4": "0.5"}
_ALLOWED_FIELDS = frozenset(
    {"framework", "version", "layout", "kernel_size", "stride", "subm", "axes", "role", "flip"}
)
_AXIS_NAMES = "xyz"


class ConversionError(ValueError):
    """A checkpoint or kernel spec that cannot be converted unambiguously."""


@dataclass(frozen=True)
class KernelDeclaration:
    """How one (pattern of) state-dict key(s) is laid out in its source framework.

    ``version`` is None only for a legacy ``spconv-2`` declaration (some 2.x
    release, layout decided from the shape) and for MinkowskiEngine, whose
    layout never changed.
    """

    pattern: str
    framework: str
    version: str | None = None
    layout: str | None = None
    kernel_size: Triple | None = None
    stride: Triple | None = None
    subm: bool = False
    axes: str = "xyz"
    role: str = "kernel"
    flip: bool = False

    @property
    def source(self) -> str:
        """``framework`` and ``version`` as the manifest records them."""
        return self.framework if self.version is None else f"{self.framework}-{self.version}"

    @classmethod
    def from_json(cls, pattern: str, data: Any) -> KernelDeclaration:
        """Validate one ``kernels`` entry; errors name the pattern."""
        where = f"kernel spec entry {pattern!r}"
        if not isinstance(data, Mapping):
            raise ConversionError(f"{where}: expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - _ALLOWED_FIELDS)
        if unknown:
            raise ConversionError(
                f"{where}: unknown field(s) {unknown}; allowed: {sorted(_ALLOWED_FIELDS)}"
            )
        framework, version = _framework_and_version(where, data.get("framework"), data)
        layout = _layout(where, framework, version, data.get("layout"))
        role = data.get("role", "kernel")
        if role not in ("kernel", "bias"):
            raise ConversionError(f"{where}: role must be 'kernel' or 'bias', got {role!r}")
        axes = data.get("axes", "xyz")
        if not isinstance(axes, str) or sorted(axes) != sorted(_AXIS_NAMES):
            raise ConversionError(
                f"{where}: axes must be a permutation of 'xyz' (the Lattice axis of each "
                f"source spatial column), got {axes!r}"
            )
        flags = {name: data.get(name, False) for name in ("subm", "flip")}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise ConversionError(f"{where}: {name} must be true or false, got {value!r}")
        return cls(
            pattern=pattern,
            framework=framework,
            version=version,
            layout=layout,
            kernel_size=_positive_triple(data.get("kernel_size"), f"{where}: kernel_size"),
            stride=_positive_triple(data.get("stride"), f"{where}: stride"),
            subm=flags["subm"],
            axes=axes,
            role=role,
            flip=flags["flip"],
        )


def _framework_and_version(
    where: str, framework: Any, data: Mapping[str, Any]
) -> tuple[str, str | None]:
    declared = data.get("version")
    if declared is not None and not isinstance(declared, str):
        raise ConversionError(f'{where}: "version" must be a string such as "2.1"')
    if framework in LEGACY_FRAMEWORKS:
        name, implied = LEGACY_FRAMEWORKS[framework]
        if declared is not None and implied is not None and declared != implied:
            raise ConversionError(
                f"{where}: framework {framework!r} already says version {implied}, "
                f"but version {declared!r} is declared; declare one of them"
            )
        framework, declared = name, declared if declared is not None else implied
    if framework not in FRAMEWORKS:
        raise ConversionError(
            f"{where}: unknown framework {framework!r}; declare one of {list(FRAMEWORKS)} "
            f'with a "version" (or a legacy name: {list(LEGACY_FRAMEWORKS)})'
        )
    if declared is None:
        if framework == "torchsparse":
            raise ConversionError(
                f"{where}: TorchSparse 2.0 and 2.1 store 1x1x1 kernels differently; declare "
                f'"version": "2.0" or "2.1"'
            )
        return framework, ("0.5" if framework == "minkowski" else None)
    version = _VERSION_SYNONYMS.get(declared, declared)
    if version not in VERSIONS[framework]:
        raise ConversionError(
            f"{where}: unknown {framework} version {declared!r}; declare one of "
            f"{list(VERSIONS[framework])}"
        )
    return framework, version


def _layout(where: str, framework: str, version: str | None, layout: Any) -> str | None:
    if layout is None:
        return None
    if framework != "spconv":
        raise ConversionError(
            f'{where}: "layout" applies to spconv kernels only; {framework} has one layout'
        )
    if layout not in SPCONV_LAYOUTS:
        raise ConversionError(
            f"{where}: layout must be one of {list(SPCONV_LAYOUTS)}, got {layout!r}"
        )
    fixed = {"1": "RSCK", "2.0": "RSKC"}.get(version or "")
    if fixed is not None and layout != fixed:
        raise ConversionError(
            f"{where}: spconv {version} saves every kernel as {fixed}, not {layout}; "
            "remove the layout or correct the version"
        )
    return str(layout)


def _positive_triple(value: Any, where: str) -> Triple | None:
    if value is None:
        return None
    try:
        triple = as_triple(value, where)
    except (TypeError, ValueError) as exc:
        raise ConversionError(str(exc)) from None
    if min(triple) < 1:
        raise ConversionError(f"{where} must be positive, got {value!r}")
    return triple


MAX_RENAME_PATTERN = 256
"""Longest ``rename`` regex accepted (characters)."""

MAX_OPEN_REPEATS = 3
"""Most unbounded repeats (``*``, ``+``, ``{n,}``) one ``rename`` regex may hold."""

MAX_KEY_LENGTH = 1024
"""Longest state-dict key accepted: with the bounds above, a rename costs at most
about ``len(key) ** (MAX_OPEN_REPEATS + 1)`` steps, so a key is bounded too."""


def _rename_rule(pattern: str, replacement: str) -> tuple[str, str]:
    """Check one ``rename`` entry: a bounded regex and a replacement valid for it.

    Python's regex engine backtracks: a repeat nested in a repeat, or a
    repeated alternation, makes ``^(a+)+$`` take longer than the age of the
    universe on a 40-character key.  A rename only ever needs repeats of one
    character or class (``.*``, ``\\d+``, ``[a-z_]*``), so a repeat whose body
    is a group, an alternation or a backreference is refused, and so are long
    patterns and more than :data:`MAX_OPEN_REPEATS` unbounded repeats.  The
    replacement is compiled against the pattern here (a ``\\9`` for a
    one-group pattern is an error now, not in the middle of a conversion).
    """
    where = f"kernel spec: rename regex {pattern!r}"
    if len(pattern) > MAX_RENAME_PATTERN:
        raise ConversionError(f"{where} is longer than {MAX_RENAME_PATTERN} characters")
    try:
        compiled = re.compile(pattern)
        parsed = _sre_parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ConversionError(f"{where}: {exc}") from None
    open_repeats = _check_repeats(parsed, where, inside_repeat=False)
    if open_repeats > MAX_OPEN_REPEATS:
        raise ConversionError(
            f"{where} has {open_repeats} unbounded repeats; at most {MAX_OPEN_REPEATS} keep a "
            "rename fast on every key"
        )
    try:
        compiled.sub(replacement, "")
    except (re.error, IndexError) as exc:
        raise ConversionError(
            f"kernel spec: rename replacement {replacement!r} for {pattern!r}: {exc}"
        ) from None
    return pattern, replacement


def _sre_parse(pattern: str) -> Any:
    """The stdlib's own parse of ``pattern`` (the tree ``re.compile`` compiles)."""
    return importlib.import_module("re._parser").parse(pattern)


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
_NESTING = ("SUBPATTERN", "BRANCH", "ASSERT", "ASSERT_NOT", "ATOMIC_GROUP", "GROUPREF_EXISTS")


def _check_repeats(items: Any, where: str, *, inside_repeat: bool) -> int:
    """Walk a parsed pattern; refuse ambiguous repeats; count unbounded ones."""
    count = 0
    for op, arg in items:
        name = str(op)
        if name == "GROUPREF" or name == "GROUPREF_EXISTS":
            raise ConversionError(f"{where}: backreferences are not accepted in a rename")
        if name in _REPEATS:
            _, high, body = arg
            if inside_repeat or any(str(o) in _REPEATS + _NESTING for o, _ in body):
                raise ConversionError(
                    f"{where}: a repeated group, alternation or nested repeat can take "
                    "exponential time; repeat single characters or classes only "
                    "(for example .*, \\d+, [a-z_]*)"
                )
            count += int(high == sre_maxrepeat())
            count += _check_repeats(body, where, inside_repeat=True)
        elif name == "SUBPATTERN":
            count += _check_repeats(arg[-1], where, inside_repeat=inside_repeat)
        elif name == "BRANCH":
            for branch in arg[1]:
                count += _check_repeats(branch, where, inside_repeat=inside_repeat)
        elif name in ("ASSERT", "ASSERT_NOT"):
            count += _check_repeats(arg[1], where, inside_repeat=inside_repeat)
        elif name == "ATOMIC_GROUP":
            count += _check_repeats(arg, where, inside_repeat=inside_repeat)
    return count


def sre_maxrepeat() -> int:
    """The ``high`` bound the parser gives an unbounded repeat."""
    return int(importlib.import_module("re._constants").MAXREPEAT)


def _globs(data: Mapping[str, Any], field: str, meaning: str) -> tuple[str, ...]:
    value = data.get(field, [])
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise ConversionError(f'kernel spec: "{field}" must be a list of keys or globs ({meaning})')
    return tuple(value)


@dataclass(frozen=True)
class KernelSpec:
    """The parsed ``--kernel-spec`` file."""

    kernels: tuple[KernelDeclaration, ...]
    keep: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> KernelSpec:
        """Validate a spec object (see ``docs/convert-checkpoint.md`` for the format)."""
        if not isinstance(data, Mapping):
            raise ConversionError("kernel spec: expected a JSON object at the top level")
        if data.get("format") != SPEC_FORMAT or data.get("version") not in (1, 2):
            raise ConversionError(
                f'kernel spec: set "format": "{SPEC_FORMAT}" and "version": 2 '
                f"(got format={data.get('format')!r}, version={data.get('version')!r})"
            )
        allowed = {"format", "version", "kernels", "keep", "drop", "rename"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConversionError(f"kernel spec: unknown top-level field(s) {unknown}")
        kernels = data.get("kernels")
        if not isinstance(kernels, Mapping) or not kernels:
            raise ConversionError('kernel spec: "kernels" must be a non-empty object')
        rename_raw = data.get("rename", [])
        if not isinstance(rename_raw, list):
            raise ConversionError('kernel spec: "rename" must be a list of [regex, replacement]')
        rename: list[tuple[str, str]] = []
        for item in rename_raw:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not all(isinstance(s, str) for s in item)
            ):
                raise ConversionError(
                    f"kernel spec: rename entry {item!r} must be [regex, replacement]"
                )
            rename.append(_rename_rule(item[0], item[1]))
        return cls(
            kernels=tuple(KernelDeclaration.from_json(p, d) for p, d in kernels.items()),
            keep=_globs(data, "keep", "copied unchanged although they look like kernels"),
            drop=_globs(data, "drop", "left out of the output, e.g. *.num_batches_tracked"),
            rename=tuple(rename),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KernelSpec:
        """Read and validate a spec file."""
        where = f"kernel spec {str(path)!r}"
        try:
            raw = read_regular_file(path, MAX_SPEC_BYTES, what="kernel spec")
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConversionError(f"{where} is not UTF-8 text: {exc}") from None
        except (OSError, ValueError) as exc:
            raise ConversionError(f"cannot read {where}: {exc}") from None
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            # ValueError: Python's int() refuses numbers of more than 4,300 digits.
            raise ConversionError(f"{where} is not valid JSON: {exc}") from None
        return cls.from_json(data)

    def declaration_for(self, key: str) -> KernelDeclaration | None:
        """The one declaration matching ``key``; several different ones are ambiguous."""
        found = [d for d in self.kernels if fnmatch.fnmatchcase(key, d.pattern)]
        if not found:
            return None
        distinct = {_content(d) for d in found}
        if len(distinct) > 1:
            raise ConversionError(
                f"key {key!r} is matched by kernel spec patterns "
                f"{[d.pattern for d in found]} with different declarations; make them disjoint"
            )
        return found[0]

    def kept(self, key: str) -> bool:
        """Whether ``key`` is explicitly listed to be copied unchanged."""
        return any(fnmatch.fnmatchcase(key, p) for p in self.keep)

    def dropped(self, key: str) -> bool:
        """Whether ``key`` is listed to be left out of the converted weights."""
        return any(fnmatch.fnmatchcase(key, p) for p in self.drop)

    def output_key(self, key: str) -> str:
        """Apply the ``rename`` substitutions in order (keys are bounded, see MAX_KEY_LENGTH)."""
        if len(key) > MAX_KEY_LENGTH:
            raise ConversionError(
                f"state-dict key {key[:60]!r}... is {len(key)} characters long; keys of more "
                f"than {MAX_KEY_LENGTH} are not accepted"
            )
        for pattern, replacement in self.rename:
            key = re.sub(pattern, replacement, key)
        return key


def _content(d: KernelDeclaration) -> tuple[Any, ...]:
    return (
        d.framework,
        d.version,
        d.layout,
        d.kernel_size,
        d.stride,
        d.subm,
        d.axes,
        d.role,
        d.flip,
    )

"""One-time conversion of TorchSparse, spconv and MinkowskiEngine checkpoints.

Each sparse-convolution library stores a kernel in its own layout and
enumerates the kernel taps in its own order, so the same trained weights mean
different things to each of them.  Lattice has exactly one weight layout,
``conv3d_o_xyz_i`` = ``(C_out, Kx, Ky, Kz, C_in)`` with taps flattened z
fastest (``lattice_contract.kernel``).  This module converts the kernels of an
existing state dict to that layout once, explicitly, so that nothing has to
guess a historical convention at load time.

Why a declaration file instead of guessing: a flattened ``(27, 16, 32)``
kernel carries neither its framework nor its kernel shape; an ``(8, ...)``
kernel may be ``2x2x2`` or ``8x1x1``; and a spconv ``1x1x1`` kernel is read
with a different channel order depending on the conv's stride.  Guessing
wrong silently produces a model that runs and gives wrong answers, so every
kernel key has to be declared, and anything that looks like a kernel but is
not declared is refused.

Kernel spec (``--kernel-spec SPEC.json``)::

    {
      "format": "lattice-kernel-spec",
      "version": 1,
      "kernels": {
        "stem.0.kernel":    {"framework": "torchsparse-2.1", "kernel_size": 3},
        "stage*.0.kernel":  {"framework": "torchsparse-2.1", "kernel_size": [2, 2, 2]},
        "head.weight":      {"framework": "spconv-2", "stride": 1},
        "up.*.conv.kernel": {"framework": "minkowski", "kernel_size": 2},
        "up.*.conv.bias":   {"framework": "minkowski", "role": "bias"}
      },
      "keep": ["pointnet.conv1d.weight"],
      "rename": [["\\\\.kernel$", ".weight"], ["^module\\\\.", ""]]
    }

``kernels`` maps a state-dict key or an ``fnmatch`` glob (``*``, ``?``,
``[...]``) to a declaration.  A key matched by several patterns whose
declarations differ is refused as ambiguous.  Declaration fields:

``framework`` (required)
    ``torchsparse-2.0``, ``torchsparse-2.1``, ``spconv-2``, ``spconv-1`` or
    ``minkowski``.
``kernel_size`` (int or three ints, in the source's own axis order)
    Required for the flattened layouts (TorchSparse, MinkowskiEngine) unless
    the kernel volume is 1; checked against the shape for spconv.
``stride`` (int or three ints)
    Required for a spconv 2.x ``1x1x1`` kernel: spconv runs stride-1 (and
    submanifold) ``1x1x1`` convs as a plain matmul that reads the stored
    ``(C_out, 1, 1, 1, C_in)`` buffer as ``(C_in, C_out)``; strided ones use
    the normal layout.  ``"subm": true`` marks a SubMConv3d (always a matmul).
``axes`` (default ``"xyz"``)
    Which Lattice axis each of the source's three spatial coordinate columns
    is.  Detection code often feeds spconv ``(batch, z, y, x)`` indices; such a
    model needs ``"axes": "zyx"`` so that its kernel's first axis becomes z.
``role`` (default ``"kernel"``)
    ``"bias"`` reshapes a MinkowskiEngine ``(1, C_out)`` bias to ``(C_out,)``.

``keep`` lists keys or globs copied unchanged even though they look like
kernels (3-D or 5-D floating tensors, or keys ending in ``.kernel``).
``rename`` is a list of ``[regex, replacement]`` pairs applied in order to
every output key (``re.sub``), e.g. to map TorchSparse's ``.kernel`` to
torch_lattice's ``.weight``.

Source layouts, per framework (K = kernel volume, taps in source axis order
``(a0, a1, a2)`` with sizes ``(K0, K1, K2)``):

* TorchSparse (2.0 and 2.1): ``(K, C_in, C_out)``.  Rows enumerate taps with
  the first axis fastest (``a0 + K0 * (a1 + K1 * a2)``) when K is odd and the
  last axis fastest when K is even.  Version 2.0 stores every ``1x1x1`` kernel
  as ``(C_in, C_out)`` without the K axis; 2.1 does so only for stride-1
  ``1x1x1`` convs and stores a strided ``1x1x1`` kernel as ``(1, C_in,
  C_out)``.  A 3-D ``(1, C_in, C_out)`` declared as 2.0 is refused.
* MinkowskiEngine: ``(K, C_in, C_out)``, first axis fastest at every kernel
  size; ``1x1x1`` kernels may be ``(C_in, C_out)``; biases ``(1, C_out)``.
* spconv 2.x: ``(C_out, K0, K1, K2, C_in)``, last axis fastest, except the
  ``1x1x1`` matmul case above.
* spconv 1.x: ``(K0, K1, K2, C_in, C_out)`` (RSCK).

The manifest (JSON) records, for every converted key: the source key and the
output key, the framework, the source layout, the shapes before and after,
the source and canonical kernel sizes, the axis order, the channel transform
and ``row_permutation``: entry ``r`` is the source tap row that became
canonical row ``r``.  Keys copied unchanged are listed too.

Only the weight layout is converted.  Kernel *phase* is an op choice made
when the model is rebuilt with ``torch_lattice.nn`` (see
``docs/convert-checkpoint.md``): TorchSparse's even kernels read the same
offsets as ``subm_conv3d``; MinkowskiEngine's even kernels read offsets
``0..K-1``, so its stride-1 even-kernel conv is ``target_conv3d`` onto the
input rows with padding 0.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lattice_contract.kernel import Triple, as_triple, kernel_taps
from lattice_contract.version import version_report

__all__ = [
    "FRAMEWORKS",
    "ConversionError",
    "ConversionResult",
    "KernelDeclaration",
    "KernelSpec",
    "canonical_row_permutation",
    "convert_checkpoint",
    "convert_kernel",
    "convert_state_dict",
    "load_state_dict",
    "main",
]

FRAMEWORKS: tuple[str, ...] = (
    "torchsparse-2.0",
    "torchsparse-2.1",
    "spconv-2",
    "spconv-1",
    "minkowski",
)
"""Source conventions ``convert-checkpoint`` understands."""

SPEC_FORMAT = "lattice-kernel-spec"
MANIFEST_FORMAT = "lattice-convert-manifest"
_AXIS_NAMES = "xyz"


class ConversionError(ValueError):
    """A checkpoint or kernel spec that cannot be converted unambiguously."""


@dataclass(frozen=True)
class KernelDeclaration:
    """How one (pattern of) state-dict key(s) is laid out in its source framework."""

    pattern: str
    framework: str
    kernel_size: Triple | None = None
    stride: Triple | None = None
    subm: bool = False
    axes: str = "xyz"
    role: str = "kernel"

    @classmethod
    def from_json(cls, pattern: str, data: Any) -> KernelDeclaration:
        """Validate one ``kernels`` entry; errors name the pattern."""
        where = f"kernel spec entry {pattern!r}"
        if not isinstance(data, Mapping):
            raise ConversionError(f"{where}: expected an object, got {type(data).__name__}")
        allowed = {"framework", "kernel_size", "stride", "subm", "axes", "role"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConversionError(
                f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}"
            )
        framework = data.get("framework")
        if framework not in FRAMEWORKS:
            raise ConversionError(
                f"{where}: unknown framework {framework!r}; declare one of {list(FRAMEWORKS)}"
            )
        role = data.get("role", "kernel")
        if role not in ("kernel", "bias"):
            raise ConversionError(f"{where}: role must be 'kernel' or 'bias', got {role!r}")
        axes = data.get("axes", "xyz")
        if not isinstance(axes, str) or sorted(axes) != sorted(_AXIS_NAMES):
            raise ConversionError(
                f"{where}: axes must be a permutation of 'xyz' (the Lattice axis of each "
                f"source spatial column), got {axes!r}"
            )
        subm = data.get("subm", False)
        if not isinstance(subm, bool):
            raise ConversionError(f"{where}: subm must be true or false, got {subm!r}")
        return cls(
            pattern=pattern,
            framework=framework,
            kernel_size=_positive_triple(data.get("kernel_size"), f"{where}: kernel_size"),
            stride=_positive_triple(data.get("stride"), f"{where}: stride"),
            subm=subm,
            axes=axes,
            role=role,
        )


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


@dataclass(frozen=True)
class KernelSpec:
    """The parsed ``--kernel-spec`` file."""

    kernels: tuple[KernelDeclaration, ...]
    keep: tuple[str, ...] = ()
    rename: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> KernelSpec:
        """Validate a spec object (see the module docstring for the format)."""
        if not isinstance(data, Mapping):
            raise ConversionError("kernel spec: expected a JSON object at the top level")
        if data.get("format") != SPEC_FORMAT or data.get("version") != 1:
            raise ConversionError(
                f'kernel spec: set "format": "{SPEC_FORMAT}" and "version": 1 '
                f"(got format={data.get('format')!r}, version={data.get('version')!r})"
            )
        unknown = sorted(set(data) - {"format", "version", "kernels", "keep", "rename"})
        if unknown:
            raise ConversionError(f"kernel spec: unknown top-level field(s) {unknown}")
        kernels = data.get("kernels")
        if not isinstance(kernels, Mapping) or not kernels:
            raise ConversionError('kernel spec: "kernels" must be a non-empty object')
        keep = data.get("keep", [])
        if not isinstance(keep, list) or not all(isinstance(k, str) for k in keep):
            raise ConversionError('kernel spec: "keep" must be a list of keys or globs')
        rename_raw = data.get("rename", [])
        rename: list[tuple[str, str]] = []
        if not isinstance(rename_raw, list):
            raise ConversionError('kernel spec: "rename" must be a list of [regex, replacement]')
        for item in rename_raw:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not all(isinstance(s, str) for s in item)
            ):
                raise ConversionError(
                    f"kernel spec: rename entry {item!r} must be [regex, replacement]"
                )
            try:
                re.compile(item[0])
            except re.error as exc:
                raise ConversionError(f"kernel spec: rename regex {item[0]!r}: {exc}") from None
            rename.append((item[0], item[1]))
        return cls(
            kernels=tuple(KernelDeclaration.from_json(p, d) for p, d in kernels.items()),
            keep=tuple(keep),
            rename=tuple(rename),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KernelSpec:
        """Read and validate a spec file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConversionError(f"cannot read kernel spec {str(path)!r}: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConversionError(f"kernel spec {str(path)!r} is not valid JSON: {exc}") from None
        return cls.from_json(data)

    def declaration_for(self, key: str) -> KernelDeclaration | None:
        """The one declaration matching ``key``; several different ones are ambiguous."""
        found = [d for d in self.kernels if fnmatch.fnmatchcase(key, d.pattern)]
        if not found:
            return None
        distinct = {_declaration_content(d) for d in found}
        if len(distinct) > 1:
            raise ConversionError(
                f"key {key!r} is matched by kernel spec patterns "
                f"{[d.pattern for d in found]} with different declarations; make them disjoint"
            )
        return found[0]

    def kept(self, key: str) -> bool:
        """Whether ``key`` is explicitly listed to be copied unchanged."""
        return any(fnmatch.fnmatchcase(key, p) for p in self.keep)

    def output_key(self, key: str) -> str:
        """Apply the ``rename`` substitutions in order."""
        for pattern, replacement in self.rename:
            key = re.sub(pattern, replacement, key)
        return key


def _declaration_content(d: KernelDeclaration) -> tuple[Any, ...]:
    return (d.framework, d.kernel_size, d.stride, d.subm, d.axes, d.role)


# ---------------------------------------------------------------------------
# Tap orders.


def _source_row(framework: str, tap: Triple, size: Triple) -> int:
    """Row of a source tap (source axis order) in the framework's flattened kernel."""
    a0, a1, a2 = tap
    k0, k1, k2 = size
    first_fastest = a0 + k0 * (a1 + k1 * a2)
    last_fastest = (a0 * k1 + a1) * k2 + a2
    if framework.startswith("torchsparse"):
        return first_fastest if (k0 * k1 * k2) % 2 == 1 else last_fastest
    if framework == "minkowski":
        return first_fastest
    return last_fastest  # spconv: a dense (K0, K1, K2) block, last axis fastest


def canonical_row_permutation(framework: str, kernel_size: Triple, axes: str = "xyz") -> list[int]:
    """``perm[r]`` = the source row that becomes canonical row ``r``.

    ``kernel_size`` is in the source's axis order; ``axes[j]`` names the
    Lattice axis of source spatial column ``j``.
    """
    if framework not in FRAMEWORKS:
        raise ConversionError(f"unknown framework {framework!r}; expected one of {FRAMEWORKS}")
    source_of_axis = [axes.index(name) for name in _AXIS_NAMES]  # lattice axis -> source column
    canonical_size = (
        kernel_size[source_of_axis[0]],
        kernel_size[source_of_axis[1]],
        kernel_size[source_of_axis[2]],
    )
    perm: list[int] = []
    for tap in kernel_taps(canonical_size):  # canonical row order, z fastest
        source_tap = [0, 0, 0]
        for lattice_axis, column in enumerate(source_of_axis):
            source_tap[column] = tap[lattice_axis]
        perm.append(
            _source_row(framework, (source_tap[0], source_tap[1], source_tap[2]), kernel_size)
        )
    return perm


def _canonical_size(kernel_size: Triple, axes: str) -> Triple:
    cols = [axes.index(name) for name in _AXIS_NAMES]
    return (kernel_size[cols[0]], kernel_size[cols[1]], kernel_size[cols[2]])


_LAYOUTS = {
    "torchsparse": (
        "(K, C_in, C_out); taps first-axis fastest for odd K, last-axis fastest for even K"
    ),
    "torchsparse-2d": "(C_in, C_out) (1x1x1 kernel stored without the K axis)",
    "minkowski": "(K, C_in, C_out); taps first-axis fastest",
    "minkowski-2d": "(C_in, C_out) (1x1x1 kernel stored without the K axis)",
    "spconv-2": "(C_out, K0, K1, K2, C_in); taps last-axis fastest (KRSC)",
    "spconv-2-1x1": "(C_out, 1, 1, 1, C_in) buffer read as (C_in, C_out) by spconv's 1x1 matmul",
    "spconv-1": "(K0, K1, K2, C_in, C_out); taps last-axis fastest (RSCK)",
    "bias": "(C_out,)",
    "bias-1c": "(1, C_out)",
}


def convert_kernel(
    key: str, tensor: torch.Tensor, declaration: KernelDeclaration
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Convert one declared tensor to its canonical layout; return it and its manifest record."""
    framework = declaration.framework
    shape = tuple(int(s) for s in tensor.shape)
    if not torch.is_floating_point(tensor):
        raise ConversionError(
            f"{key}: declared as a {framework} {declaration.role} but has "
            f"dtype {tensor.dtype}; only floating tensors are weights"
        )
    record: dict[str, Any] = {
        "source_key": key,
        "framework": framework,
        "role": declaration.role,
        "shape_before": list(shape),
    }
    if declaration.role == "bias":
        if len(shape) == 1:
            layout = "bias"
        elif len(shape) == 2 and shape[0] == 1:
            layout = "bias-1c"
        else:
            raise ConversionError(
                f"{key}: a bias must be (C_out,) or (1, C_out), got shape {list(shape)}"
            )
        out = tensor.reshape(-1).contiguous()
        record.update(
            source_layout=_LAYOUTS[layout],
            shape_after=list(out.shape),
            row_permutation=None,
            channel_transform="none",
        )
        return out, record

    size, layout, rows, transform = _kernel_rows(key, tensor, declaration)
    perm = canonical_row_permutation(framework, size, declaration.axes)
    csize = _canonical_size(size, declaration.axes)
    _, c_in, c_out = rows.shape
    index = torch.tensor(perm, dtype=torch.long, device=rows.device)
    out = rows.index_select(0, index).reshape(*csize, c_in, c_out).permute(4, 0, 1, 2, 3)
    out = out.contiguous()
    record.update(
        source_layout=_LAYOUTS[layout],
        shape_after=list(out.shape),
        kernel_size=list(size),
        canonical_kernel_size=list(csize),
        axes=declaration.axes,
        row_permutation=perm,
        channel_transform=transform,
    )
    return out, record


def _kernel_rows(
    key: str, tensor: torch.Tensor, d: KernelDeclaration
) -> tuple[Triple, str, torch.Tensor, str]:
    """Bring a source kernel to ``(K_rows, C_in, C_out)`` in source row order."""
    shape = tuple(int(s) for s in tensor.shape)
    fw = d.framework
    if fw.startswith("torchsparse") or fw == "minkowski":
        family = "torchsparse" if fw.startswith("torchsparse") else "minkowski"
        if len(shape) == 2:
            if d.kernel_size is not None and math.prod(d.kernel_size) != 1:
                raise ConversionError(
                    f"{key}: a 2-D {fw} kernel {list(shape)} is a 1x1x1 kernel stored as "
                    f"(C_in, C_out), but the spec declares kernel_size {list(d.kernel_size)}"
                )
            return (1, 1, 1), family + "-2d", tensor.unsqueeze(0), "none"
        if len(shape) != 3:
            raise ConversionError(
                f"{key}: a {fw} kernel must be (K, C_in, C_out) or (C_in, C_out), "
                f"got shape {list(shape)}"
            )
        if shape[0] == 1 and d.kernel_size is None:
            size: Triple = (1, 1, 1)
        elif d.kernel_size is None:
            raise ConversionError(
                f"{key}: the flattened {fw} kernel {list(shape)} does not say its kernel "
                f'shape ({shape[0]} taps); declare "kernel_size" for this key'
            )
        else:
            size = d.kernel_size
        if math.prod(size) != shape[0]:
            raise ConversionError(
                f"{key}: kernel_size {list(size)} has {math.prod(size)} taps but the {fw} "
                f"kernel has {shape[0]} rows (shape {list(shape)})"
            )
        if fw == "torchsparse-2.0" and shape[0] == 1:
            raise ConversionError(
                f"{key}: TorchSparse 2.0 stores 1x1x1 kernels as (C_in, C_out), but this "
                f"one is {list(shape)}; the checkpoint is probably TorchSparse 2.1 "
                f'(declare "framework": "torchsparse-2.1")'
            )
        return size, family, tensor, "none"
    if fw == "spconv-2":
        size = _five_d_size(key, shape, d, "spconv 2.x", "(C_out, K0, K1, K2, C_in)", 1)
        c_out, k0, k1, k2, c_in = shape
        if size == (1, 1, 1):
            if d.stride is None and not d.subm:
                raise ConversionError(
                    f"{key}: a spconv 2.x 1x1x1 kernel is read as (C_in, C_out) when the conv "
                    f"has stride 1 or is a SubMConv3d, and as (C_out, C_in) otherwise; "
                    f'declare "stride" (and "subm": true for SubMConv3d) for this key'
                )
            if d.subm or d.stride == (1, 1, 1):
                rows = tensor.reshape(1, c_in, c_out)
                return size, "spconv-2-1x1", rows, "buffer viewed as (C_in, C_out)"
        rows = tensor.reshape(c_out, k0 * k1 * k2, c_in).permute(1, 2, 0)
        return size, "spconv-2", rows, "none"
    if fw == "spconv-1":
        size = _five_d_size(key, shape, d, "spconv 1.x", "(K0, K1, K2, C_in, C_out)", 0)
        k0, k1, k2, c_in, c_out = shape
        return size, "spconv-1", tensor.reshape(k0 * k1 * k2, c_in, c_out), "none"
    raise ConversionError(f"{key}: unknown framework {fw!r}")  # pragma: no cover


def _five_d_size(
    key: str, shape: tuple[int, ...], d: KernelDeclaration, name: str, layout: str, first: int
) -> Triple:
    """Kernel size of an unflattened 5-D kernel (spatial axes from ``first``), checked."""
    if len(shape) != 5:
        raise ConversionError(f"{key}: a {name} kernel must be {layout}, got shape {list(shape)}")
    size = (shape[first], shape[first + 1], shape[first + 2])
    if d.kernel_size is not None and d.kernel_size != size:
        raise ConversionError(
            f"{key}: the spec declares kernel_size {list(d.kernel_size)} but the "
            f"{d.framework} kernel's shape says {list(size)}"
        )
    return size


# ---------------------------------------------------------------------------
# State dicts.


@dataclass(frozen=True)
class ConversionResult:
    """Converted tensors (output keys) and the manifest describing them."""

    tensors: dict[str, torch.Tensor]
    manifest: dict[str, Any]


def _looks_like_kernel(key: str, tensor: torch.Tensor) -> bool:
    if key.endswith(".kernel") or key == "kernel":
        return True
    return torch.is_floating_point(tensor) and tensor.dim() in (3, 5)


def convert_state_dict(
    state_dict: Mapping[str, torch.Tensor], spec: KernelSpec
) -> ConversionResult:
    """Convert every declared key of ``state_dict``; copy the others unchanged.

    Raises :class:`ConversionError` naming the key for an undeclared
    kernel-like tensor, a declaration matching no key, an ambiguous
    declaration, a shape that contradicts its declaration, or two keys
    renamed onto one.
    """
    tensors: dict[str, torch.Tensor] = {}
    converted: dict[str, dict[str, Any]] = {}
    copied: dict[str, str] = {}
    used_patterns: set[str] = set()
    for key, value in state_dict.items():
        if not isinstance(value, torch.Tensor):
            raise ConversionError(
                f"{key}: expected a tensor, got {type(value).__name__}; pass the state dict "
                "itself (see --state-dict-key)"
            )
        declaration = spec.declaration_for(key)
        out_key = spec.output_key(key)
        if out_key in tensors:
            raise ConversionError(
                f"{key}: renamed to {out_key!r}, which another key already produced; "
                "fix the rename rules"
            )
        if declaration is not None:
            for d in spec.kernels:
                if fnmatch.fnmatchcase(key, d.pattern):
                    used_patterns.add(d.pattern)
            out, record = convert_kernel(key, value.detach().cpu(), declaration)
            record["key"] = out_key
            tensors[out_key] = out
            converted[out_key] = record
            continue
        if _looks_like_kernel(key, value) and not spec.kept(key):
            raise ConversionError(
                f"{key}: looks like a sparse-conv kernel (shape {list(value.shape)}) but the "
                'kernel spec does not declare it; add it to "kernels" with its framework and '
                'kernel_size, or to "keep" if it is not a sparse kernel'
            )
        tensors[out_key] = value.detach().cpu().clone().contiguous()
        copied[out_key] = key
    unused = [d.pattern for d in spec.kernels if d.pattern not in used_patterns]
    if unused:
        raise ConversionError(
            f"kernel spec pattern(s) {unused} match no key of the checkpoint; "
            "fix or remove them (a stale spec would silently skip a conversion)"
        )
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": 1,
        "target_layout": "conv3d_o_xyz_i (C_out, Kx, Ky, Kz, C_in), taps z fastest",
        "converted": converted,
        "copied": copied,
    }
    return ConversionResult(tensors, manifest)


def load_state_dict(
    path: str | os.PathLike[str], state_dict_key: str | None = None
) -> dict[str, torch.Tensor]:
    """Read a ``.safetensors`` file or a torch ``.pt``/``.pth`` (``weights_only``)."""
    p = Path(path)
    if not p.is_file():
        raise ConversionError(f"checkpoint {str(p)!r} does not exist or is not a file")
    if p.suffix == ".safetensors":
        from safetensors.torch import load_file

        if state_dict_key is not None:
            raise ConversionError("--state-dict-key applies to torch checkpoints, not safetensors")
        try:
            return dict(load_file(str(p), device="cpu"))
        except Exception as exc:  # safetensors raises its own error type
            raise ConversionError(f"cannot read safetensors {str(p)!r}: {exc}") from None
    try:
        obj = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as exc:  # unpickling errors come in many types
        raise ConversionError(
            f"cannot read {str(p)!r} as a torch checkpoint with weights_only=True: {exc}"
        ) from None
    if state_dict_key is not None:
        for part in state_dict_key.split("."):
            if not isinstance(obj, Mapping) or part not in obj:
                raise ConversionError(f"{str(p)!r} has no entry {state_dict_key!r}")
            obj = obj[part]
    if not isinstance(obj, Mapping):
        raise ConversionError(f"{str(p)!r} does not hold a state dict (got {type(obj).__name__})")
    nested = [k for k, v in obj.items() if isinstance(v, Mapping)]
    if nested and state_dict_key is None:
        raise ConversionError(
            f"{str(p)!r} holds nested dictionaries {sorted(nested)}; choose the state dict "
            "with --state-dict-key (e.g. --state-dict-key state_dict)"
        )
    return dict(obj)


def _atomic_write(path: Path, write: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def default_manifest_path(dst: str | os.PathLike[str]) -> Path:
    """``weights.safetensors`` -> ``weights.manifest.json`` beside it."""
    return Path(dst).with_suffix(".manifest.json")


def convert_checkpoint(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    spec: KernelSpec | str | os.PathLike[str],
    *,
    manifest_path: str | os.PathLike[str] | None = None,
    state_dict_key: str | None = None,
) -> dict[str, Any]:
    """Convert ``src`` into the safetensors file ``dst`` and write the manifest.

    Everything is checked before either file is written; each file is written
    to a temporary name and moved into place.
    """
    from safetensors.torch import save_file

    kernel_spec = spec if isinstance(spec, KernelSpec) else KernelSpec.load(spec)
    dst_path = Path(dst)
    if dst_path.suffix != ".safetensors":
        raise ConversionError(f"destination {str(dst_path)!r} must end in .safetensors")
    state = load_state_dict(src, state_dict_key)
    result = convert_state_dict(state, kernel_spec)
    manifest = dict(result.manifest)
    manifest["source"] = str(Path(src))
    manifest["destination"] = str(dst_path)
    mpath = Path(manifest_path) if manifest_path is not None else default_manifest_path(dst_path)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    _atomic_write(dst_path, lambda tmp: save_file(result.tensors, tmp))
    _atomic_write(mpath, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point ``convert-checkpoint``."""
    parser = argparse.ArgumentParser(
        prog="convert-checkpoint",
        description="Convert TorchSparse / spconv / MinkowskiEngine kernels to Lattice's "
        "canonical (C_out, Kx, Ky, Kz, C_in) layout.",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps --version's lines
    )
    parser.add_argument(
        "--version",
        action="version",
        version=version_report("convert-checkpoint", ("lattice_contract", "torch_lattice")),
    )
    parser.add_argument("src", help="source checkpoint (.pt/.pth state dict or .safetensors)")
    parser.add_argument("dst", help="destination .safetensors file")
    parser.add_argument("--kernel-spec", required=True, help="JSON declaring each kernel key")
    parser.add_argument("--manifest", help="manifest path (default: DST with .manifest.json)")
    parser.add_argument(
        "--state-dict-key", help="dotted path of the state dict inside a torch checkpoint"
    )
    args = parser.parse_args(argv)
    try:
        manifest = convert_checkpoint(
            args.src,
            args.dst,
            args.kernel_spec,
            manifest_path=args.manifest,
            state_dict_key=args.state_dict_key,
        )
    except ConversionError as exc:
        print(f"convert-checkpoint: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"convert-checkpoint: {len(manifest['converted'])} kernel(s) converted, "
        f"{len(manifest['copied'])} tensor(s) copied -> {args.dst}"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

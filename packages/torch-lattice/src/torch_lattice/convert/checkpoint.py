"""Converting a whole checkpoint: state dicts in, canonical weights and a manifest out.

Every key that looks like a sparse-conv kernel must be declared in the kernel
spec (:mod:`torch_lattice.convert.spec`); each declared kernel is rewritten
into Lattice's layout (:mod:`torch_lattice.convert.layouts`); keys listed in
``drop`` are left out (``num_batches_tracked`` and the like); everything else
is copied unchanged.  The manifest records, per key, where it came from and
exactly what was done to it, so a conversion can be audited afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lattice_contract.artifact import (
    EXIT_OK,
    EXIT_USAGE,
    Companion,
    OutputClashError,
    WriterLockedError,
    atomic_write_file,
    check_outputs,
    run_command,
    version_report,
)

from .layouts import convert_kernel
from .spec import ConversionError, KernelSpec

log = logging.getLogger(__name__)

__all__ = [
    "ConversionResult",
    "convert_checkpoint",
    "convert_state_dict",
    "load_state_dict",
    "main",
]

MANIFEST_FORMAT = "lattice-convert-manifest"


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


def _check_tensor(key: str, value: torch.Tensor) -> None:
    """Refuse tensors safetensors cannot hold, and tensors larger than their own storage.

    A ``.pt`` file stores each storage once and each tensor as a view of it;
    a view with stride 0 (or overlapping strides) can claim 805 million
    floats over 4 bytes of storage, which converting would expand into
    gigabytes.  The claim is checked against the storage before anything is
    copied, so the output is never larger than what the file holds.
    """
    if value.layout != torch.strided:
        raise ConversionError(
            f"{key}: a {str(value.layout).removeprefix('torch.')} tensor; convert-checkpoint "
            "reads dense tensors only (call .to_dense() on it before saving)"
        )
    if value.is_quantized:
        raise ConversionError(
            f"{key}: a quantized {str(value.dtype).removeprefix('torch.')} tensor; dequantize "
            "it (.dequantize()) before saving; Lattice packs weights at export"
        )
    if value.is_meta:
        raise ConversionError(
            f"{key}: a meta-device tensor holds no values; save the checkpoint from a model "
            "whose weights are materialised"
        )
    claimed = value.numel() * value.element_size()
    if value.numel() > 1:
        storage = value.untyped_storage().nbytes()
        offset = value.storage_offset() * value.element_size()
        if claimed > storage - offset:
            raise ConversionError(
                f"{key}: shape {list(value.shape)} claims {claimed:,} bytes but its storage "
                f"holds {storage:,} (strides {list(value.stride())} alias the same values); "
                "save the tensor itself (.clone()) instead of an expanded view"
            )


def convert_state_dict(
    state_dict: Mapping[str, torch.Tensor], spec: KernelSpec
) -> ConversionResult:
    """Convert every declared key of ``state_dict``; copy the others unchanged.

    Keys matching ``spec.drop`` are left out (and listed in the manifest).
    Raises :class:`ConversionError` naming the key for an undeclared
    kernel-like tensor, a declaration matching no key, an ambiguous
    declaration, a shape that contradicts its declaration, or two keys
    renamed onto one.
    """
    tensors: dict[str, torch.Tensor] = {}
    converted: dict[str, dict[str, Any]] = {}
    copied: dict[str, str] = {}
    dropped: list[str] = []
    used_patterns: set[str] = set()
    for key, value in state_dict.items():
        if spec.dropped(key):
            if spec.declaration_for(key) is not None:
                raise ConversionError(
                    f'{key}: listed in both "kernels" and "drop"; keep one of them'
                )
            dropped.append(key)
            continue
        if not isinstance(value, torch.Tensor):
            raise ConversionError(
                f"{key}: expected a tensor, got {type(value).__name__}; pass the state dict "
                "itself (see --state-dict-key)"
            )
        _check_tensor(key, value)
        declaration = spec.declaration_for(key)
        out_key = spec.output_key(key)
        if out_key == "__metadata__":
            raise ConversionError(
                f"{key}: the output key '__metadata__' is the safetensors header's own entry, "
                'so no reader could load the file; rename the key ("rename" in the spec)'
            )
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
        "version": 2,
        "target_layout": "conv3d_o_xyz_i (C_out, Kx, Ky, Kz, C_in), taps z fastest",
        "converted": converted,
        "copied": copied,
        "dropped": dropped,
        "unused_drop_patterns": [
            p for p in spec.drop if not any(fnmatch.fnmatchcase(k, p) for k in dropped)
        ],
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

    Everything is checked before anything is written.  The manifest is the
    destination's companion (:mod:`lattice_contract.artifact.atomic`): it records the
    destination's SHA-256 as ``destination_sha256`` and is staged before the
    destination is swapped, so a writer killed at any point leaves a manifest
    that describes the weights beside it (or the previous pair).
    """
    from torch_lattice.artifact import TORCH_BACKEND

    dst_path = Path(dst)
    if dst_path.suffix != ".safetensors":
        raise ConversionError(f"destination {str(dst_path)!r} must end in .safetensors")
    mpath = Path(manifest_path) if manifest_path is not None else default_manifest_path(dst_path)
    if mpath.resolve() == dst_path.resolve():
        raise ConversionError(
            f"the manifest {str(mpath)!r} would overwrite the destination; write it beside "
            "DST (the default, DST with .manifest.json)"
        )
    # What the command reads is never an output: checked before the (slow) conversion
    # and again by the atomic writer under its lock.
    inputs = [Path(src)] + ([] if isinstance(spec, KernelSpec) else [Path(spec)])
    try:
        check_outputs([dst_path, mpath], inputs)
    except OutputClashError as exc:
        raise ConversionError(str(exc)) from None
    kernel_spec = spec if isinstance(spec, KernelSpec) else KernelSpec.load(spec)
    state = load_state_dict(src, state_dict_key)
    result = convert_state_dict(state, kernel_spec)
    manifest = dict(result.manifest)
    manifest["source"] = str(Path(src))
    manifest["destination"] = str(dst_path)

    def render(destination_sha256: str) -> str:
        # The manifest names the bytes it describes, so a reader can check the pair.
        manifest["destination_sha256"] = destination_sha256
        return json.dumps(manifest, indent=2, sort_keys=True) + "\n"

    created = _make_parents(dst_path, mpath)
    try:
        atomic_write_file(
            dst_path,
            lambda tmp: TORCH_BACKEND.write_weights(tmp, result.tensors, None),
            companion=Companion(mpath, render),
            inputs=inputs,
        )
    except BaseException:
        for directory in reversed(created):  # a failed write leaves no empty folders either
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    return manifest


def _make_parents(*paths: Path) -> list[Path]:
    """Create the missing parent folders of ``paths``; return those created, outermost first.

    A conversion that fails (a full disk) removes them again, so the user
    finds the tree as it was before the command.
    """
    created: list[Path] = []
    for path in paths:
        missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
        for directory in reversed(missing):
            try:
                directory.mkdir()
            except FileExistsError:
                continue
            created.append(directory)
    return created


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point ``convert-checkpoint``.

    Exit status 0 on success, 2 when the input cannot be converted (the
    project's convention: 1 is a failed check, which converting has none of);
    ``-q/--quiet`` keeps only errors, ``-v/--verbose`` adds detail.
    """
    return run_command(_main, argv, "convert-checkpoint")


def _main(argv: list[str]) -> int:
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
    except (ConversionError, WriterLockedError, OutputClashError) as exc:
        log.error("convert-checkpoint: error: %s", exc)
        return EXIT_USAGE
    except OSError as exc:  # a full disk, a read-only destination
        log.error(
            "convert-checkpoint: error: cannot write %r: %s; nothing was changed",
            str(args.dst),
            exc.strerror or exc,
        )
        return EXIT_USAGE
    log.info(
        "convert-checkpoint: %d kernel(s) converted, %d tensor(s) copied, %d dropped -> %s",
        len(manifest["converted"]),
        len(manifest["copied"]),
        len(manifest["dropped"]),
        args.dst,
    )
    return EXIT_OK

"""MinkowskiEngine model trees rebuilt as ``torch_lattice.nn`` models.

MinkowskiEngine (0.5) computes each layer from its coordinate manager: a
stride-1 conv keeps its input rows, a strided conv keeps ``floor(c / s)``, a
transposed conv goes back onto the coordinates the manager holds at the finer
stride (the input of the strided conv that made them), and a generative
transposed conv creates every ``c + off(k)``.  :func:`from_minkowski` picks the
Lattice module of ``docs/convert-checkpoint.md``'s ``me-*`` recipe for each
layer, converts its kernel, and rebuilds the two things that live in
``forward`` code: the residual add of ME's ``BasicBlock``
(``MinkowskiEngine.modules.resnet_block``) and the transposed conv's finer
rows (the first tensor the call saw at that stride, as the coordinate manager
keys them).  Modules are matched by type (see ``torch_lattice._port_walk``);
``MinkowskiUnion`` and ``ME.cat`` live in user ``forward`` code and are not
ported by themselves (write the model with ``torch_lattice.cat`` /
``ops.sparse_binary``, or declare a block whose forward is known).
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch

from torch_lattice import nn, ops
from torch_lattice._port_containers import FineTarget, PortedSequential
from torch_lattice._port_walk import (
    Context,
    Ported,
    PortError,
    Registry,
    Walk,
    framework_types,
    run,
    source_children,
)
from torch_lattice.convert.layouts import convert_kernel
from torch_lattice.convert.spec import ConversionError, KernelDeclaration
from torch_lattice.sparse import SparseTensor

__all__ = ["from_minkowski"]

Triple = tuple[int, int, int]

_SUPPORTED = (
    "nn.Sequential trees of MinkowskiConvolution, MinkowskiConvolutionTranspose, "
    "MinkowskiGenerativeConvolutionTranspose, MinkowskiBatchNorm, MinkowskiReLU, torch "
    "BatchNorm1d / ReLU / LeakyReLU, BasicBlock (residual add) and MinkUNet (examples/minkunet.py)"
)
_SHAREABLE = frozenset({"MinkowskiReLU", "ReLU", "LeakyReLU", "Identity", "Dropout"})
_MINKOWSKI_EXTRA = {"MinkowskiEngine.modules.resnet_block.BasicBlock": "BasicBlock"}


def from_minkowski(module: torch.nn.Module, *, types: Registry | None = None) -> torch.nn.Module:
    """Rebuild a MinkowskiEngine model as torch_lattice modules with converted weights.

    The ported model takes and returns ``torch_lattice.SparseTensor`` values
    with ``(batch, x, y, z)`` rows at ME's tensor strides and keeps the
    source's parameter names (``block1.0.conv1.kernel`` becomes
    ``block1.0.conv1.weight``; a ``MinkowskiBatchNorm``'s ``bn.*`` stay).
    ``types`` declares classes (class -> kind) the port should treat as ME's.
    """
    kinds = framework_types("minkowski", types)
    for dotted, kind in _MINKOWSKI_EXTRA.items():
        module_name, _, name = dotted.rpartition(".")
        try:
            cls = getattr(__import__(module_name, fromlist=[name]), name)
        except Exception:
            continue
        kinds.setdefault(cls, kind)
    return _MinkowskiPort(Walk("MinkowskiEngine", kinds, _SHAREABLE)).port(module, "")


def _triple(value: Any) -> Triple:
    if isinstance(value, int):
        return (value, value, value)
    t = tuple(int(v) for v in value)
    if len(t) == 1:
        return (t[0], t[0], t[0])
    if len(t) != 3:
        raise PortError(f"expected three spatial sizes, got {value!r} (only 3-D ports)")
    return (t[0], t[1], t[2])


def _geometry(module: torch.nn.Module, where: str) -> tuple[Triple, Triple, Triple]:
    """Kernel size, stride and dilation of an ME conv (its ``kernel_generator``)."""
    gen = getattr(module, "kernel_generator", None)
    if gen is None:
        raise PortError(f"{where}: an ME convolution without kernel_generator")
    if int(getattr(module, "dimension", 3)) != 3:
        raise PortError(f"{where}: only 3-D MinkowskiEngine convolutions port")
    return (
        _triple(gen.kernel_size),
        _triple(gen.kernel_stride),
        _triple(gen.kernel_dilation),
    )


class _ResidualBlock(Ported):
    """ME's ``BasicBlock``: ``relu(norm2(conv2(relu(norm1(conv1(x))))) + downsample(x))``."""

    def __init__(self, parts: dict[str, torch.nn.Module]) -> None:
        super().__init__()
        for name, part in parts.items():
            self.add_module(name, part)
        self.relu = nn.ReLU()

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        m = self._modules
        out = self.relu(run(m["norm1"], run(m["conv1"], x, ctx), ctx))  # type: ignore[arg-type]
        out = run(m["norm2"], run(m["conv2"], out, ctx), ctx)  # type: ignore[arg-type]
        down = m.get("downsample")
        residual = x if down is None else run(down, x, ctx)
        result: SparseTensor = self.relu(ops.sparse_binary(out, residual, op="add"))
        return result


class _MinkUNet(torch.nn.Module):
    """ME's ``MinkUNet`` (``examples/minkunet.py``): its ``forward``, with the source's names.

    Stem, four ``conv -> bn -> relu -> block`` encoder stages, four
    ``convtr -> bntr -> relu -> ME.cat(up, skip) -> block`` decoder stages (the
    transposed conv returns onto the rows the encoder held at that stride, so
    the concatenation pairs rows one to one), then ``final``.
    """

    def __init__(self, parts: dict[str, torch.nn.Module], where: str) -> None:
        super().__init__()
        for name, part in parts.items():
            self.add_module(name, part)
        self.relu = nn.ReLU()

        def find(prefix: str) -> str:
            hits = [n for n in parts if n.startswith(prefix) and n.endswith("s2")]
            if len(hits) != 1:
                raise PortError(f"{where}: a MinkUNet without exactly one {prefix}*s2 layer")
            return hits[0]

        self.down = [(find(f"conv{i}p"), f"bn{i}", f"block{i}") for i in range(1, 5)]
        self.up = [(find(f"convtr{j}p"), f"bntr{j}", f"block{j + 1}") for j in range(4, 8)]
        needed = {"conv0p1s1", "bn0", "final"} | {n for t in self.down + self.up for n in t}
        missing = needed - set(parts)
        extra = set(parts) - needed
        if missing or extra:
            raise PortError(
                f"{where}: a MinkUNet with {sorted(missing)} missing and {sorted(extra)} extra "
                "children is not ME's MinkUNet; its forward cannot be known"
            )

    def _step(self, name: str, x: SparseTensor, ctx: Context) -> SparseTensor:
        out = run(self._modules[name], x, ctx)  # type: ignore[arg-type]
        ctx.setdefault(("stride", out.stride), out)
        return out

    def forward(self, x: SparseTensor) -> SparseTensor:
        ctx: Context = {("stride", x.stride): x}
        out = self.relu(self._step("bn0", self._step("conv0p1s1", x, ctx), ctx))
        skips = [out]
        for conv, bn, block in self.down:
            out = self.relu(self._step(bn, self._step(conv, out, ctx), ctx))
            out = self._step(block, out, ctx)
            skips.append(out)
        skips.pop()  # the bottom has no skip
        for conv, bn, block in self.up:
            out = self.relu(self._step(bn, self._step(conv, out, ctx), ctx))
            out = ops.sparse_cat(out, skips.pop(), join="inner")
            out = self._step(block, out, ctx)
        result: SparseTensor = self._step("final", out, ctx)
        return result


class _MinkowskiPort:
    def __init__(self, walk: Walk) -> None:
        self.walk = walk

    def port(self, module: torch.nn.Module, path: str) -> torch.nn.Module:
        where = path or "<root>"
        kind = self.walk.kind(module, where)
        again = self.walk.shared(module, where, kind)
        if again is not None:
            return again
        if kind is None:
            raise self.walk.unknown(module, where, _SUPPORTED)
        ported = self._port(module, kind, path, where)
        self.walk.remember(module, where, ported)
        return ported

    def _port(self, module: torch.nn.Module, kind: str, path: str, where: str) -> torch.nn.Module:
        if kind == "Sequential":
            return PortedSequential(
                {n: self.port(c, p) for n, p, c in source_children(module, path)}
            )
        if kind == "BasicBlock":
            parts = {n: self.port(c, p) for n, p, c in source_children(module, path)}
            missing = {"conv1", "norm1", "conv2", "norm2"} - set(parts)
            if missing:
                raise PortError(f"{where}: BasicBlock without {', '.join(sorted(missing))}")
            parts.pop("relu", None)
            return _ResidualBlock(parts)
        if kind == "MinkUNet":
            parts = {n: self.port(c, p) for n, p, c in source_children(module, path)}
            parts.pop("relu", None)
            return _MinkUNet(parts, where)
        if kind == "MinkowskiBatchNorm":
            bn = getattr(module, "bn", None)
            if not isinstance(bn, torch.nn.BatchNorm1d):
                raise PortError(f"{where}: MinkowskiBatchNorm without its bn (BatchNorm1d)")
            norm: torch.nn.BatchNorm1d = bn
            self.walk.kind(norm, f"{path}.bn")  # hooks on the inner norm are refused too
            return PortedSequential({"bn": _batch_norm(norm, f"{path}.bn")})
        if kind == "BatchNorm1d":
            return _batch_norm(cast(torch.nn.BatchNorm1d, module), where)
        if kind in ("MinkowskiReLU", "ReLU"):
            return nn.ReLU()
        if kind == "LeakyReLU":
            return nn.LeakyReLU(float(module.negative_slope))  # type: ignore[arg-type]
        if kind in ("Identity", "Dropout"):
            return nn.Identity()
        if kind.startswith("MinkowskiConvolution") or kind.startswith("MinkowskiGenerative"):
            return self._conv(module, kind, where)
        raise self.walk.unknown(module, where, _SUPPORTED)

    def _conv(self, module: torch.nn.Module, kind: str, where: str) -> torch.nn.Module:
        k, s, d = _geometry(module, where)
        c_in, c_out = int(module.in_channels), int(module.out_channels)  # type: ignore[arg-type]
        bias = getattr(module, "bias", None) is not None
        strided = math.prod(s) != 1
        conv: torch.nn.Module
        if kind == "MinkowskiGenerativeConvolutionTranspose":
            if any(v % 2 for v in k) or d != (1, 1, 1):
                raise PortError(
                    f"{where}: generative transposed convs port with even kernels and dilation "
                    "1 (the me-generative recipe); an odd one would create rows off the finer "
                    "grid's phase, which has not been checked against ME"
                )
            conv = nn.GenerativeConvTranspose3d(c_in, c_out, k, stride=s, bias=bias)
            return self._load(conv, module, where, k, s)
        if kind == "MinkowskiConvolutionTranspose":
            if not strided:
                raise PortError(f"{where}: a stride-1 MinkowskiConvolutionTranspose does not port")
            if d != (1, 1, 1):
                raise PortError(f"{where}: dilated transposed convs are not ported")
            pad = tuple(kk // 2 if kk % 2 else 0 for kk in k)
            conv = nn.TargetConvTranspose3d(c_in, c_out, k, stride=s, padding=pad, bias=bias)
            loaded = self._load(conv, module, where, k, s)
            return FineTarget(loaded, ("fine", s), where)
        if strided:
            conv = nn.Conv3d(c_in, c_out, k, stride=s, dilation=d, bias=bias)
        elif all(kk % 2 for kk in k):
            conv = nn.SubmConv3d(c_in, c_out, k, dilation=d, bias=bias)
        else:
            conv = nn.Conv3d(c_in, c_out, k, dilation=d, bias=bias)
        return self._load(conv, module, where, k, s)

    def _load(
        self, conv: torch.nn.Module, module: torch.nn.Module, where: str, k: Triple, s: Triple
    ) -> torch.nn.Module:
        declaration = KernelDeclaration(
            pattern=where, framework="minkowski", kernel_size=k, stride=s
        )
        try:
            source: torch.Tensor = getattr(module, "kernel")  # noqa: B009 - untyped framework
            kernel, _ = convert_kernel(where, source.detach(), declaration)
        except ConversionError as exc:
            raise PortError(str(exc)) from None
        source_bias = getattr(module, "bias", None)
        bias = None if source_bias is None else source_bias.detach().reshape(-1)  # ME: (1, C)
        with torch.no_grad():
            for name, value in (("weight", kernel), ("bias", bias)):
                if value is not None:
                    target: torch.Tensor = getattr(conv, name)
                    target.copy_(value)
        return conv


def _batch_norm(module: torch.nn.BatchNorm1d, where: str) -> torch.nn.Module:
    if not module.track_running_stats or not module.affine:
        raise PortError(f"{where}: only affine BatchNorm with running statistics ports")
    ported = nn.BatchNorm(
        module.num_features,
        eps=module.eps,
        momentum=0.1 if module.momentum is None else module.momentum,
    )
    with torch.no_grad():
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(ported, name).copy_(getattr(module, name).detach())
    return ported

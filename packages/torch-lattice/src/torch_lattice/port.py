"""Model definitions from spconv and TorchSparse, rebuilt as ``torch_lattice.nn`` models.

Converting a checkpoint fixes the weight layout; porting a model also has to
pick, for each layer, the Lattice module that computes what the layer
computed (``docs/convert-checkpoint.md`` has the table), rebuild the residual
adds, concatenations and inverse convolutions that the framework hides in its
``forward`` code or its coordinate caches, and copy every weight through the
converter.  :func:`from_spconv` and :func:`from_torchsparse` do that for the
module trees these frameworks' users build, matched by class name so that
neither framework has to be installed to port a model:

* spconv: ``SparseSequential`` (and ``torch.nn.Sequential``) of
  ``SubMConv3d``, ``SparseConv3d``, ``SparseConvTranspose3d``,
  ``SparseInverseConv3d`` (paired with its forward conv by ``indice_key``),
  ``SparseMaxPool3d``, ``BatchNorm1d``, ``ReLU``/``LeakyReLU``/``Identity``;
  and OpenPCDet-style backbones (``VoxelBackBone8x`` and kin: the
  ``conv_input``, ``conv1`` .. ``conv4``, ``conv_out`` chain).
* TorchSparse: ``nn.Sequential`` trees of ``spnn.Conv3d`` (plain, strided
  with ``stride == kernel_size``, ``transposed=True``), ``spnn.BatchNorm``,
  ``spnn.ReLU``/``LeakyReLU``, the backbone blocks ``SparseConvBlock``,
  ``SparseConvTransposeBlock`` and ``SparseResBlock`` (residual add), and
  ``SparseResUNet`` / ``SparseResUNet42`` (skip concatenations).

Anything else is refused with a :class:`PortError` naming the module's path,
rather than ported into something that runs and computes another function.
The ported model takes and returns ``torch_lattice.SparseTensor`` values in
Lattice's ``(batch, x, y, z)`` physical coordinates; it exports with
``save_lattice_model_artifact`` like any torch_lattice model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from torch_lattice import nn, ops
from torch_lattice.convert.layouts import convert_kernel
from torch_lattice.convert.spec import ConversionError, KernelDeclaration
from torch_lattice.sparse import SparseTensor

__all__ = ["PortError", "PortedSequential", "from_spconv", "from_torchsparse"]

Triple = tuple[int, int, int]
Context = dict[Any, SparseTensor]
"""Per-call memory of a ported model: inputs of keyed convs and tensors by stride."""


class PortError(ValueError):
    """A module the port cannot rebuild faithfully; the message names its path."""


def _triple(value: Any) -> Triple:
    if isinstance(value, int):
        return (value, value, value)
    t = tuple(int(v) for v in value)
    if len(t) == 1:
        return (t[0], t[0], t[0])
    if len(t) != 3:
        raise PortError(f"expected three spatial sizes, got {value!r}")
    return (t[0], t[1], t[2])


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _attr(module: torch.nn.Module, name: str, default: Any = None) -> Any:
    """A framework layer's attribute, untyped (the layer classes are not imported)."""
    return getattr(module, name, default)


def _per_axis(t: Triple, f: Callable[[int], int]) -> Triple:
    return (f(t[0]), f(t[1]), f(t[2]))


def _reorder(t: Triple, axes: str) -> Triple:
    """A source-axis-order triple in Lattice's x, y, z order."""
    return (t[axes.index("x")], t[axes.index("y")], t[axes.index("z")])


# ---------------------------------------------------------------------------
# Ported containers: they thread a context through their children.


class _Ported(torch.nn.Module):
    """A module whose forward also sees the call's :data:`Context`."""

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        raise NotImplementedError

    def forward(self, x: SparseTensor) -> SparseTensor:
        return self.call(x, {})


def _run(module: torch.nn.Module, x: SparseTensor, ctx: Context) -> SparseTensor:
    if isinstance(module, _Ported):
        return module.call(x, ctx)
    out: SparseTensor = module(x)
    return out


class PortedSequential(_Ported):
    """Children applied in order; ``0.weight``-style names like ``torch.nn.Sequential``."""

    def __init__(self, *children: torch.nn.Module) -> None:
        super().__init__()
        for i, child in enumerate(children):
            self.add_module(str(i), child)

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        ctx.setdefault(("stride", x.stride), x)
        for child in self.children():
            x = _run(child, x, ctx)
            ctx.setdefault(("stride", x.stride), x)
        return x


class _Keyed(_Ported):
    """A strided spconv conv whose input a later inverse conv goes back to."""

    def __init__(self, conv: torch.nn.Module, key: str) -> None:
        super().__init__()
        self.conv = conv
        self.key = key

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        ctx[("key", self.key)] = x
        return _run(self.conv, x, ctx)


class _OntoTarget(_Ported):
    """A target op whose target comes from the context (a keyed input or a stride)."""

    def __init__(self, conv: torch.nn.Module, target: tuple[str, Any], path: str) -> None:
        super().__init__()
        self.conv = conv
        self.target = target
        self.path = path

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        target = ctx.get(self.target)
        if target is None:
            kind, value = self.target
            what = f"indice_key {value!r}" if kind == "key" else f"a tensor at stride {value}"
            raise PortError(
                f"{self.path}: needs the rows of {what}, which no earlier layer of this "
                "call produced; call the ported model from its input, not a sub-module"
            )
        out: SparseTensor = self.conv(x, target)
        return out


class _FullOntoInput(_Ported):
    """TorchSparse 2.1 mixed-parity stride-1 conv: a full conv read back onto the input."""

    def __init__(self, conv: torch.nn.Module) -> None:
        super().__init__()
        self.conv = conv

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        return ops.sparse_reindex(self.conv(x), x)


class _ResBlock(_Ported):
    """TorchSparse's ``SparseResBlock``: ``relu(main(x) + shortcut(x))``."""

    def __init__(self, main: torch.nn.Module, shortcut: torch.nn.Module, relu: torch.nn.Module):
        super().__init__()
        self.main = main
        self.shortcut = shortcut
        self.relu = relu

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        total = ops.sparse_binary(_run(self.main, x, ctx), _run(self.shortcut, x, ctx), op="add")
        return _run(self.relu, total, ctx)


class _ResUNet(torch.nn.Module):
    """TorchSparse's ``SparseResUNet``: stem, encoders, decoders with skip concatenations.

    Returns every level's output, outermost first, as TorchSparse does.
    """

    def __init__(
        self, stem: torch.nn.Module, encoders: torch.nn.ModuleList, decoders: torch.nn.ModuleList
    ) -> None:
        super().__init__()
        self.stem = stem
        self.encoders = encoders
        self.decoders = decoders

    def _level(self, x: SparseTensor, depth: int, ctx: Context) -> list[SparseTensor]:
        if depth == len(self.encoders):
            return [x]
        outputs = self._level(_run(self.encoders[depth], x, ctx), depth + 1, ctx)
        decoder = self.decoders[len(self.decoders) - 1 - depth]
        assert isinstance(decoder, torch.nn.ModuleDict)
        up = _run(decoder["upsample"], outputs[-1], ctx)
        fused = _run(decoder["fuse"], ops.sparse_cat(up, x, join="left"), ctx)
        return [x, *outputs, fused]

    def forward(self, x: SparseTensor) -> tuple[SparseTensor, ...]:
        ctx: Context = {}
        stem = _run(self.stem, x, ctx)
        return tuple(self._level(stem, 0, ctx))


# ---------------------------------------------------------------------------
# Leaf layers shared by both frameworks.


def _copy_state(target: torch.nn.Module, **tensors: torch.Tensor | None) -> torch.nn.Module:
    with torch.no_grad():
        for name, value in tensors.items():
            if value is not None:
                getattr(target, name).copy_(value.detach())
    return target


def _batch_norm(module: torch.nn.Module, path: str) -> torch.nn.Module:
    if not _attr(module, "track_running_stats", True) or not _attr(module, "affine", True):
        raise PortError(f"{path}: only affine BatchNorm with running statistics ports")
    momentum = _attr(module, "momentum")
    ported = nn.BatchNorm(
        int(_attr(module, "num_features")),
        eps=float(_attr(module, "eps")),
        momentum=0.1 if momentum is None else float(momentum),
    )
    return _copy_state(
        ported,
        weight=_attr(module, "weight"),
        bias=_attr(module, "bias"),
        running_mean=_attr(module, "running_mean"),
        running_var=_attr(module, "running_var"),
    )


def _activation(module: torch.nn.Module) -> torch.nn.Module | None:
    name = type(module).__name__
    if name == "ReLU":
        return nn.ReLU()
    if name == "LeakyReLU":
        return nn.LeakyReLU(float(_attr(module, "negative_slope")))
    if name in ("Identity", "Dropout"):
        return nn.Identity()
    return None


def _loaded(
    conv: torch.nn.Module, source: torch.nn.Module, where: str, weight: str, **declared: Any
) -> torch.nn.Module:
    """``conv`` with ``source``'s kernel converted (``declared``: the kernel declaration)."""
    declaration = KernelDeclaration(
        pattern=where, kernel_size=_triple(_attr(source, "kernel_size")), **declared
    )
    try:
        kernel, _ = convert_kernel(where, _attr(source, weight).detach(), declaration)
    except ConversionError as exc:
        raise PortError(str(exc)) from None
    return _copy_state(conv, weight=kernel, bias=_attr(source, "bias"))


def _children(module: torch.nn.Module, path: str) -> Iterator[tuple[str, torch.nn.Module]]:
    for name, child in module.named_children():
        yield _join(path, name), child


# ---------------------------------------------------------------------------
# spconv.


def from_spconv(
    module: torch.nn.Module, *, version: str = "2.2", axes: str = "xyz"
) -> torch.nn.Module:
    """Rebuild a spconv model as torch_lattice modules with converted weights.

    ``version`` is the spconv release whose layout the module's weights are in
    (``"2.2"`` for a module of any current spconv; a model whose parameters
    were loaded from an older checkpoint without conversion keeps that
    release's layout).  ``axes`` says which Lattice axis each of spconv's
    index columns is: OpenPCDet feeds ``(batch, z, y, x)`` indices, so its
    backbones port with ``axes="zyx"`` and the ported model takes ``(batch,
    x, y, z)`` coordinates.
    """
    if sorted(axes) != ["x", "y", "z"]:
        raise PortError(f"axes must be a permutation of 'xyz', got {axes!r}")
    return _SpconvPort(version, axes).port(module, "")


class _SpconvPort:
    def __init__(self, version: str, axes: str) -> None:
        self.version = version
        self.axes = axes
        self.keys: dict[str, dict[str, Any]] = {}

    def port(self, module: torch.nn.Module, path: str) -> torch.nn.Module:
        name = type(module).__name__
        where = path or "<root>"
        if name in ("SparseSequential", "Sequential"):
            ported = [self.port(child, p) for p, child in _children(module, path)]
            return PortedSequential(*[m for m in ported if m is not None])
        if all(hasattr(module, a) for a in ("conv_input", "conv1", "conv2", "conv3", "conv4")):
            chain = ["conv_input", "conv1", "conv2", "conv3", "conv4", "conv_out"]
            parts = [
                self.port(_attr(module, a), _join(path, a))
                for a in chain
                if _attr(module, a) is not None
            ]
            return PortedSequential(*parts)
        if name in ("SubMConv3d", "SparseConv3d", "SparseConvTranspose3d", "SparseInverseConv3d"):
            return self._conv(module, name, where)
        if name == "SparseMaxPool3d":
            k, s, p, d = (
                self._geometry(module, a) for a in ("kernel_size", "stride", "padding", "dilation")
            )
            return nn.FullMaxPool3d(k, stride=s, padding=p, dilation=d)
        if name == "BatchNorm1d":
            return _batch_norm(module, where)
        activation = _activation(module)
        if activation is not None:
            return activation
        raise PortError(
            f"{where}: spconv port does not know {name}; supported are SparseSequential trees of "
            "SubMConv3d, SparseConv3d, SparseConvTranspose3d, SparseInverseConv3d, "
            "SparseMaxPool3d, BatchNorm1d and activations, and VoxelBackBone8x-style backbones"
        )

    def _geometry(self, module: torch.nn.Module, attr: str) -> Triple:
        return _reorder(_triple(_attr(module, attr)), self.axes)

    def _conv(self, module: torch.nn.Module, name: str, where: str) -> torch.nn.Module:
        if int(_attr(module, "groups", 1)) != 1:
            raise PortError(f"{where}: grouped convolutions have no Lattice op")
        k = self._geometry(module, "kernel_size")
        s = self._geometry(module, "stride")
        p = self._geometry(module, "padding")
        d = self._geometry(module, "dilation")
        c_in, c_out = int(_attr(module, "in_channels")), int(_attr(module, "out_channels"))
        bias = _attr(module, "bias") is not None
        key = _attr(module, "indice_key")
        one = math.prod(k) == 1
        conv: torch.nn.Module
        if name == "SparseInverseConv3d":
            if key is None or key not in self.keys:
                raise PortError(
                    f"{where}: SparseInverseConv3d with indice_key {key!r} has no earlier "
                    "SparseConv3d with that key to go back to"
                )
            paired = self.keys[key]
            if one:  # spconv runs a 1x1x1 inverse conv as its matmul, on its own rows
                conv = nn.SubmConv3d(c_in, c_out, 1, bias=bias)
                return self._load(conv, module, where, subm=True)
            conv = nn.TargetConvTranspose3d(
                c_in,
                c_out,
                k,
                stride=paired["stride"],
                padding=paired["padding"],
                dilation=paired["dilation"],
                bias=bias,
            )
            return _OntoTarget(self._load(conv, module, where), ("key", key), where)
        if name == "SubMConv3d":
            if any(v % 2 == 0 for v in k):
                raise PortError(
                    f"{where}: spconv refuses even SubMConv3d kernels; so does the port"
                )
            conv = nn.SubmConv3d(c_in, c_out, k, dilation=d, bias=bias)
            return self._load(conv, module, where, subm=True)
        if name == "SparseConvTranspose3d":
            conv = nn.ConvTranspose3d(c_in, c_out, k, stride=s, padding=p, dilation=d, bias=bias)
            return self._load(conv, module, where)
        conv = nn.FullConv3d(c_in, c_out, k, stride=s, padding=p, dilation=d, bias=bias)
        loaded = self._load(conv, module, where, stride=s)
        if key is None:
            return loaded
        self.keys[key] = {"stride": s, "padding": p, "dilation": d}
        return _Keyed(loaded, key)

    def _load(
        self,
        conv: torch.nn.Module,
        module: torch.nn.Module,
        where: str,
        *,
        subm: bool = False,
        stride: Triple | None = None,
    ) -> torch.nn.Module:
        return _loaded(
            conv,
            module,
            where,
            "weight",
            framework="spconv",
            version=self.version,
            stride=stride if stride is not None else (1, 1, 1),
            subm=subm,
            axes=self.axes,
        )


# ---------------------------------------------------------------------------
# TorchSparse.


def from_torchsparse(module: torch.nn.Module, *, version: str = "2.1") -> torch.nn.Module:
    """Rebuild a TorchSparse model as torch_lattice modules with converted weights.

    ``version`` (``"2.0"`` or ``"2.1"``) decides how stride-1 even kernels
    read their neighbours and how ``1x1x1`` kernels are stored.  The ported
    model reproduces TorchSparse's default kernel-map mode of that version.
    """
    if version not in ("2.0", "2.1"):
        raise PortError(f'TorchSparse version must be "2.0" or "2.1", got {version!r}')
    return _TorchSparsePort(version).port(module, "")


class _TorchSparsePort:
    def __init__(self, version: str) -> None:
        self.version = version

    def port(self, module: torch.nn.Module, path: str) -> torch.nn.Module:
        name = type(module).__name__
        where = path or "<root>"
        if name in ("SparseResUNet", "SparseResUNet42"):
            encoders = _attr(module, "encoders")
            decoders = _attr(module, "decoders")
            return _ResUNet(
                self.port(_attr(module, "stem"), _join(path, "stem")),
                torch.nn.ModuleList(
                    self.port(m, p) for p, m in _children(encoders, _join(path, "encoders"))
                ),
                torch.nn.ModuleList(
                    torch.nn.ModuleDict({k: self.port(v, _join(p, k)) for k, v in _children(m, "")})
                    for p, m in _children(decoders, _join(path, "decoders"))
                ),
            )
        if name == "SparseResBlock":
            return _ResBlock(
                self.port(_attr(module, "main"), _join(path, "main")),
                self.port(_attr(module, "shortcut"), _join(path, "shortcut")),
                self.port(_attr(module, "relu"), _join(path, "relu")),
            )
        if isinstance(module, torch.nn.Sequential) or name == "Sequential":
            return PortedSequential(*[self.port(c, p) for p, c in _children(module, path)])
        if name == "Conv3d":
            return self._conv(module, where)
        if name in ("BatchNorm", "BatchNorm1d"):
            return _batch_norm(module, where)
        activation = _activation(module)
        if activation is not None:
            return activation
        raise PortError(
            f"{where}: TorchSparse port does not know {name}; supported are nn.Sequential trees "
            "of spnn.Conv3d, spnn.BatchNorm and activations, SparseConvBlock, "
            "SparseConvTransposeBlock, SparseResBlock and SparseResUNet(42)"
        )

    def _conv(self, module: torch.nn.Module, where: str) -> torch.nn.Module:
        k = _triple(_attr(module, "kernel_size"))
        s = _triple(_attr(module, "stride"))
        c_in, c_out = int(_attr(module, "in_channels")), int(_attr(module, "out_channels"))
        bias = _attr(module, "bias") is not None
        # TorchSparse's kernel map ignores ``dilation``, and so does the port.
        if _attr(module, "generative", False):
            raise PortError(
                f"{where}: TorchSparse generative convs are not ported: their default kernel "
                "map refuses them and the centred one has not been checked against an oracle"
            )
        transposed = bool(_attr(module, "transposed", False))
        even_pad = _per_axis(k, lambda kk: (kk - 1) // 2 if kk % 2 == 0 else 0)
        if transposed:
            if s != k and math.prod(s) != 1:
                raise PortError(f"{where}: transposed convs port only with stride == kernel_size")
            conv: torch.nn.Module = nn.TargetConvTranspose3d(
                c_in, c_out, k, stride=s, padding=_per_axis(k, lambda kk: (kk - 1) // 2), bias=bias
            )
            coarse_to_fine = ("fine", s)
            return _FineTarget(self._load(conv, module, where, s), coarse_to_fine, where)
        if math.prod(s) != 1:
            if s != k and math.prod(k) != 1:
                raise PortError(
                    f"{where}: a strided TorchSparse conv with stride {list(s)} != kernel "
                    f"{list(k)} creates rows that depend on TorchSparse's version and mode; "
                    "it is not ported"
                )
            conv = nn.Conv3d(c_in, c_out, k, stride=s, padding=even_pad, bias=bias)
            return self._load(conv, module, where, s)
        odd_volume = math.prod(k) % 2 == 1
        if odd_volume or self.version == "2.0":
            return self._load(nn.SubmConv3d(c_in, c_out, k, bias=bias), module, where, s)
        if all(kk % 2 == 0 for kk in k):
            return self._load(nn.Conv3d(c_in, c_out, k, bias=bias), module, where, s)
        return _FullOntoInput(
            self._load(nn.FullConv3d(c_in, c_out, k, bias=bias), module, where, s)
        )

    def _load(
        self, conv: torch.nn.Module, module: torch.nn.Module, where: str, stride: Triple
    ) -> torch.nn.Module:
        return _loaded(
            conv,
            module,
            where,
            "kernel",
            framework="torchsparse",
            version=self.version,
            stride=stride,
        )


class _FineTarget(_OntoTarget):
    """TorchSparse's transposed conv: back onto the rows cached at the finer stride."""

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        _, step = self.target
        fine = tuple(a // b for a, b in zip(x.stride, step, strict=True))
        target = ctx.get(("stride", fine))
        if target is None:
            raise PortError(
                f"{self.path}: needs the rows TorchSparse cached at stride {list(fine)}, which "
                "no earlier layer of this call produced"
            )
        out: SparseTensor = self.conv(x, target)
        return out

"""Model definitions from spconv and TorchSparse, rebuilt as ``torch_lattice.nn`` models.

Converting a checkpoint fixes the weight layout; porting a model also has to
pick, for each layer, the Lattice module that computes what the layer
computed (``docs/convert-checkpoint.md`` has the table), rebuild the residual
adds, concatenations and inverse convolutions that the framework hides in its
``forward`` code or its coordinate caches, and copy every weight through the
converter.  :func:`from_spconv` and :func:`from_torchsparse` do that for the
module trees these frameworks' users build, matched by type (see
``torch_lattice._port_walk``), keeping their parameter names:

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
import warnings
from collections.abc import Callable
from typing import Any

import torch
from lattice_contract.frontend import spconv_conv_out, spconv_transpose_out

from torch_lattice import nn, ops
from torch_lattice._port_containers import (
    FineTarget as _FineTarget,
)
from torch_lattice._port_containers import (
    FullOntoInput as _FullOntoInput,
)
from torch_lattice._port_containers import (
    Keyed as _Keyed,
)
from torch_lattice._port_containers import (
    OntoTarget as _OntoTarget,
)
from torch_lattice._port_containers import (
    PortedSequential,
)
from torch_lattice._port_containers import (
    ResBlock as _ResBlock,
)
from torch_lattice._port_containers import (
    ResUNet as _ResUNet,
)
from torch_lattice._port_walk import (
    Context,
    Ported,
    PortError,
    Registry,
    Transparent,
    Walk,
    framework_types,
    run,
    source_children,
)
from torch_lattice.convert.layouts import convert_kernel
from torch_lattice.convert.spec import ConversionError, KernelDeclaration
from torch_lattice.port_minkowski import from_minkowski
from torch_lattice.sparse import SparseTensor

__all__ = ["PortError", "PortedSequential", "from_minkowski", "from_spconv", "from_torchsparse"]

Triple = tuple[int, int, int]
_Ported = Ported
_run = run


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


def _per_axis_mul(a: Triple, b: Triple) -> Triple:
    return (a[0] * b[0], a[1] * b[1], a[2] * b[2])


def _per_axis_div(a: Triple, b: Triple) -> Triple:
    return (a[0] // b[0], a[1] // b[1], a[2] // b[2])


def _reorder(t: Triple, axes: str) -> Triple:
    """A source-axis-order triple in Lattice's x, y, z order."""
    return (t[axes.index("x")], t[axes.index("y")], t[axes.index("z")])


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


def _activation(module: torch.nn.Module, name: str) -> torch.nn.Module | None:
    """The Lattice activation for a module of registered kind ``name``."""
    if name in ("ReLU", "MinkowskiReLU"):
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


# ---------------------------------------------------------------------------
# spconv.


def from_spconv(
    module: torch.nn.Module,
    *,
    version: str = "2.2",
    axes: str = "xyz",
    spatial_shape: Any = None,
    batch_size: int | None = None,
    types: Registry | None = None,
) -> torch.nn.Module:
    """Rebuild a spconv model as torch_lattice modules with converted weights.

    ``version`` is the spconv release whose layout the module's weights are in
    (``"2.2"`` for a module of any current spconv; a model whose parameters
    were loaded from an older checkpoint without conversion keeps that
    release's layout).  ``axes`` says which Lattice axis each of spconv's
    index columns is: OpenPCDet feeds ``(batch, z, y, x)`` indices, so its
    backbones port with ``axes="zyx"`` and the ported model takes ``(batch,
    x, y, z)`` coordinates.

    ``spatial_shape`` is the ``SparseConvTensor``'s grid, in spconv's index
    order (OpenPCDet's KITTI grid is ``[41, 1600, 1408]`` with ``axes="zyx"``).
    spconv drops every output of a strided conv, pool or transposed conv that
    falls outside the layer's output shape; with the grid the port emits
    ``ops.sparse_crop`` after each such layer, so the ported model keeps
    exactly spconv's rows.  Without it no bound is emitted and the port warns:
    rows spconv drops at the grid's faces are kept and change their
    neighbours.  ``batch_size`` (spconv's, a static count) is needed only by
    ``ToDense`` / ``HeightCompression``.

    Modules are matched by type: spconv's and torch's classes, OpenPCDet's
    when ``pcdet`` imports, and ``types`` (class -> kind, e.g.
    ``{MyBackbone: "VoxelBackBone8x"}``) for classes the caller vouches for.
    The ported model's ``state_dict`` keys are the source model's.
    """
    if sorted(axes) != ["x", "y", "z"]:
        raise PortError(f"axes must be a permutation of 'xyz', got {axes!r}")
    if spatial_shape is None:
        warnings.warn(
            "from_spconv without spatial_shape= cannot guarantee spconv's rows: spconv drops the "
            "outputs of strided, pooled and transposed convs that fall outside the grid, and "
            "the ported model keeps them; pass the SparseConvTensor's spatial_shape",
            UserWarning,
            stacklevel=2,
        )
        shape = None
    else:
        shape = _triple(spatial_shape)
        if min(shape) < 1:
            raise PortError(f"spatial_shape must be positive, got {spatial_shape!r}")
    port = _SpconvPort(version, axes, shape, batch_size, types)
    ported = port.port(module, "")
    if shape is None:
        return ported
    return _GridInput(ported, _reorder(shape, axes))


class _GridInput(Transparent):
    """The ported model behind a check that its input lies in the declared grid."""

    def __init__(self, model: torch.nn.Module, shape: Triple) -> None:
        super().__init__(model)
        self.grid = shape

    def forward(self, x: SparseTensor) -> Any:
        space = x.coords[:, 1:]
        bound = torch.tensor(self.grid, dtype=space.dtype, device=space.device)
        outside = ((space < 0) | (space >= bound)).any(dim=1)
        if bool(outside.any()):
            row = int(outside.nonzero()[0].item())
            raise ValueError(
                f"input row {row} at {x.coords[row].tolist()} lies outside the grid "
                f"{self.grid} (x, y, z) the model was ported for; spconv's layers are only "
                "defined on it"
            )
        return self.inner(x)


class _Bounded(Transparent):
    """A spconv layer that drops rows, followed by its grid bound (``sparse_crop``)."""

    def __init__(self, layer: torch.nn.Module, upper: Triple) -> None:
        super().__init__(layer)
        self.upper = upper

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        return ops.sparse_crop(_run(self.inner, x, ctx), lower=(0, 0, 0), upper=self.upper)


class _BasicBlock(_Ported):
    """OpenPCDet's ``SparseBasicBlock``: ``relu(bn2(conv2(relu(bn1(conv1(x))))) + x)``."""

    def __init__(
        self,
        conv1: torch.nn.Module,
        bn1: torch.nn.Module,
        conv2: torch.nn.Module,
        bn2: torch.nn.Module,
    ) -> None:
        super().__init__()
        self.conv1, self.bn1, self.conv2, self.bn2 = conv1, bn1, conv2, bn2
        self.relu = nn.ReLU()

    def call(self, x: SparseTensor, ctx: Context) -> SparseTensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        result: SparseTensor = self.relu(ops.sparse_binary(out, x, op="add"))
        return result


class _PairSum(torch.nn.Module):
    """Sum of adjacent channel groups, ``f.view(n, c, -1).sum(2)``, as a fixed linear."""

    weight: torch.Tensor

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        group = c_in // c_out
        weight = torch.zeros(c_out, c_in)
        weight[torch.arange(c_in) // group, torch.arange(c_in)] = 1.0
        self.register_buffer("weight", weight, persistent=False)

    def forward(self, x: SparseTensor) -> SparseTensor:
        return x.with_feats(ops.linear(x.feats, self.weight))


class _URBlock:
    """PartA2's UR block: ``inv(m(cat(B, t(L))) + pairsum(cat(B, t(L))))``.

    Not a module: its parts are registered on the UNet under the source's names.
    """

    def __init__(
        self, t: torch.nn.Module, m: torch.nn.Module, inv: torch.nn.Module, reduce: torch.nn.Module
    ) -> None:
        self.t, self.m, self.inv, self.reduce = t, m, inv, reduce

    def run(self, lateral: SparseTensor, bottom: SparseTensor, ctx: Context) -> SparseTensor:
        t = _run(self.t, lateral, ctx)
        x = ops.sparse_cat(bottom, t, join="inner")
        merged = ops.sparse_binary(_run(self.m, x, ctx), self.reduce(x), op="add")
        return _run(self.inv, merged, ctx)


class _UNetV2(torch.nn.Module):
    """PartA2's ``UNetV2``: the VoxelBackBone8x encoder, four UR decoders; ``(conv_out, up1)``."""

    def __init__(self, parts: dict[str, torch.nn.Module], decoder: dict[str, _URBlock]) -> None:
        super().__init__()
        for name, part in parts.items():  # the source's names: conv_input, conv_up_t4, ...
            self.add_module(name, part)
        for level, block in decoder.items():  # no persistent state: state_dict stays the source's
            self.add_module("channel_reduction_" + level, block.reduce)
        self.decoder = decoder

    def forward(self, x: SparseTensor) -> tuple[SparseTensor, SparseTensor]:
        ctx: Context = {}
        out: dict[str, SparseTensor] = {}
        for name in _BACKBONE:
            x = _run(self._modules[name], x, ctx)  # type: ignore[arg-type]
            out[name] = x
        up = out["conv4"]
        for level in ("4", "3", "2", "1"):
            up = self.decoder["up" + level].run(out["conv" + level], up, ctx)
        return out["conv_out"], up


_BACKBONE = ("conv_input", "conv1", "conv2", "conv3", "conv4", "conv_out")
_UNET_DECODER = (
    *(f"conv_up_{part}{level}" for level in "4321" for part in "tm"),
    *(f"inv_conv{level}" for level in "432"),
    "conv5",
)


_SPCONV_SUPPORTED = (
    "SparseSequential trees of SubMConv3d, SparseConv3d, SparseConvTranspose3d, "
    "SparseInverseConv3d, SparseMaxPool3d, BatchNorm1d, activations, SparseBasicBlock, ToDense "
    "and HeightCompression, and VoxelBackBone8x / VoxelResBackBone8x / UNetV2 backbones"
)
_SPCONV_SHAREABLE = frozenset(
    {"SubMConv3d", "BatchNorm1d", "ReLU", "LeakyReLU", "Identity", "Dropout"}
)


class _SpconvPort:
    def __init__(
        self,
        version: str,
        axes: str,
        shape: Triple | None,
        batch_size: int | None,
        types: Registry | None = None,
    ) -> None:
        self.walk = Walk("spconv", framework_types("spconv", types), _SPCONV_SHAREABLE)
        self.version = version
        self.axes = axes
        self.keys: dict[str, dict[str, Any]] = {}
        self.shape = shape  # spconv's grid at the current layer, source axis order
        self.stride: Triple = (1, 1, 1)  # Lattice stride at the current layer (x, y, z)
        self.batch_size = batch_size

    def port(self, module: torch.nn.Module, path: str) -> torch.nn.Module:
        where = path or "<root>"
        kind = self.walk.kind(module, where)
        again = self.walk.shared(module, where, kind)
        if again is not None:
            return again
        if kind is None:
            raise self.walk.unknown(module, where, _SPCONV_SUPPORTED)
        ported = self._port(module, kind, path, where)
        self.walk.remember(module, where, ported)
        return ported

    def _port(self, module: torch.nn.Module, name: str, path: str, where: str) -> torch.nn.Module:
        if name in ("SparseSequential", "Sequential"):
            return PortedSequential(
                {n: self.port(child, p) for n, p, child in source_children(module, path)}
            )
        if name in ("VoxelBackBone8x", "VoxelResBackBone8x", "UNetV2"):
            return self._backbone(module, path, where)
        if name == "SparseBasicBlock":
            return self._basic_block(module, path, where)
        if name in ("ToDense", "HeightCompression"):
            return self._dense(name, where)
        if name in ("SubMConv3d", "SparseConv3d", "SparseConvTranspose3d", "SparseInverseConv3d"):
            return self._conv(module, name, where)
        if name == "SparseMaxPool3d":
            k, s, p, d = (
                self._geometry(module, a) for a in ("kernel_size", "stride", "padding", "dilation")
            )
            key = _attr(module, "indice_key")
            if key is not None:
                self.keys[key] = {"pool": True, **self._grid()}
            pool = self._bound(
                nn.FullMaxPool3d(k, stride=s, padding=p, dilation=d), module, s, conv=True
            )
            return pool if key is None else _Keyed(pool, key)
        if name == "BatchNorm1d":
            return _batch_norm(module, where)
        activation = _activation(module, name)
        if activation is not None:
            return activation
        raise self.walk.unknown(module, where, _SPCONV_SUPPORTED)

    # -- the grid -----------------------------------------------------------------

    def _grid(self) -> dict[str, Any]:
        return {"shape": self.shape, "in_stride": self.stride}

    def _bound(
        self, layer: torch.nn.Module, module: torch.nn.Module, s: Triple, *, conv: bool
    ) -> torch.nn.Module:
        """Advance the grid over a row-dropping layer; wrap it in its bound when known."""
        raw = [
            _triple(_attr(module, a, 1 if a != "padding" else 0))
            for a in ("kernel_size", "stride", "padding", "dilation")
        ]
        if conv:
            self.stride = _per_axis_mul(self.stride, s)
        else:
            self.stride = _per_axis_div(self.stride, s)
        if self.shape is None:
            return layer
        if conv:
            self.shape = spconv_conv_out(self.shape, raw[0], raw[1], raw[2], raw[3])
        else:
            out_pad = _triple(_attr(module, "output_padding", 0))
            self.shape = spconv_transpose_out(self.shape, raw[0], raw[1], raw[2], out_pad)
        if min(self.shape) < 1:
            raise PortError(f"{layer}: the grid shrinks to {self.shape}; spconv refuses it too")
        upper = tuple(
            n * t for n, t in zip(_reorder(self.shape, self.axes), self.stride, strict=True)
        )
        return _Bounded(layer, (upper[0], upper[1], upper[2]))

    def _dense(self, name: str, where: str) -> torch.nn.Module:
        if self.shape is None or self.batch_size is None:
            raise PortError(
                f"{where}: {name} writes a dense array of spconv's grid; pass spatial_shape= and "
                "batch_size= to from_spconv"
            )
        if self.axes not in ("zyx", "xyz"):
            raise PortError(f"{where}: {name} ports with axes 'zyx' or 'xyz', got {self.axes!r}")
        grid = _reorder(self.shape, self.axes)
        if name == "HeightCompression":
            if self.axes != "zyx":
                raise PortError(f"{where}: HeightCompression folds z, so port with axes='zyx'")
            return nn.HeightCompression(grid, self.batch_size)
        layout = "b_c_z_y_x" if self.axes == "zyx" else "b_c_x_y_z"
        return nn.ToDense(grid, self.batch_size, layout=layout)

    # -- OpenPCDet modules -------------------------------------------------------------

    def _backbone(self, module: torch.nn.Module, path: str, where: str) -> torch.nn.Module:
        names = {n for n, _ in module.named_children()}
        decoder = names & set(_UNET_DECODER)
        unknown = names - set(_BACKBONE) - set(_UNET_DECODER)
        if unknown or (decoder and decoder != set(_UNET_DECODER)):
            extra = sorted(unknown | (decoder if decoder != set(_UNET_DECODER) else set()))
            raise PortError(
                f"{where}: a {type(module).__name__} with {', '.join(extra)} is neither "
                "VoxelBackBone8x (conv_input..conv4, conv_out) nor UNetV2; its forward cannot be "
                "known, so it is refused rather than ported as a plain chain"
            )
        encoder: dict[str, torch.nn.Module] = {}
        grids: dict[str, dict[str, Any]] = {}
        for a in _BACKBONE:
            child = _attr(module, a)
            if child is not None:
                encoder[a] = self.port(child, _join(path, a))
                grids[a] = self._grid()
        if not decoder:
            return PortedSequential(encoder)
        parts = dict(encoder)
        blocks: dict[str, _URBlock] = {}
        for level in "4321":
            here = grids["conv" + level]
            self.shape, self.stride = here["shape"], here["in_stride"]
            t = self.port(_attr(module, "conv_up_t" + level), _join(path, "conv_up_t" + level))
            m_src = _attr(module, "conv_up_m" + level)
            m = self.port(m_src, _join(path, "conv_up_m" + level))
            last = "conv5" if level == "1" else "inv_conv" + level
            inv = self.port(_attr(module, last), _join(path, last))
            c_in = int(_attr(m_src[0], "in_channels"))
            c_out = int(_attr(m_src[0], "out_channels"))
            parts.update({"conv_up_t" + level: t, "conv_up_m" + level: m, last: inv})
            blocks["up" + level] = _URBlock(t, m, inv, _PairSum(c_in, c_out))
        return _UNetV2(parts, blocks)

    def _basic_block(self, module: torch.nn.Module, path: str, where: str) -> torch.nn.Module:
        if _attr(module, "downsample") is not None:
            raise PortError(f"{where}: SparseBasicBlock with a downsample branch does not port")
        parts = []
        for a in ("conv1", "bn1", "conv2", "bn2"):
            child = _attr(module, a)
            if child is None:
                raise PortError(f"{where}: SparseBasicBlock without {a}")
            parts.append(self.port(child, _join(path, a)))
        return _BasicBlock(*parts)

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
            if paired.get("pool"):
                raise PortError(
                    f"{where}: SparseInverseConv3d back through the SparseMaxPool3d of indice_key "
                    f"{key!r} does not port: its values differ from target_conv_transpose3d onto "
                    "the pool's input (measured 0.59 max error); key it to a SparseConv3d"
                )
            self.shape, self.stride = paired["shape"], paired["in_stride"]  # the key's grid
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
            return self._bound(self._load(conv, module, where), module, s, conv=False)
        conv = nn.FullConv3d(c_in, c_out, k, stride=s, padding=p, dilation=d, bias=bias)
        loaded = self._load(conv, module, where, stride=s)
        if key is not None:
            self.keys[key] = {"stride": s, "padding": p, "dilation": d, **self._grid()}
        bounded = self._bound(loaded, module, s, conv=True)
        return bounded if key is None else _Keyed(bounded, key)

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


def from_torchsparse(
    module: torch.nn.Module, *, version: str = "2.1", types: Registry | None = None
) -> torch.nn.Module:
    """Rebuild a TorchSparse model as torch_lattice modules with converted weights.

    ``version`` (``"2.0"`` or ``"2.1"``) decides how stride-1 even kernels
    read their neighbours and how ``1x1x1`` kernels are stored.  The ported
    model reproduces TorchSparse's default kernel-map mode of that version.
    Modules are matched by type (TorchSparse's classes when it imports, and
    ``types``: class -> kind such as ``"Conv3d"`` or ``"SparseResBlock"``).
    """
    if version not in ("2.0", "2.1"):
        raise PortError(f'TorchSparse version must be "2.0" or "2.1", got {version!r}')
    return _TorchSparsePort(version, types).port(module, "")


_TS_SUPPORTED = (
    "nn.Sequential trees of spnn.Conv3d, spnn.BatchNorm and activations, SparseConvBlock, "
    "SparseConvTransposeBlock, SparseResBlock and SparseResUNet(42)"
)
_TS_SHAREABLE = frozenset({"BatchNorm", "BatchNorm1d", "ReLU", "LeakyReLU", "Identity", "Dropout"})


class _TorchSparsePort:
    def __init__(self, version: str, types: Registry | None) -> None:
        self.version = version
        self.walk = Walk("TorchSparse", framework_types("torchsparse", types), _TS_SHAREABLE)

    def port(self, module: torch.nn.Module, path: str) -> torch.nn.Module:
        where = path or "<root>"
        kind = self.walk.kind(module, where)
        again = self.walk.shared(module, where, kind)
        if again is not None:
            return again
        if kind is None:
            raise self.walk.unknown(module, where, _TS_SUPPORTED)
        ported = self._port(module, kind, path, where)
        self.walk.remember(module, where, ported)
        return ported

    def _port(self, module: torch.nn.Module, name: str, path: str, where: str) -> torch.nn.Module:
        if name in ("SparseResUNet", "SparseResUNet42"):
            encoders = _attr(module, "encoders")
            decoders = _attr(module, "decoders")
            return _ResUNet(
                self.port(_attr(module, "stem"), _join(path, "stem")),
                torch.nn.ModuleList(
                    self.port(m, p)
                    for _, p, m in source_children(encoders, _join(path, "encoders"))
                ),
                torch.nn.ModuleList(
                    torch.nn.ModuleDict({k: self.port(v, p2) for k, p2, v in source_children(m, p)})
                    for _, p, m in source_children(decoders, _join(path, "decoders"))
                ),
            )
        if name == "SparseResBlock":
            return _ResBlock(
                self.port(_attr(module, "main"), _join(path, "main")),
                self.port(_attr(module, "shortcut"), _join(path, "shortcut")),
                self.port(_attr(module, "relu"), _join(path, "relu")),
            )
        if name in ("Sequential", "SparseConvBlock", "SparseConvTransposeBlock"):
            return PortedSequential(
                {n: self.port(c, p) for n, p, c in source_children(module, path)}
            )
        if name == "Conv3d":
            return self._conv(module, where)
        if name in ("BatchNorm", "BatchNorm1d"):
            return _batch_norm(module, where)
        activation = _activation(module, name)
        if activation is not None:
            return activation
        raise self.walk.unknown(module, where, _TS_SUPPORTED)

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

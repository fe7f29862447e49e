"""convert-checkpoint: layouts of each framework, refusals, files and the CLI.

The source layouts are built here straight from each framework's own tap
enumeration (the loops below mirror how TorchSparse, MinkowskiEngine and
spconv list kernel offsets), independently of the converter's index
arithmetic: a canonical random weight is scattered into the source layout and
the converter must give it back exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch_lattice.convert import (
    ConversionError,
    KernelSpec,
    canonical_row_permutation,
    convert_checkpoint,
    convert_state_dict,
    main,
)

SIZES = [(3, 3, 3), (2, 2, 2), (3, 1, 2), (4, 4, 4), (2, 3, 3), (5, 3, 1), (1, 1, 1)]


def _spec(kernels: dict[str, Any], **extra: Any) -> KernelSpec:
    return KernelSpec.from_json(
        {"format": "lattice-kernel-spec", "version": 1, "kernels": kernels, **extra}
    )


def _taps_first_fastest(size: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    kx, ky, kz = size
    return [(x, y, z) for z in range(kz) for y in range(ky) for x in range(kx)]


def _taps_last_fastest(size: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    kx, ky, kz = size
    return [(x, y, z) for x in range(kx) for y in range(ky) for z in range(kz)]


def _flattened(w: torch.Tensor, taps: list[tuple[int, int, int]]) -> torch.Tensor:
    """(K, C_in, C_out) with row i holding tap taps[i] of canonical w."""
    return torch.stack([w[:, x, y, z, :].T for (x, y, z) in taps])


def _kernel_size(w: torch.Tensor) -> tuple[int, int, int]:
    """The ``(Kx, Ky, Kz)`` of a canonical ``(C_out, Kx, Ky, Kz, C_in)`` weight."""
    return (w.shape[1], w.shape[2], w.shape[3])


def torchsparse_layout(w: torch.Tensor, version: str) -> torch.Tensor:
    size = _kernel_size(w)
    volume = size[0] * size[1] * size[2]
    if volume == 1:
        return w.reshape(w.shape[0], w.shape[4]).T.contiguous()  # (C_in, C_out)
    taps = _taps_first_fastest(size) if volume % 2 else _taps_last_fastest(size)
    return _flattened(w, taps)


def minkowski_layout(w: torch.Tensor) -> torch.Tensor:
    return _flattened(w, _taps_first_fastest(_kernel_size(w)))


def spconv2_layout(w: torch.Tensor, *, matmul_1x1: bool) -> torch.Tensor:
    if tuple(w.shape[1:4]) == (1, 1, 1) and matmul_1x1:
        # spconv reads the (C_out, 1, 1, 1, C_in) buffer as (C_in, C_out).
        c_out, c_in = w.shape[0], w.shape[4]
        return w.reshape(c_out, c_in).T.contiguous().reshape(c_out, 1, 1, 1, c_in)
    return w.clone()


def spconv1_layout(w: torch.Tensor) -> torch.Tensor:
    return w.permute(1, 2, 3, 4, 0).contiguous()


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def _canonical(gen: torch.Generator, size: tuple[int, int, int], c_in: int = 3, c_out: int = 5):
    return torch.randn(c_out, *size, c_in, generator=gen)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("version", ["torchsparse-2.0", "torchsparse-2.1"])
def test_torchsparse_round_trip(size, version, gen):
    w = _canonical(gen, size)
    src = torchsparse_layout(w, version)
    spec = _spec({"conv.kernel": {"framework": version, "kernel_size": list(size)}})
    result = convert_state_dict({"conv.kernel": src}, spec)
    assert torch.equal(result.tensors["conv.kernel"], w)
    rec = result.manifest["converted"]["conv.kernel"]
    assert rec["shape_before"] == list(src.shape)
    assert rec["shape_after"] == list(w.shape)
    assert rec["framework"] == version


def test_torchsparse_21_strided_1x1_keeps_k_axis(gen):
    w = _canonical(gen, (1, 1, 1))
    src = w.reshape(5, 3).T.unsqueeze(0).contiguous()  # 2.1 strided 1x1x1: (1, C_in, C_out)
    out = convert_state_dict(
        {"down.kernel": src}, _spec({"down.kernel": {"framework": "torchsparse-2.1"}})
    )
    assert torch.equal(out.tensors["down.kernel"], w)
    with pytest.raises(ConversionError, match=r"down\.kernel.*TorchSparse 2\.1"):
        convert_state_dict(
            {"down.kernel": src}, _spec({"down.kernel": {"framework": "torchsparse-2.0"}})
        )


@pytest.mark.parametrize("size", SIZES)
def test_minkowski_round_trip(size, gen):
    w = _canonical(gen, size)
    src = minkowski_layout(w)
    bias = torch.randn(1, 5, generator=gen)
    spec = _spec(
        {
            "block.conv.kernel": {"framework": "minkowski", "kernel_size": list(size)},
            "block.conv.bias": {"framework": "minkowski", "role": "bias"},
        },
        rename=[[r"\.kernel$", ".weight"]],
    )
    result = convert_state_dict({"block.conv.kernel": src, "block.conv.bias": bias}, spec)
    assert torch.equal(result.tensors["block.conv.weight"], w)
    assert torch.equal(result.tensors["block.conv.bias"], bias.reshape(5))
    assert result.manifest["converted"]["block.conv.weight"]["source_key"] == "block.conv.kernel"


@pytest.mark.parametrize("size", SIZES)
def test_spconv2_round_trip(size, gen):
    w = _canonical(gen, size)
    src = spconv2_layout(w, matmul_1x1=True)
    spec = _spec({"net.0.weight": {"framework": "spconv", "version": "2.2", "stride": 1}})
    assert torch.equal(convert_state_dict({"net.0.weight": src}, spec).tensors["net.0.weight"], w)


def test_spconv2_strided_1x1_is_plain_krsc(gen):
    w = _canonical(gen, (1, 1, 1))
    spec = _spec({"down.weight": {"framework": "spconv", "version": "2.2", "stride": 2}})
    out = convert_state_dict({"down.weight": w.clone()}, spec)
    assert torch.equal(out.tensors["down.weight"], w)
    subm = _spec(
        {"down.weight": {"framework": "spconv", "version": "2.2", "stride": 2, "subm": True}}
    )
    quirk = spconv2_layout(w, matmul_1x1=True)
    assert torch.equal(convert_state_dict({"down.weight": quirk}, subm).tensors["down.weight"], w)


@pytest.mark.parametrize("size", SIZES)
def test_spconv1_round_trip(size, gen):
    w = _canonical(gen, size)
    spec = _spec({"x.weight": {"framework": "spconv-1"}})
    out = convert_state_dict({"x.weight": spconv1_layout(w)}, spec)
    assert torch.equal(out.tensors["x.weight"], w)


def test_axes_zyx_reverses_the_kernel_axes(gen):
    # A model fed (batch, z, y, x) indices: its kernel axis 0 is z.
    w = _canonical(gen, (2, 3, 4))  # canonical (Kx, Ky, Kz) = (2, 3, 4)
    src = w.permute(0, 3, 2, 1, 4).contiguous()  # spconv order (Kz, Ky, Kx)
    spec = _spec({"w": {"framework": "spconv", "version": "2.2", "axes": "zyx"}})
    out = convert_state_dict({"w": src}, spec)
    assert torch.equal(out.tensors["w"], w)
    rec = out.manifest["converted"]["w"]
    assert rec["kernel_size"] == [4, 3, 2]
    assert rec["canonical_kernel_size"] == [2, 3, 4]


def test_row_permutation_values():
    # Odd TorchSparse: rows x fastest, so canonical row 1 (tap z=1) is source row 9.
    perm = canonical_row_permutation("torchsparse", (3, 3, 3))
    assert perm[:4] == [0, 9, 18, 3]
    assert sorted(perm) == list(range(27))
    # Even TorchSparse: already z fastest.
    assert canonical_row_permutation("torchsparse", (2, 2, 2)) == list(range(8))
    # MinkowskiEngine even: x fastest, unlike TorchSparse.
    assert canonical_row_permutation("minkowski", (2, 2, 2)) == [0, 4, 2, 6, 1, 5, 3, 7]
    assert canonical_row_permutation("spconv", (3, 3, 3)) == list(range(27))


def test_other_keys_copied_unchanged(gen):
    state = {
        "conv.kernel": torchsparse_layout(_canonical(gen, (3, 3, 3)), "torchsparse-2.1"),
        "bn.weight": torch.randn(5, generator=gen),
        "bn.num_batches_tracked": torch.tensor(7),
        "head.weight": torch.randn(4, 5, generator=gen),
        "pointnet.conv1d.weight": torch.randn(4, 5, 1, generator=gen),
    }
    spec = _spec(
        {"conv.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}},
        keep=["pointnet.*"],
    )
    result = convert_state_dict(state, spec)
    for key in ("bn.weight", "bn.num_batches_tracked", "head.weight", "pointnet.conv1d.weight"):
        assert torch.equal(result.tensors[key], state[key])
        assert result.tensors[key].dtype == state[key].dtype
    assert set(result.manifest["copied"]) == {
        "bn.weight",
        "bn.num_batches_tracked",
        "head.weight",
        "pointnet.conv1d.weight",
    }


def test_half_precision_kept(gen):
    w = _canonical(gen, (3, 3, 3)).half()
    out = convert_state_dict(
        {"k": minkowski_layout(w)}, _spec({"k": {"framework": "minkowski", "kernel_size": 3}})
    )
    assert out.tensors["k"].dtype == torch.float16
    assert torch.equal(out.tensors["k"], w)


# ---------------------------------------------------------------------------
# Refusals, one by one.


def _ts(gen, size=(3, 3, 3)):
    return torchsparse_layout(_canonical(gen, size), "torchsparse-2.1")


def test_refuses_undeclared_kernel_key(gen):
    state = {"a.kernel": _ts(gen), "b.kernel": _ts(gen)}
    spec = _spec({"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"b\.kernel.*does not declare"):
        convert_state_dict(state, spec)


@pytest.mark.parametrize("shape", [(5, 3, 3, 3, 4), (27, 4, 5)])
def test_refuses_undeclared_kernel_like_weight(shape, gen):
    state = {"a.kernel": _ts(gen), "enc.weight": torch.randn(*shape, generator=gen)}
    spec = _spec({"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"enc\.weight"):
        convert_state_dict(state, spec)


def test_refuses_2d_undeclared_kernel_suffix(gen):
    state = {"a.kernel": _ts(gen), "proj.kernel": torch.randn(3, 5, generator=gen)}
    spec = _spec({"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"proj\.kernel"):
        convert_state_dict(state, spec)


def test_refuses_unknown_framework():
    with pytest.raises(ConversionError, match=r"'a\.kernel'.*unknown framework 'torchsparse-3'"):
        _spec({"a.kernel": {"framework": "torchsparse-3", "kernel_size": 3}})


def test_refuses_ambiguous_patterns(gen):
    spec = _spec(
        {
            "enc.*.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3},
            "enc.0.*": {"framework": "minkowski", "kernel_size": 3},
        }
    )
    with pytest.raises(ConversionError, match=r"enc\.0\.kernel.*different declarations"):
        convert_state_dict({"enc.0.kernel": _ts(gen)}, spec)


def test_refuses_flattened_kernel_without_size(gen):
    spec = _spec({"a.kernel": {"framework": "torchsparse-2.1"}})
    with pytest.raises(ConversionError, match=r"a\.kernel.*declare \"kernel_size\""):
        convert_state_dict({"a.kernel": _ts(gen, (2, 2, 2))}, spec)


def test_refuses_size_volume_mismatch(gen):
    spec = _spec({"a.kernel": {"framework": "minkowski", "kernel_size": [2, 2, 2]}})
    with pytest.raises(ConversionError, match=r"a\.kernel.*8 taps.*27 rows"):
        convert_state_dict({"a.kernel": _ts(gen)}, spec)


def test_refuses_spconv_size_contradiction(gen):
    spec = _spec({"w": {"framework": "spconv", "version": "2.2", "kernel_size": 5}})
    with pytest.raises(ConversionError, match=r"w: the spec declares kernel_size"):
        convert_state_dict({"w": _canonical(gen, (3, 3, 3))}, spec)


def test_refuses_spconv_1x1_without_stride(gen):
    spec = _spec({"head.weight": {"framework": "spconv", "version": "2.2"}})
    with pytest.raises(ConversionError, match=r"head\.weight.*declare \"stride\""):
        convert_state_dict({"head.weight": _canonical(gen, (1, 1, 1))}, spec)


def test_refuses_wrong_rank_for_framework(gen):
    spec = _spec({"w": {"framework": "spconv", "version": "2.2"}})
    with pytest.raises(ConversionError, match=r"w: a spconv kernel is 5-D"):
        convert_state_dict({"w": _ts(gen)}, spec)


def test_refuses_2d_kernel_with_larger_size(gen):
    spec = _spec({"k": {"framework": "torchsparse-2.0", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"k: a 2-D"):
        convert_state_dict({"k": torch.randn(3, 5, generator=gen)}, spec)


def test_refuses_pattern_matching_nothing(gen):
    spec = _spec(
        {
            "a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3},
            "decoder.*.kernel": {"framework": "torchsparse-2.1", "kernel_size": 2},
        }
    )
    with pytest.raises(ConversionError, match=r"decoder\.\*\.kernel.*match no key"):
        convert_state_dict({"a.kernel": _ts(gen)}, spec)


def test_refuses_rename_collision(gen):
    spec = _spec(
        {"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}},
        rename=[[r"\.kernel$", ".weight"]],
    )
    state = {"a.kernel": _ts(gen), "a.weight": torch.randn(3, generator=gen)}
    with pytest.raises(ConversionError, match=r"a\.weight.*renamed"):
        convert_state_dict(state, spec)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"version": 1, "kernels": {}}, "format"),
        ({"format": "lattice-kernel-spec", "version": 1, "kernels": {}}, "non-empty"),
        (
            {
                "format": "lattice-kernel-spec",
                "version": 1,
                "kernels": {"k": {"framework": "minkowski", "axes": "xxz"}},
            },
            "axes",
        ),
        (
            {
                "format": "lattice-kernel-spec",
                "version": 1,
                "kernels": {"k": {"framework": "minkowski", "kernel": 3}},
            },
            "unknown field",
        ),
        (
            {
                "format": "lattice-kernel-spec",
                "version": 1,
                "kernels": {"k": {"framework": "minkowski", "kernel_size": 0}},
            },
            "positive",
        ),
    ],
)
def test_refuses_malformed_spec(data, match):
    with pytest.raises(ConversionError, match=match):
        KernelSpec.from_json(data)


# ---------------------------------------------------------------------------
# Files and the console script.


def _write_spec(tmp: Path, kernels: dict[str, Any], **extra: Any) -> Path:
    path = tmp / "spec.json"
    path.write_text(
        json.dumps({"format": "lattice-kernel-spec", "version": 1, "kernels": kernels, **extra})
    )
    return path


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_cli_writes_weights_and_manifest(tmp_path, suffix, gen):
    w3 = _canonical(gen, (3, 3, 3))
    w2 = _canonical(gen, (2, 2, 2), c_in=5, c_out=6)
    state = {
        "stem.kernel": torchsparse_layout(w3, "torchsparse-2.0"),
        "down.kernel": torchsparse_layout(w2, "torchsparse-2.0"),
        "bn.weight": torch.ones(5),
    }
    src = tmp_path / f"ckpt{suffix}"
    if suffix == ".pt":
        torch.save(state, src)
    else:
        save_file(state, str(src))
    spec = _write_spec(
        tmp_path,
        {
            "stem.kernel": {"framework": "torchsparse-2.0", "kernel_size": 3},
            "down.kernel": {"framework": "torchsparse-2.0", "kernel_size": 2},
        },
        rename=[[r"\.kernel$", ".weight"]],
    )
    dst = tmp_path / "out" / "weights.safetensors"
    assert main([str(src), str(dst), "--kernel-spec", str(spec)]) == 0
    weights = load_file(str(dst))
    assert torch.equal(weights["stem.weight"], w3)
    assert torch.equal(weights["down.weight"], w2)
    assert torch.equal(weights["bn.weight"], state["bn.weight"])
    manifest = json.loads((tmp_path / "out" / "weights.manifest.json").read_text())
    stem = manifest["converted"]["stem.weight"]
    assert stem["source_key"] == "stem.kernel"
    assert stem["framework"] == "torchsparse-2.0"
    assert "first-axis fastest" in stem["source_layout"]
    assert stem["shape_before"] == [27, 3, 5] and stem["shape_after"] == [5, 3, 3, 3, 3]
    assert stem["row_permutation"] == canonical_row_permutation("torchsparse", (3, 3, 3))
    assert manifest["copied"] == {"bn.weight": "bn.weight"}


def test_cli_nested_checkpoint_needs_key(tmp_path, gen, capsys):
    state = {"stem.kernel": _ts(gen)}
    src = tmp_path / "ckpt.pth"
    torch.save({"state_dict": state, "epoch": torch.tensor(3)}, src)
    spec = _write_spec(
        tmp_path, {"stem.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}}
    )
    dst = tmp_path / "w.safetensors"
    assert main([str(src), str(dst), "--kernel-spec", str(spec)]) == 2
    assert "--state-dict-key" in capsys.readouterr().err
    assert not dst.exists()
    args = [str(src), str(dst), "--kernel-spec", str(spec), "--state-dict-key", "state_dict"]
    assert main([*args, "--manifest", str(tmp_path / "m.json")]) == 0
    assert dst.exists() and (tmp_path / "m.json").exists()


def test_cli_failure_writes_nothing(tmp_path, gen, capsys):
    src = tmp_path / "ckpt.pt"
    torch.save({"a.kernel": _ts(gen), "b.kernel": _ts(gen)}, src)
    spec = _write_spec(tmp_path, {"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    dst = tmp_path / "w.safetensors"
    assert main([str(src), str(dst), "--kernel-spec", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "b.kernel" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt", "spec.json"]


def test_refuses_pickled_objects(tmp_path):
    src = tmp_path / "ckpt.pt"
    torch.save({"a": torch.zeros(1), "obj": {1, 2}}, src)  # a set is not weights-only safe data
    spec = _write_spec(tmp_path, {"a": {"framework": "minkowski", "role": "bias"}})
    with pytest.raises(ConversionError):
        convert_checkpoint(src, tmp_path / "w.safetensors", spec)


def test_destination_must_be_safetensors(tmp_path, gen):
    src = tmp_path / "ckpt.pt"
    torch.save({"a.kernel": _ts(gen)}, src)
    spec = _write_spec(tmp_path, {"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"\.safetensors"):
        convert_checkpoint(src, tmp_path / "w.pt", spec)


def test_module_entry_point_runs_in_a_fresh_process(tmp_path, gen):
    import subprocess
    import sys

    src = tmp_path / "ckpt.pt"
    torch.save({"a.kernel": _ts(gen)}, src)
    spec = _write_spec(tmp_path, {"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    dst = tmp_path / "w.safetensors"
    args = [sys.executable, "-m", "torch_lattice.convert", str(src), str(dst)]
    done = subprocess.run([*args, "--kernel-spec", str(spec)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 kernel(s) converted" in done.stderr  # a log line (INFO), silenced by --quiet
    assert load_file(str(dst))["a.kernel"].shape == (5, 3, 3, 3, 3)
    bad = subprocess.run(args, capture_output=True, text=True)
    assert bad.returncode == 2 and "--kernel-spec" in bad.stderr


# ---------------------------------------------------------------------------
# Spec version 2: versions, spconv 2.0/2.1 RSKC layouts, flip, drop.


def spconv_rskc_layout(w: torch.Tensor) -> torch.Tensor:
    """spconv 2.0/2.1 Native-algorithm layout (K0, K1, K2, C_out, C_in)."""
    return w.permute(1, 2, 3, 0, 4).contiguous()


@pytest.mark.parametrize("size", [(3, 3, 3), (2, 3, 4), (5, 5, 5)])
def test_spconv20_is_always_rskc(size, gen):
    w = _canonical(gen, size, c_in=4, c_out=6)
    spec = _spec({"w": {"framework": "spconv", "version": "2.0"}})
    out = convert_state_dict({"w": spconv_rskc_layout(w)}, spec)
    assert torch.equal(out.tensors["w"], w)
    rec = out.manifest["converted"]["w"]
    assert rec["framework"] == "spconv-2.0"
    assert rec["source_layout"].startswith("(K0, K1, K2, C_out, C_in)")
    assert rec["layout_decided_by"] == "version 2.0"


@pytest.mark.parametrize("layout", ["KRSC", "RSKC"])
def test_spconv21_layout_detected_from_shape_and_kernel_size(layout, gen):
    w = _canonical(gen, (3, 3, 3), c_in=4, c_out=6)
    src = w.clone() if layout == "KRSC" else spconv_rskc_layout(w)
    spec = _spec({"w": {"framework": "spconv", "version": "2.1", "kernel_size": 3}})
    out = convert_state_dict({"w": src}, spec)
    assert torch.equal(out.tensors["w"], w)
    assert out.manifest["converted"]["w"]["layout_decided_by"] == "detected from the shape"
    assert out.manifest["converted"]["w"]["source_layout"].endswith(f"({layout})")


def test_spconv21_ambiguous_shape_is_refused_and_layout_decides(gen):
    # C_out == 3 == every kernel extent: (3, 3, 3, 3, C_in) reads both ways.
    w = _canonical(gen, (3, 3, 3), c_in=4, c_out=3)
    src = spconv_rskc_layout(w)
    spec = _spec({"w": {"framework": "spconv", "version": "2.1", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"w: shape \[3, 3, 3, 3, 4\].*both as KRSC and as"):
        convert_state_dict({"w": src}, spec)
    declared = _spec({"w": {"framework": "spconv", "version": "2.1", "layout": "RSKC"}})
    assert torch.equal(convert_state_dict({"w": src}, declared).tensors["w"], w)


def test_legacy_spconv2_needs_kernel_size_or_version(gen):
    w = _canonical(gen, (3, 3, 3), c_in=4, c_out=6)
    with pytest.raises(ConversionError, match=r"cannot say which.*kernel_size"):
        convert_state_dict({"w": w}, _spec({"w": {"framework": "spconv-2"}}))
    sized = _spec({"w": {"framework": "spconv-2", "kernel_size": 3}})
    assert torch.equal(convert_state_dict({"w": spconv_rskc_layout(w)}, sized).tensors["w"], w)


def test_spconv22_refuses_an_rskc_shape_with_a_version_hint(gen):
    w = _canonical(gen, (3, 3, 3), c_in=4, c_out=6)
    spec = _spec({"w": {"framework": "spconv", "version": "2.2", "kernel_size": 3}})
    with pytest.raises(ConversionError, match=r"spconv 2\.0 or 2\.1, declare that \"version\""):
        convert_state_dict({"w": spconv_rskc_layout(w)}, spec)


@pytest.mark.parametrize(
    ("declaration", "match"),
    [
        (
            {"framework": "spconv", "version": "2.0", "layout": "KRSC"},
            r"saves every kernel as RSKC",
        ),
        ({"framework": "spconv", "version": "3.0"}, r"unknown spconv version '3\.0'"),
        ({"framework": "torchsparse", "kernel_size": 3}, r'declare "version": "2\.0" or "2\.1"'),
        ({"framework": "torchsparse-2.0", "version": "2.1"}, r"already says version 2\.0"),
        ({"framework": "minkowski", "layout": "KRSC"}, r"applies to spconv kernels only"),
        ({"framework": "spconv", "version": 2.1}, r'"version" must be a string'),
        ({"framework": "spconv", "version": "2.2", "flip": "yes"}, r"flip must be true or false"),
    ],
)
def test_refuses_bad_versions_and_layouts(declaration, match):
    with pytest.raises(ConversionError, match=match):
        _spec({"k": declaration})


def test_version_synonyms_and_legacy_names_record_the_source():
    spec = _spec(
        {
            "a": {"framework": "spconv", "version": "2.3"},
            "b": {"framework": "torchsparse-2.1"},
            "c": {"framework": "minkowski"},
        }
    )
    assert [d.source for d in spec.kernels] == ["spconv-2.2", "torchsparse-2.1", "minkowski-0.5"]


@pytest.mark.parametrize("size", [(3, 3, 3), (2, 2, 2), (3, 1, 2)])
def test_flip_reverses_every_axis(size, gen):
    w = _canonical(gen, size)
    src = torchsparse_layout(w.flip(1, 2, 3), "torchsparse-2.1")  # taps stored mirrored
    spec = _spec({"k": {"framework": "torchsparse-2.1", "kernel_size": list(size), "flip": True}})
    out = convert_state_dict({"k": src}, spec)
    assert torch.equal(out.tensors["k"], w)
    rec = out.manifest["converted"]["k"]
    assert rec["flip"] is True
    plain = canonical_row_permutation("torchsparse", size)
    assert rec["row_permutation"] == plain[::-1]


def test_drop_leaves_keys_out_and_records_them(gen):
    state = {
        "conv.kernel": _ts(gen),
        "bn.weight": torch.ones(5),
        "bn.num_batches_tracked": torch.tensor(7),
        "bn2.num_batches_tracked": torch.tensor(3),
    }
    spec = _spec(
        {"conv.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}},
        version=2,
        drop=["*.num_batches_tracked", "head.*"],
    )
    out = convert_state_dict(state, spec)
    assert set(out.tensors) == {"conv.kernel", "bn.weight"}
    assert out.manifest["dropped"] == ["bn.num_batches_tracked", "bn2.num_batches_tracked"]
    assert out.manifest["unused_drop_patterns"] == ["head.*"]


def test_drop_and_kernels_on_one_key_is_refused(gen):
    spec = _spec(
        {"conv.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}}, drop=["conv.*"]
    )
    with pytest.raises(ConversionError, match=r'conv\.kernel: listed in both "kernels" and "drop"'):
        convert_state_dict({"conv.kernel": _ts(gen)}, spec)


# A child converts over an existing pair and is killed with SIGKILL at one step
# of lattice_contract.artifact.atomic's swap.
KILLED_CONVERSION = """
from torch_lattice.convert import convert_checkpoint
convert_checkpoint(*sys.argv[1:4])
"""


def _converted_pair(dst: Path) -> tuple[dict[str, Any], str]:
    from lattice_contract.artifact import fingerprint

    manifest = json.loads(dst.with_suffix(".manifest.json").read_text())
    return manifest, fingerprint(dst)


@pytest.mark.parametrize(
    ("step", "survivor"), [("before_swap", "old"), ("before_companion", "new")]
)
def test_weights_and_manifest_stay_a_pair_when_killed(
    tmp_path: Path, gen: torch.Generator, step: str, survivor: str
) -> None:
    from lattice_contract.artifact import recover_interrupted
    from lattice_contract.testing import kill_writer_at

    spec = _write_spec(tmp_path, {"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    sources = {}
    for name in ("old", "new"):
        sources[name] = tmp_path / f"{name}.pt"
        torch.save({"a.kernel": _ts(gen)}, sources[name])
    dst = tmp_path / "out" / "w.safetensors"
    convert_checkpoint(sources["old"], dst, spec)
    manifest, digest = _converted_pair(dst)
    assert manifest["destination_sha256"] == digest
    kill_writer_at(step, KILLED_CONVERSION, str(sources["new"]), str(dst), str(spec))
    recover_interrupted(dst, companion=dst.with_suffix(".manifest.json"))
    manifest, digest = _converted_pair(dst)
    assert manifest["destination_sha256"] == digest  # the manifest describes these weights
    assert manifest["source"] == str(sources[survivor])
    left = sorted(p.name for p in dst.parent.iterdir() if not p.name.endswith(".lock"))
    assert left == ["w.manifest.json", "w.safetensors"]  # no staged or pending file remains


def test_manifest_cannot_be_the_destination(tmp_path: Path, gen: torch.Generator) -> None:
    src = tmp_path / "ckpt.pt"
    torch.save({"a.kernel": _ts(gen)}, src)
    spec = _write_spec(tmp_path, {"a.kernel": {"framework": "torchsparse-2.1", "kernel_size": 3}})
    dst = tmp_path / "w.safetensors"
    with pytest.raises(ConversionError, match="would overwrite the destination"):
        convert_checkpoint(src, dst, spec, manifest_path=dst)
    assert not dst.exists()

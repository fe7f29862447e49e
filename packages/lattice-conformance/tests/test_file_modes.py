"""Everything the stack writes for others to read gets the umask's modes, as open() gives.

``mkstemp``/``mkdtemp`` create 0600/0700; bundles (both runtimes), converted
checkpoints and their manifests, replay reports and fixture archives must
instead be readable by another account (a serving container, CI) under the
usual umask 022, and private under 077.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlx.core as mx
import mlx_lattice.artifact as mla
import numpy as np
import pytest
import torch
import torch_lattice.artifact as tla
from lattice_conformance.archive import FixtureCase, write_fixture_archive
from lattice_conformance.replay import write_json_atomic
from lattice_contract.builder import MLIRModuleBuilder
from torch_lattice.convert import convert_checkpoint


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _graph() -> str:
    b = MLIRModuleBuilder()
    x = b.add_sparse_input("x", channels=4, dtype="f32")
    w = b.weight(storage_key="w", layout="conv3d_o_xyz_i", dtype="f32", shape=(2, 1, 1, 1, 4))
    b.add_output("y", b.subm_conv3d(input=x, weight=w, kernel_size=1))
    return b.build()


def _modes(*paths: Path) -> set[int]:
    out = set()
    for path in paths:
        out.add(path.stat().st_mode & 0o777)
        if path.is_dir():
            out |= {p.stat().st_mode & 0o777 for p in path.iterdir()}
    return out


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_every_writer_follows_the_umask(tmp_path: Path, mask: int) -> None:
    with _umask(mask):
        with open(tmp_path / "plain", "w"):
            pass
        (tmp_path / "plain_dir").mkdir()
    file_mode = (tmp_path / "plain").stat().st_mode & 0o777
    dir_mode = (tmp_path / "plain_dir").stat().st_mode & 0o777
    assert (file_mode, dir_mode) == (0o666 & ~mask, 0o777 & ~mask)
    spec = tmp_path / "spec.json"
    kernels = {"a.bias": {"framework": "minkowski", "role": "bias"}}
    spec.write_text(json.dumps({"format": "lattice-kernel-spec", "version": 1, "kernels": kernels}))
    torch.save({"a.bias": torch.zeros(3)}, tmp_path / "ckpt.pt")
    with _umask(mask):
        mla.save_lattice_artifact(
            tmp_path / "mlx.lattice", _graph(), {"w": mx.zeros((2, 1, 1, 1, 4))}
        )
        tla.save_lattice_artifact(
            tmp_path / "torch.lattice", _graph(), {"w": torch.zeros(2, 1, 1, 1, 4)}
        )
        convert_checkpoint(tmp_path / "ckpt.pt", tmp_path / "conv" / "w.safetensors", spec)
        write_json_atomic(tmp_path / "report.json", {"ok": True})
        case = FixtureCase(
            name="c",
            inputs={"x": np.zeros((1, 1), np.float32)},
            expected={"y": np.zeros((1, 1), np.float32)},
            atol=0.0,
            rtol=0.0,
        )
        archive = write_fixture_archive(tmp_path / "f.tar.gz", tmp_path / "mlx.lattice", [case])
    for bundle in (tmp_path / "mlx.lattice", tmp_path / "torch.lattice"):
        assert bundle.stat().st_mode & 0o777 == dir_mode
        assert _modes(*bundle.iterdir()) == {file_mode}
    converted = [tmp_path / "conv" / "w.safetensors", tmp_path / "conv" / "w.manifest.json"]
    assert _modes(*converted, tmp_path / "report.json", archive) == {file_mode}

"""Export refuses Python control flow decided by the input, naming the module.

Each refused model below exports "successfully" without the guard, and its
artifact then takes the traced branch for every input; the models that pass
branch on static things (a channel count, a constructor flag) only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch_lattice import SparseTensor, nn
from torch_lattice.export import save_lattice_model_artifact
from torch_lattice.export_trace import ExportError
from torch_lattice.ops.reference import random_sparse


def _x() -> SparseTensor:
    return random_sparse(torch.Generator().manual_seed(0), 60, 4, extent=8)


class _Branchy(torch.nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.conv = nn.SubmConv3d(4, 4, 3)
        self.relu = nn.ReLU()

    def forward(self, x: SparseTensor) -> SparseTensor:
        y = self.conv(x)
        if self.how == "if":
            if y.feats.mean() > 0:  # decided by this input
                return self.relu(y)
            return y
        if self.how == "loop":
            for _ in range(int(y.feats.abs().sum()) % 3 + 1):
                y = self.relu(y)
            return y
        if self.how == "item":
            scale = y.feats.max().item()
            return y.with_feats(y.feats / scale)
        if self.how == "rows":
            for _row in y.feats:  # a Python loop over rows
                pass
            return y
        return self.relu(y) if y.num_channels == 4 else y  # static: the channel count


@pytest.mark.parametrize(
    ("how", "what"),
    [
        ("if", r"bool\(\)"),
        ("loop", r"int\(\)"),
        ("item", r"\.item\(\)"),
        ("rows", r"iteration \(unbind\)"),
    ],
)
def test_data_dependent_control_flow_is_refused(how: str, what: str, tmp_path: Path) -> None:
    model = _Branchy(how)
    with pytest.raises(ExportError, match=rf"the model's own forward .*uses {what} on a tensor"):
        save_lattice_model_artifact(model, _x(), tmp_path / "m.lattice")
    assert not (tmp_path / "m.lattice").exists()


def test_control_flow_in_a_submodule_names_it(tmp_path: Path) -> None:
    model = torch.nn.Sequential()
    model.add_module("stem", _Wrap(_Branchy("if")))
    with pytest.raises(ExportError, match=r"module 'body\.stem\.inner' .*uses bool\(\)"):
        save_lattice_model_artifact(_Top(model), _x(), tmp_path / "m.lattice")


class _Wrap(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: Any) -> Any:
        return self.inner(x)


class _Top(torch.nn.Module):
    def __init__(self, body: torch.nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: Any) -> Any:
        body: Any = self.body
        return body.stem(x)


def test_static_branches_export(tmp_path: Path) -> None:
    report = save_lattice_model_artifact(_Branchy("static"), _x(), tmp_path / "m.lattice")
    assert report is not None

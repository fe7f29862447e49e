"""Shared fixtures of the lattice_contract tests.

``plan_payload`` hands out :class:`PayloadBuilder`, which writes native plan
payloads (the dicts ``lattice_mlir.import_plan`` returns) by hand, so the
plan freezer, type checker and executor are testable on exact, deliberately
corrupted payloads without the native module.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from lattice_contract import SCHEMA_DIGEST

SPARSE_T = (
    "!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = {}>"
)


class PayloadBuilder:
    """Builds a native-shaped plan payload one value at a time."""

    def __init__(self) -> None:
        self.args: list[dict[str, Any]] = []
        self.ops: list[dict[str, Any]] = []
        self.types: dict[str, dict[str, Any]] = {}
        self.label_types: dict[str, str] = {}
        self.returns: list[str] = []
        self.outputs: list[dict[str, Any]] = []
        self._next = 0

    # types
    def tensor(self, shape: tuple[int, ...], dtype: str) -> str:
        dims = "x".join("?" if d < 0 else str(d) for d in shape)
        text = f"tensor<{dims}x{dtype}>" if dims else f"tensor<{dtype}>"
        self.types[text] = {"kind": "tensor", "dtype": dtype, "shape": list(shape), "family": None}
        return text

    def sparse(self, dtype: str = "f16") -> str:
        text = SPARSE_T.format(dtype)
        self.types[text] = {"kind": "sparse", "dtype": dtype, "shape": None, "family": None}
        return text

    def weight_type(self, family: str, dtype: str) -> str:
        text = f"!lattice.weight<{family}, {dtype}>"
        self.types[text] = {"kind": "weight", "dtype": dtype, "shape": None, "family": family}
        return text

    # values
    def arg(self, abi_name: str, type_text: str, role: str) -> str:
        label = f"arg{len(self.args)}"
        self.args.append({"name": label, "abi_name": abi_name, "type": type_text, "role": role})
        self.label_types[label] = type_text
        return label

    def sparse_input(self, name: str = "x", dtype: str = "f16", channels: int = 4) -> str:
        """Three ABI args plus their sparse.make; returns the sparse value label."""
        c = self.arg(f"{name}_coords", self.tensor((-1, 4), "i32"), "sparse_coords")
        f = self.arg(f"{name}_features", self.tensor((-1, channels), dtype), "sparse_features")
        a = self.arg(f"{name}_active", self.tensor((1,), "i32"), "sparse_active")
        return self.op("lattice.sparse.make", [c, f, a], [self.sparse(dtype)], stride=[1, 1, 1])[0]

    def op(
        self, name: str, operands: list[str], result_types: list[str], **attrs: Any
    ) -> list[str]:
        results = []
        for t in result_types:
            label = f"v{self._next}"
            self._next += 1
            self.label_types[label] = t
            results.append(label)
        self.ops.append(
            {
                "name": name,
                "operands": list(operands),
                "results": results,
                "attrs": dict(attrs),
                "operand_types": [self.label_types[x] for x in operands],
                "result_types": list(result_types),
            }
        )
        return results

    def weight(
        self,
        key: str,
        family: str = "conv3d",
        dtype: str = "f16",
        packing: dict[str, Any] | None = None,
    ) -> str:
        layout = {
            "conv3d": "conv3d_o_xyz_i",
            "linear": "linear_o_i",
            "bias": "bias_c",
            "channel": "channel_c",
        }[family]
        attrs: dict[str, Any] = {"sym_name": key, "storage_key": key, "layout": layout}
        if packing is not None:
            attrs["packing"] = packing
        return self.op("lattice.weight", [], [self.weight_type(family, dtype)], **attrs)[0]

    def conv_attrs(self, k: int = 3, s: int = 1, p: int = 0, d: int = 1) -> dict[str, Any]:
        return {
            "kernel_size": [k, k, k],
            "stride": [s, s, s],
            "padding": [p, p, p],
            "dilation": [d, d, d],
            "accumulation": "canonical_f32",
        }

    def ret(self, label: str, abi_name: str, role: str | None = None) -> None:
        t = self.label_types[label]
        if role is None:
            role = "sparse_tensor" if t.startswith("!lattice.sparse") else "tensor"
        self.returns.append(label)
        self.outputs.append({"name": label, "abi_name": abi_name, "type": t, "role": role})

    def payload(self) -> dict[str, Any]:
        return copy.deepcopy(
            {
                "ir_version": 2,
                "schema_digest": SCHEMA_DIGEST,
                "weight_file": "weights.safetensors",
                "name": "forward",
                "args": self.args,
                "ops": self.ops,
                "returns": self.returns,
                "outputs": self.outputs,
                "types": self.types,
            }
        )


@pytest.fixture
def plan_payload() -> type[PayloadBuilder]:
    """The payload builder class (call it to start a payload)."""
    return PayloadBuilder

"""Print a lattice module whose stride mismatch sits behind a chain of N ops.

``invalid/stride.same--chain_long.mlir`` runs it: the verifier must find the
mismatch however long the chain (an earlier def-chain walk gave up after
1,024 ops and accepted such graphs).  Usage: ``long_stride_chain.py N``.
"""

from __future__ import annotations

import sys

SPARSE = "!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>"


MISMATCH = "operands must share a stride: 'lhs' is at (1, 1, 1) but 'rhs' is at (2, 2, 2)"


def module(length: int) -> str:
    lines = [
        "func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s {",
        "  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : "
        "(tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s",
        "  %coarse = lattice.pool3d %x {kernel_size = array<i64: 2, 2, 2>, mode = "
        "#lattice.pool_mode<max>, padding = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>, "
        "stride = array<i64: 2, 2, 2>} : (!s) -> !s",
    ]
    previous = "%x"
    for i in range(length):
        lines.append(
            f"  %v{i} = lattice.sparse.binary {previous}, %x {{join = #lattice.join<inner>, "
            f"op = #lattice.binary_op<add>}} : (!s, !s) -> !s"
        )
        previous = f"%v{i}"
    lines += [
        f"  // expected-error-re @+1 {{{{{MISMATCH}{{{{.*}}}}[rule stride.same]}}}}",
        f"  %y = lattice.sparse.cat {previous}, %coarse {{join = #lattice.join<inner>}} : "
        "(!s, !s) -> !s",
        "  return %y : !s",
        "}",
    ]
    return f"!s = {SPARSE}\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(module(int(sys.argv[1])))

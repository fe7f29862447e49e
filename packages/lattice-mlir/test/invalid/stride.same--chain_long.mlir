// A stride mismatch behind a chain of 3,000 ops is still found (one forward
// pass over the block, no walk cap).
// RUN: %{python} %S/../long_stride_chain.py 3000 > %t.mlir
// RUN: lattice-opt --verify-diagnostics %t.mlir

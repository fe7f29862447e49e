// Ops run in program order: an operand defined further down is rejected.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: use of SSA value %y before its definition in this region: a lattice graph defines every value before its first use (one block, in program order); move the op that defines %y above this use
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.binary %y, %y {join = #lattice.join<inner>, op = #lattice.binary_op<add>} : (!s16, !s16) -> !s16
  %y = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  return %x : !s16
}

// sparse.binary ops are add, sub, mul, maximum, minimum (max and min read as synonyms).
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: unknown binary_op 'pow'; expected one of: add, sub, mul, maximum, minimum
// CHECK-SAME: [rule attr.allowed]
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  %y = lattice.sparse.binary %x, %x {join = #lattice.join<inner>, op = #lattice.binary_op<pow>} : (!s32, !s32) -> !s32
  return %y : !s32
}

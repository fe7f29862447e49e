// Sparse values are rank 3.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: !lattice.sparse_tensor rank must be 3, got 2
// CHECK-SAME: [rule type.params]
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %x: !lattice.sparse_tensor<rank = 2, coord = batch_x_y_z, feature = row_channel, dtype = f16>) -> tensor<?x4xi32> {
  return %c : tensor<?x4xi32>
}

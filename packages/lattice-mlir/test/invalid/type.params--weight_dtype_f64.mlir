// Weight dtypes are f16, bf16, f32, i4 and i8.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: !lattice.weight dtype must be one of f16, bf16, f32, i4, i8, got f64
// CHECK-SAME: [rule type.params]
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f64>
  return %x : !s16
}

// group_size must be 32, 64 or 128 (what MLX's affine quantization supports).
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: #lattice.packing group_size must be one of 32, 64, 128 (the group sizes MLX's affine quantization supports), got 48
// CHECK-SAME: [rule weight.group_size]
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, packing = #lattice.packing<int4, group_size = 48, scale_dtype = f16, mode = affine>, storage_key = "w"} : !lattice.weight<conv3d, i4>
  return %x : !s16
}

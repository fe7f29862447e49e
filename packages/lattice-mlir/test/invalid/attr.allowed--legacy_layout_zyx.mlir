// The z-fastest legacy layout is rejected with the fix.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: unknown weight_layout 'conv3d_o_zyx_i'; expected one of: conv3d_o_xyz_i, linear_o_i, bias_c, channel_c, embedding_n_c; the z-fastest legacy layout is not part of IR v2: permute the kernel axes to (C_out, Kx, Ky, Kz, C_in)
// CHECK-SAME: [rule attr.allowed]
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_zyx_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  return %x : !s16
}

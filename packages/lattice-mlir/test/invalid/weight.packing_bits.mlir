// Packing bits must match the element type.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{packing bits int4 do not match element type i8; declare i4 for int4 packing{{.*}}[rule weight.packing_bits]}}
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, packing = #lattice.packing<int4, group_size = 32, scale_dtype = f16, mode = affine>, storage_key = "w"} : !lattice.weight<conv3d, i8>
  return %x : !s16
}

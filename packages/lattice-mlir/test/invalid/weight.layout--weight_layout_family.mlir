// The layout must match the weight family.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{declares layout linear_o_i for a weight of family conv3d; weights of family conv3d use layout conv3d_o_xyz_i{{.*}}[rule weight.layout]}}
  %w = lattice.weight @w {layout = #lattice.weight_layout<linear_o_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  return %x : !s16
}

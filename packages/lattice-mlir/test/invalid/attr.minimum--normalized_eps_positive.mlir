// Normalised convolutions need eps > 0 (the normaliser is sqrt(den + eps)).
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f32>
  // expected-error-re @+1 {{attribute 'eps' = 0 must be > 0{{.*}}[rule attr.minimum]}}
  %y = lattice.normalized_subm_conv3d %x, %w {dilation = array<i64: 1, 1, 1>, eps = 0.000000e+00 : f32, kernel_size = array<i64: 3, 3, 3>} : (!s32, !lattice.weight<conv3d, f32>) -> !s32
  return %y : !s32
}

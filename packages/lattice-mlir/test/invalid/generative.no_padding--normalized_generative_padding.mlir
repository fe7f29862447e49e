// The normalised generative transpose emits o = c*s + k: no padding or dilation.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 2, 2, 2>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f32>
  // expected-error-re @+1 {{takes no padding or dilation{{.*}}[rule generative.no_padding]}}
  %y = lattice.normalized_generative_conv_transpose3d %x, %w {eps = 1.000000e-08 : f32, kernel_size = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1>, stride = array<i64: 2, 2, 2>} : (!s32, !lattice.weight<conv3d, f32>) -> !s32
  return %y : !s32
}

// The generative transpose spells no padding (o = c*s + k: padding 0, dilation 1 implied).
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 2, 2, 2>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  // expected-error-re @+1 {{takes no padding or dilation; drop the attribute, or use lattice.conv_transpose3d{{.*}}[rule generative.no_padding]}}
  %y = lattice.generative_conv_transpose3d %x, %w {accumulation = "canonical_f32", padding = array<i64: 0, 0, 0>, kernel_size = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>} : (!s16, !lattice.weight<conv3d, f16>) -> !s16
  return %y : !s16
}

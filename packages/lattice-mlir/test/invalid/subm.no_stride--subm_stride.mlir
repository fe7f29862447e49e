// A submanifold convolution has no stride.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  // expected-error-re @+1 {{takes no stride or padding; drop the attribute{{.*}}[rule subm.no_stride]}}
  %y = lattice.subm_conv3d %x, %w {accumulation = "canonical_f32", dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 3, 3, 3>, stride = array<i64: 2, 2, 2>} : (!s16, !lattice.weight<conv3d, f16>) -> !s16
  return %y : !s16
}

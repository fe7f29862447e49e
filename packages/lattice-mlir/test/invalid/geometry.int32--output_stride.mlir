// Along the chain: input stride 2^30 times conv stride 2 is an output stride of 2^31.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1073741824, 1073741824, 1073741824>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  // expected-error-re @+1 {{output stride (input stride x stride) = 2147483648 on axis z exceeds 2147483647{{.*}}[rule geometry.int32]}}
  %y = lattice.conv3d %x, %w {accumulation = "canonical_f32", dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 1, 1, 1>, padding = array<i64: 0, 0, 0>, stride = array<i64: 1, 1, 2>} : (!s16, !lattice.weight<conv3d, f16>) -> !s16
  return %y : !s16
}

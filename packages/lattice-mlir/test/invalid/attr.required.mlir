// Accumulation is required on every convolution (optional on pools and linear).
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  // expected-error-re @+1 {{requires attribute 'accumulation'{{.*}}[rule attr.required]}}
  %y = lattice.full_conv3d %x, %w {dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>} : (!s16, !lattice.weight<conv3d, f16>) -> !s16
  return %y : !s16
}

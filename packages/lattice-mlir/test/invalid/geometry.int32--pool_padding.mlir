// Padding adds to a tap's reach: K2 with padding 2^31-1 reaches 2^31.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{(kernel_size - 1) x dilation + padding = 2147483648 on axis z exceeds 2147483647{{.*}}[rule geometry.int32]}}
  %y = lattice.pool3d %x {dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 2, 2, 2>, mode = #lattice.pool_mode<max>, padding = array<i64: 0, 0, 2147483647>, stride = array<i64: 1, 1, 1>} : (!s16) -> !s16
  return %y : !s16
}

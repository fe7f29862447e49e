// Accumulation is required on pools too.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error @+1 {{requires attribute 'accumulation'}}
  %y = lattice.pool3d %x {dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 2, 2, 2>, mode = #lattice.pool_mode<max>, padding = array<i64: 0, 0, 0>, stride = array<i64: 2, 2, 2>} : (!s16) -> !s16
  return %y : !s16
}

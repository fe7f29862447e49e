// pool_transpose3d's stride must divide the input stride.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 2, 2, 2>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{input stride (2, 2, 2) is not divisible by the op stride (4, 2, 2){{.*}}[rule stride.divides]}}
  %y = lattice.pool_transpose3d %x {dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, stride = array<i64: 4, 2, 2>} : (!s32) -> !s32
  return %y : !s32
}

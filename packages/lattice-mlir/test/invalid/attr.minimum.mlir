// global_pool batch_size is -1 (inferred at run time), 0 or a positive count.
// RUN: lattice-opt --verify-diagnostics %s
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> tensor<?x8xf32> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{attribute 'batch_size' = -2 must be >= -1{{.*}}[rule attr.minimum]}}
  %y = lattice.global_pool %x {batch_size = -2 : i64, mode = #lattice.pool_mode<sum>} : (!s32) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

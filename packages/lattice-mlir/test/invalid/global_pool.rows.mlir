// batch_size = -1 infers the row count at run time: the result rows are dynamic.
// RUN: lattice-opt --verify-diagnostics %s
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> tensor<2x8xf32> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{result tensor<2x8xf32> has static rows but batch_size = -1 infers the batch count at run time; write tensor<BxCxT> for batch_size = B, or tensor<?xCxT>{{.*}}[rule global_pool.rows]}}
  %y = lattice.global_pool %x {batch_size = -1 : i64, mode = #lattice.pool_mode<max>} : (!s32) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

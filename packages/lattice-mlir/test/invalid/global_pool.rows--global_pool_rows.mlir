// global_pool returns batch_size rows.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> tensor<2x8xf16> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{result tensor<2x8xf16> must have batch_size = 3 rows (one per batch item){{.*}}[rule global_pool.rows]}}
  %y = lattice.global_pool %x {accumulation = "canonical_f32", batch_size = 3 : i64, mode = #lattice.pool_mode<avg>} : (!s16) -> tensor<2x8xf16>
  return %y : tensor<2x8xf16>
}

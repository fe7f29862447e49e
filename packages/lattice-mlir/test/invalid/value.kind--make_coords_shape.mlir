// Coordinates are (N, 4) int32 rows.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x3xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  // expected-error-re @+1 {{operand 'coords' (#0) must be coordinates tensor<?x4xi32> (rows batch, x, y, z), got tensor<?x3xi32>{{.*}}[rule value.kind]}}
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x3xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  return %x : !s16
}

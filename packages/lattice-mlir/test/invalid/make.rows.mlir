// Static coords and features rows agree.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<5x4xi32>, %f: tensor<6x8xf16>, %a: tensor<1xi32>) -> !s16 {
  // expected-error-re @+1 {{coords has 5 rows but features has 6{{.*}}[rule make.rows]}}
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<5x4xi32>, tensor<6x8xf16>, tensor<1xi32>) -> !s16
  return %x : !s16
}

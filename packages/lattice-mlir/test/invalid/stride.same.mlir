// sparse.cat operands share a stride.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %z = lattice.sparse.make %c, %f, %a {stride = array<i64: 2, 2, 2>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{operands must share a stride: 'lhs' is at (1, 1, 1) but 'rhs' is at (2, 2, 2){{.*}}[rule stride.same]}}
  %y = lattice.sparse.cat %x, %z {join = #lattice.join<left>} : (!s16, !s16) -> !s16
  return %y : !s16
}

// The active count is tensor<1xi32>.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{result 'active' must be an active-row count tensor<1xi32>, got tensor<2xi32>{{.*}}[rule value.kind]}}
  %c2, %f2, %a2 = lattice.sparse.decompose %x : !s16 -> (tensor<?x4xi32>, tensor<?x8xf16>, tensor<2xi32>)
  return %x : !s16
}

// Features are float tensors.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xi32>) -> tensor<?x8xi32> {
  // expected-error-re @+1 {{operand 'input' (#0) must be a rank-2 float feature tensor{{.*}}[rule value.kind]}}
  %y = lattice.softmax %f : (tensor<?x8xi32>) -> tensor<?x8xi32>
  return %y : tensor<?x8xi32>
}

// call passes exactly the primitive's operands.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error-re @+1 {{primitive 'gather_rows' takes 2 operands, got 1{{.*}}[rule call.signature]}}
  %y = lattice.call %f {callee = "gather_rows"} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

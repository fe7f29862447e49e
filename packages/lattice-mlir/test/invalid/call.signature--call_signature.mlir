// call matches the primitive's exact signature.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf16>) -> tensor<?xi32> {
  // expected-error-re @+1 {{operand #0 of primitive 'argmax' is tensor<?x8xf16>; its signature is (rank-2 f32) -> rank-1 i32{{.*}}[rule call.signature]}}
  %y = lattice.call %f {callee = "argmax"} : (tensor<?x8xf16>) -> tensor<?xi32>
  return %y : tensor<?xi32>
}

// call names a registered primitive.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf32>) -> tensor<?xi32> {
  // expected-error-re @+1 {{calls unregistered primitive 'topk'; registered primitives: argmax, gather_rows{{.*}}[rule call.registered]}}
  %y = lattice.call %f {callee = "topk"} : (tensor<?x8xf32>) -> tensor<?xi32>
  return %y : tensor<?xi32>
}

// cast converts between float types only.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf32>) -> tensor<?x8xi32> {
  // expected-error-re @+1 {{converts between float types only (f16, bf16, f32), got tensor<?x8xf32> -> tensor<?x8xi32>{{.*}}[rule cast.float]}}
  %y = lattice.cast %f {rounding = #lattice.rounding<nearest_even>} : (tensor<?x8xf32>) -> tensor<?x8xi32>
  return %y : tensor<?x8xi32>
}

// cast changes only the element type.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf32>) -> tensor<?x4xf16> {
  // expected-error-re @+1 {{changes only the element type: shape of tensor<?x4xf16> must equal that of tensor<?x8xf32>{{.*}}[rule cast.shape]}}
  %y = lattice.cast %f {rounding = #lattice.rounding<upward>} : (tensor<?x8xf32>) -> tensor<?x4xf16>
  return %y : tensor<?x4xf16>
}

// Activations keep the feature shape.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf16>) -> tensor<?x16xf16> {
  // expected-error-re @+1 {{result type tensor<?x16xf16> must equal the input type tensor<?x8xf16>{{.*}}[rule shape.same]}}
  %y = lattice.activation %f {alpha = 0.00999999977 : f32, approximate = #lattice.gelu_approx<none>, beta = 1.000000e+00 : f32, kind = #lattice.activation<relu>, threshold = 2.000000e+01 : f32} : (tensor<?x8xf16>) -> tensor<?x16xf16>
  return %y : tensor<?x16xf16>
}

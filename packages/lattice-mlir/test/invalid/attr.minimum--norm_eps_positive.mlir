// eps is > 0.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf16>) -> tensor<?x8xf16> {
  %s = lattice.weight @s {layout = #lattice.weight_layout<channel_c>, storage_key = "s"} : !lattice.weight<channel, f16>
  // expected-error-re @+1 {{attribute 'eps' = 0 must be > 0{{.*}}[rule attr.minimum]}}
  %y = lattice.rms_norm %f, %s {eps = 0.000000e+00 : f32} : (tensor<?x8xf16>, !lattice.weight<channel, f16>) -> tensor<?x8xf16>
  return %y : tensor<?x8xf16>
}

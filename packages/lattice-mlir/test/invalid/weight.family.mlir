// Normalisation scales are channel weights.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf16>) -> tensor<?x8xf16> {
  %s = lattice.weight @s {layout = #lattice.weight_layout<bias_c>, storage_key = "s"} : !lattice.weight<bias, f16>
  %b = lattice.weight @b {layout = #lattice.weight_layout<bias_c>, storage_key = "b"} : !lattice.weight<bias, f16>
  %m = lattice.weight @m {layout = #lattice.weight_layout<channel_c>, storage_key = "m"} : !lattice.weight<channel, f16>
  %v = lattice.weight @v {layout = #lattice.weight_layout<channel_c>, storage_key = "v"} : !lattice.weight<channel, f16>
  // expected-error-re @+1 {{operand 'scale' (#1) must be a weight of family channel, got family bias{{.*}}[rule weight.family]}}
  %y = lattice.batch_norm %f, %s, %b, %m, %v {eps = 9.99999974E-6 : f32} : (tensor<?x8xf16>, !lattice.weight<bias, f16>, !lattice.weight<bias, f16>, !lattice.weight<channel, f16>, !lattice.weight<channel, f16>) -> tensor<?x8xf16>
  return %y : tensor<?x8xf16>
}

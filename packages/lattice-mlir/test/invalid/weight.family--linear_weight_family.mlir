// linear takes a linear_o_i weight.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf16>) -> tensor<?x4xf16> {
  %w = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
  // expected-error-re @+1 {{operand 'weight' (#1) must be a weight of family linear, got family conv3d{{.*}}[rule weight.family]}}
  %y = lattice.linear %f, %w {accumulation = "canonical_f32"} : (tensor<?x8xf16>, !lattice.weight<conv3d, f16>) -> tensor<?x4xf16>
  return %y : tensor<?x4xf16>
}

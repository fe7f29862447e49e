// voxel_size is > 0.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%p: tensor<?x3xf32>, %f: tensor<?x8xf16>, %b: tensor<?xi32>) -> !s16 {
  // expected-error @+1 {{attribute 'voxel_size' = -0.5 must be > 0}}
  %y = lattice.voxelize %p, %f, %b {reduction = #lattice.voxel_reduction<mean>, voxel_size = -5.000000e-01 : f32} : (tensor<?x3xf32>, tensor<?x8xf16>, tensor<?xi32>) -> !s16
  return %y : !s16
}

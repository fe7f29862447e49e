// Voxel sizes are positive on every axis.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%p: tensor<?x3xf32>, %f: tensor<?x8xf16>, %b: tensor<?xi32>, %n: tensor<1xi32>) -> !s16 {
  // expected-error-re @+1 {{attribute 'voxel_size' has component -0.5; every component must be > 0{{.*}}[rule attr.minimum]}}
  %y = lattice.voxelize %p, %f, %b, %n {origin = array<f64: 0.0, 0.0, 0.0>, reduction = #lattice.voxel_reduction<mean>, stride = array<i64: 1, 1, 1>, voxel_size = array<f64: 0.1, -0.5, 0.1>} : (tensor<?x3xf32>, tensor<?x8xf16>, tensor<?xi32>, tensor<1xi32>) -> !s16
  return %y : !s16
}

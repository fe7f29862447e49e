// Every point-indexed tensor of voxelize has one row per point.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%p: tensor<10x3xf32>, %f: tensor<9x8xf16>, %b: tensor<10xi32>, %n: tensor<1xi32>) -> !s16 {
  // expected-error-re @+1 {{has tensor<10x3xf32> and tensor<9x8xf16>, but every point-indexed tensor needs one row per point{{.*}}[rule rows.per_point]}}
  %y = lattice.voxelize %p, %f, %b, %n {origin = array<f64: 0.0, 0.0, 0.0>, reduction = #lattice.voxel_reduction<mean>, stride = array<i64: 1, 1, 1>, voxel_size = array<f64: 0.1, 0.1, 0.1>} : (tensor<10x3xf32>, tensor<9x8xf16>, tensor<10xi32>, tensor<1xi32>) -> !s16
  return %y : !s16
}

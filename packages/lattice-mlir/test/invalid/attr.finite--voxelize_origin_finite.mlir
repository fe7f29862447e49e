// voxelize origin values are finite.
// RUN: lattice-opt --verify-diagnostics %s
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>, %p: tensor<?x3xf32>, %b: tensor<?xi32>, %n: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{attribute 'origin' must hold finite values, got a NaN or infinity{{.*}}[rule attr.finite]}}
  %y = lattice.voxelize %p, %f, %b, %n {origin = array<f64: 0.0, 0x7FF0000000000000, 0.0>, reduction = #lattice.voxel_reduction<sum>, stride = array<i64: 1, 1, 1>, voxel_size = array<f64: 0.1, 0.1, 0.1>} : (tensor<?x3xf32>, tensor<?x8xf32>, tensor<?xi32>, tensor<1xi32>) -> !s32
  return %y : !s32
}

// devoxelize interpolation is nearest, linear or trilinear.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: unknown point_interpolation 'cubic'; expected one of: nearest, linear, trilinear
// CHECK-SAME: [rule attr.allowed]
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>, %p: tensor<?x3xf32>, %b: tensor<?xi32>, %n: tensor<1xi32>) -> tensor<?x8xf32> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  %y = lattice.devoxelize %p, %x, %b, %n {interpolation = #lattice.point_interpolation<cubic>, origin = array<f64: 0.0, 0.0, 0.0>, voxel_size = array<f64: 0.1, 0.1, 0.1>} : (tensor<?x3xf32>, !s32, tensor<?xi32>, tensor<1xi32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// trilinear_upsample3d onto a target: the target sits at input stride / stride.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>, %tc: tensor<?x4xi32>, %tf: tensor<?x1xf32>, %ta: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 2, 2, 2>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  %t = lattice.sparse.make %tc, %tf, %ta {stride = array<i64: 2, 2, 2>} : (tensor<?x4xi32>, tensor<?x1xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{target stride (2, 2, 2) must equal input stride (2, 2, 2) / stride (2, 1, 1) = (1, 2, 2){{.*}}[rule stride.target]}}
  %y = lattice.trilinear_upsample3d %x, %t {stride = array<i64: 2, 1, 1>} : (!s32, !s32) -> !s32
  return %y : !s32
}

// softmax runs over the channel axis, spelled -1 or 1.
// RUN: lattice-opt --verify-diagnostics %s
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> tensor<?x8xf32> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  %c0, %f0, %a0 = lattice.sparse.decompose %x : !s32 -> (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>)
  // expected-error-re @+1 {{attribute 'axis' = 0 is not allowed; it must be -1 or 1{{.*}}[rule attr.allowed]}}
  %y = lattice.softmax %f0 {axis = 0 : i64} : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

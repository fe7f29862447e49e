// sparse.crop's box must be non-empty on every axis.
// RUN: lattice-opt --verify-diagnostics %s
!s = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s
  // expected-error-re @+1 {{box lower = (0, 0, 0), upper = (8, 0, 8) is empty on axis y{{.*}}[rule crop.box]}}
  %y = lattice.sparse.crop %x {lower = array<i64: 0, 0, 0>, upper = array<i64: 8, 0, 8>} : (!s) -> !s
  return %y : !s
}

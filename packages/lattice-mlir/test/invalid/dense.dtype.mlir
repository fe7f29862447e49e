// sparse.to_dense's result has the input's element type.
// RUN: lattice-opt --verify-diagnostics %s
!s = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> tensor<2x32x6x7xf16> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s
  // expected-error-re @+1 {{must have the input's element type{{.*}}[rule dense.dtype]}}
  %d = lattice.sparse.to_dense %x {spatial_shape = array<i64: 7, 6, 4>, batch_size = 2 : i64, layout = "b_cz_y_x"} : (!s) -> tensor<2x32x6x7xf16>
  return %d : tensor<2x32x6x7xf16>
}

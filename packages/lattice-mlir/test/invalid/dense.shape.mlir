// sparse.to_dense's result has the extents its layout, batch_size and spatial_shape give.
// RUN: lattice-opt --verify-diagnostics %s
!s = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> tensor<2x8x5x6x7xf32> {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s
  // expected-error-re @+1 {{must have shape (2, C, 4, 6, 7){{.*}}[rule dense.shape]}}
  %d = lattice.sparse.to_dense %x {spatial_shape = array<i64: 7, 6, 4>, batch_size = 2 : i64, layout = "b_c_z_y_x"} : (!s) -> tensor<2x8x5x6x7xf32>
  return %d : tensor<2x8x5x6x7xf32>
}

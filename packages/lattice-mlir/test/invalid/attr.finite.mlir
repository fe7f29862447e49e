// sparse.binary fills are finite f32 values.
// RUN: lattice-opt --verify-diagnostics %s
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{attribute 'lhs_fill' must be a finite f32, got a NaN or infinity{{.*}}[rule attr.finite]}}
  %y = lattice.sparse.binary %x, %x {join = #lattice.join<outer>, lhs_fill = 0x7F800000 : f32, op = #lattice.binary_op<maximum>, rhs_fill = 0.0 : f32} : (!s32, !s32) -> !s32
  return %y : !s32
}

// Unknown activation kinds list the allowed ones.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: unknown activation 'swish'; expected one of: relu, leaky_relu, gelu, silu, sigmoid, tanh, softplus, elu, hardswish, identity
// CHECK-SAME: [rule attr.allowed]
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%f: tensor<?x8xf16>) -> tensor<?x8xf16> {
  %y = lattice.activation %f {alpha = 0.00999999977 : f32, approximate = #lattice.gelu_approx<none>, beta = 1.000000e+00 : f32, kind = #lattice.activation<swish>, threshold = 2.000000e+01 : f32} : (tensor<?x8xf16>) -> tensor<?x8xf16>
  return %y : tensor<?x8xf16>
}

// Unknown ops list the ops the dialect defines.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: custom op 'lattice.dropout' is not defined by the lattice dialect; use one of: lattice.activation, lattice.batch_norm
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %y = lattice.dropout %x : (!s16) -> !s16
  return %y : !s16
}

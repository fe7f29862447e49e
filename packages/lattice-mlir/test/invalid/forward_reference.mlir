// A use before the definition is rejected before MLIR parses the module (MLIR
// 19's parser can free IR twice on such inputs; a lattice graph never has one).
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: use of SSA value %0 before its definition in this region
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
module {
  %4 = "lattice.sparse.cat"(%0, %1) <{join = #lattice.join<inner>}> : (!s16, !s16) -> !s16
  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
    %0 = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
    %1 = lattice.weight @w {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "w"} : !lattice.weight<conv3d, f16>
    return %0 : !s16
  }
}

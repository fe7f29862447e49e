// Quantized op variants are rejected: quantization is weight packing.
// RUN: not lattice-opt %s 2>&1 | FileCheck %s
// CHECK: error: custom op 'lattice.quantized_conv3d' is not defined by the lattice dialect; quantized op variants are not part of the dialect: quantization is weight packing
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  %y = lattice.quantized_conv3d %x {bits = 4 : i64} : (!s16) -> !s16
  return %y : !s16
}

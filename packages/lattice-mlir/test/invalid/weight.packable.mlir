// Bias and channel weights are never packed.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{packs a weight of family bias, which is never quantized{{.*}}[rule weight.packable]}}
  %b = lattice.weight @b {layout = #lattice.weight_layout<bias_c>, packing = #lattice.packing<int8, group_size = 32, scale_dtype = f16, mode = affine>, storage_key = "b"} : !lattice.weight<bias, i8>
  return %x : !s16
}

// Embedding tables are dense: only conv3d and linear weights are packed.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{packs a weight of family embedding, which is never quantized; store this weight dense (packing = #lattice.packing<dense>){{.*}}[rule weight.packable]}}
  %w = lattice.weight @w {layout = #lattice.weight_layout<embedding_n_c>, packing = #lattice.packing<int4, group_size = 32, scale_dtype = f16, mode = affine>, storage_key = "w"} : !lattice.weight<embedding, f16>
  return %x : !s16
}

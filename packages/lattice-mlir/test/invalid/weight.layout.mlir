// An embedding table is stored as embedding_n_c (rows, channels).
// RUN: lattice-opt --verify-diagnostics %s
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>) -> !s32 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s32
  // expected-error-re @+1 {{declares layout channel_c for a weight of family embedding; weights of family embedding use layout embedding_n_c{{.*}}[rule weight.layout]}}
  %w = lattice.weight @table {layout = #lattice.weight_layout<channel_c>, packing = #lattice.packing<dense>, storage_key = "table"} : !lattice.weight<embedding, f32>
  return %x : !s32
}

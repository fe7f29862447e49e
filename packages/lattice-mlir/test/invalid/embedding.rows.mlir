// embedding_lookup returns one row per index.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%i: tensor<5xi32>) -> tensor<4x4xf32> {
  %w = lattice.weight @w {layout = #lattice.weight_layout<embedding_n_c>, storage_key = "w"} : !lattice.weight<embedding, f32>
  // expected-error-re @+1 {{returns 4 rows for 5 indices{{.*}}[rule embedding.rows]}}
  %y = lattice.embedding_lookup %i, %w : (tensor<5xi32>, !lattice.weight<embedding, f32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// The rows keep the table's element type.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%i: tensor<?xi32>) -> tensor<?x4xf16> {
  %w = lattice.weight @w {layout = #lattice.weight_layout<embedding_n_c>, storage_key = "w"} : !lattice.weight<embedding, f32>
  // expected-error-re @+1 {{mixes element types{{.*}}[rule dtype.same]}}
  %y = lattice.embedding_lookup %i, %w : (tensor<?xi32>, !lattice.weight<embedding, f32>) -> tensor<?x4xf16>
  return %y : tensor<?x4xf16>
}

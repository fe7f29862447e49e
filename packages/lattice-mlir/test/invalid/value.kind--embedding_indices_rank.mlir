// embedding_lookup's indices are a rank-1 i32 vector.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%i: tensor<?x1xi32>) -> tensor<?x4xf32> {
  %w = lattice.weight @w {layout = #lattice.weight_layout<embedding_n_c>, storage_key = "w"} : !lattice.weight<embedding, f32>
  // expected-error-re @+1 {{operand 'indices' (#0) must be{{.*}}[rule value.kind]}}
  %y = lattice.embedding_lookup %i, %w : (tensor<?x1xi32>, !lattice.weight<embedding, f32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

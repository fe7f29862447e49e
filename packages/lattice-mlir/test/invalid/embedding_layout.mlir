// An embedding weight uses layout embedding_n_c.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%i: tensor<?xi32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{must use layout embedding_n_c}}
  %w = lattice.weight @w {layout = #lattice.weight_layout<linear_o_i>, storage_key = "w"} : !lattice.weight<embedding, f32>
  %y = lattice.embedding_lookup %i, %w : (tensor<?xi32>, !lattice.weight<embedding, f32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

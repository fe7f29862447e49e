// embedding_lookup reads a weight of family embedding.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%i: tensor<?xi32>) -> tensor<?x4xf32> {
  %w = lattice.weight @w {layout = #lattice.weight_layout<linear_o_i>, storage_key = "w"} : !lattice.weight<linear, f32>
  // expected-error-re @+1 {{operand 'weight' (#1) must be{{.*}}[rule weight.family]}}
  %y = lattice.embedding_lookup %i, %w : (tensor<?xi32>, !lattice.weight<linear, f32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// linear maps each feature row to one row: the result keeps the input's rows.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%f: tensor<4x8xf32>) -> tensor<5x3xf32> {
  %w = lattice.weight @w {layout = #lattice.weight_layout<linear_o_i>, storage_key = "w"} : !lattice.weight<linear, f32>
  // expected-error-re @+1 {{result rows (tensor<5x3xf32>) must equal input rows (tensor<4x8xf32>){{.*}}[rule linear.rows]}}
  %y = lattice.linear %f, %w : (tensor<4x8xf32>, !lattice.weight<linear, f32>) -> tensor<5x3xf32>
  return %y : tensor<5x3xf32>
}

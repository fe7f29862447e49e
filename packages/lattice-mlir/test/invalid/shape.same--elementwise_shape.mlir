// elementwise returns the shape of its input.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x3xf32> {
  // expected-error-re @+1 {{result type tensor<?x3xf32> must equal the input type tensor<?x4xf32>{{.*}}[rule shape.same]}}
  %y = lattice.elementwise %x {kind = "round"} : (tensor<?x4xf32>) -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}

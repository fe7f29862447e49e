// elementwise returns the shape of its input.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x3xf32> {
  // expected-error @+1 {{must return the shape of its input}}
  %y = lattice.elementwise %x {kind = "round"} : (tensor<?x4xf32>) -> tensor<?x3xf32>
  return %y : tensor<?x3xf32>
}

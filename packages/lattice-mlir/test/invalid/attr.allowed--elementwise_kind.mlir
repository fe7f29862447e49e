// elementwise kind is "exp" or "round".
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error-re @+1 {{attribute 'kind'{{.*}}[rule attr.allowed]}}
  %y = lattice.elementwise %x {kind = "log"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// elementwise maps rank-2 feature tensors.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%x: tensor<?x4x2xf32>) -> tensor<?x4x2xf32> {
  // expected-error-re @+1 {{operand 'input' (#0) must be{{.*}}[rule value.kind]}}
  %y = lattice.elementwise %x {kind = "round"} : (tensor<?x4x2xf32>) -> tensor<?x4x2xf32>
  return %y : tensor<?x4x2xf32>
}

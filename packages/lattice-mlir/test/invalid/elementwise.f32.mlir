// elementwise takes f32 only.
// RUN: lattice-opt --verify-diagnostics %s
func.func @forward(%x: tensor<?x4xf16>) -> tensor<?x4xf16> {
  // expected-error-re @+1 {{takes f32 features only, got f16{{.*}}[rule elementwise.f32]}}
  %y = lattice.elementwise %x {kind = "exp"} : (tensor<?x4xf16>) -> tensor<?x4xf16>
  return %y : tensor<?x4xf16>
}

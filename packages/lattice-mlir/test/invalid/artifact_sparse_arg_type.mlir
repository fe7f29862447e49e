// sparse_active arguments are tensor<1xi32>.
// RUN: sed -e 's/@SCHEMA_DIGEST@/%{digest}/' %s | lattice-opt --lattice-verify-artifact --verify-diagnostics -
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
module attributes {lattice.input_names = ["x_coords", "x_features", "x_active"], lattice.input_roles = ["sparse_coords", "sparse_features", "sparse_active"], lattice.ir_version = 2 : i64, lattice.output_names = ["y"], lattice.output_roles = ["tensor"], lattice.schema_digest = "@SCHEMA_DIGEST@", lattice.weight_file = "weights.safetensors"} {
  // expected-error @+1 {{lattice artifact: argument #2 has role sparse_active and must be tensor<1xi32>, got tensor<2xi32>}}
  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<2xi32>) -> tensor<?x8xf16> {
    return %f : tensor<?x8xf16>
  }
}

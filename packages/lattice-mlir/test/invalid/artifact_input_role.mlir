// Input roles come from the closed set.
// RUN: sed -e 's/@SCHEMA_DIGEST@/%{digest}/' %s | lattice-opt --lattice-verify-artifact --verify-diagnostics -
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
// expected-error @+1 {{lattice artifact: input role 'count' of argument #2 is not one of: tensor, sparse_coords, sparse_features, sparse_active}}
module attributes {lattice.input_names = ["x_coords", "x_features", "x_active"], lattice.input_roles = ["sparse_coords", "sparse_features", "count"], lattice.ir_version = 2 : i64, lattice.output_names = ["y"], lattice.output_roles = ["sparse_tensor"], lattice.schema_digest = "@SCHEMA_DIGEST@", lattice.weight_file = "weights.safetensors"} {
  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
    %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
    return %x : !s16
  }
}

// Entry arguments are builtin tensors, never sparse values.
// RUN: sed -e 's/@SCHEMA_DIGEST@/%{digest}/' %s | lattice-opt --lattice-verify-artifact --verify-diagnostics -
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
module attributes {lattice.input_names = ["x"], lattice.input_roles = ["tensor"], lattice.ir_version = 2 : i64, lattice.output_names = ["y"], lattice.output_roles = ["sparse_tensor"], lattice.schema_digest = "@SCHEMA_DIGEST@", lattice.weight_file = "weights.safetensors"} {
  // expected-error @+1 {{lattice artifact: argument #0 has type !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>; entry arguments are builtin ranked tensors}}
  func.func @forward(%x: !s16) -> !s16 {
    return %x : !s16
  }
}

module attributes {lattice.input_names = ["c", "f", "a"], lattice.input_roles = ["tensor", "tensor", "tensor"], lattice.ir_version = 2 : i64, lattice.output_names = ["y"], lattice.output_roles = ["sparse_tensor"], lattice.schema_digest = "0000000000000000000000000000000000000000000000000000000000000000", lattice.weight_file = "weights.safetensors"} {
  func.func @forward(%arg0: tensor<?x4xi32>, %arg1: tensor<?x8xf32>, %arg2: tensor<1xi32>) -> !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32> {
    %0 = lattice.sparse.make %arg0, %arg1, %arg2 {stride = array<i64: 4294967296, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
    return %0 : !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
  }
}


module attributes {lattice.input_names = ["x\FF_coords", "x_features", "x_active"], lattice.input_roles = ["sparse_coords", "sparse_features", "sparse_active"], lattice.ir_version = 2 : i64, lattice.output_names = ["y"], lattice.output_roles = ["sparse_tensor"], lattice.schema_digest = "0000000000000000000000000000000000000000000000000000000000000000", lattice.weight_file = "weights.safetensors"} {
  func.func @forward(%arg0: tensor<?x4xi32>, %arg1: tensor<?x4xf32>, %arg2: tensor<1xi32>) -> !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32> {
    %0 = lattice.sparse.make %arg0, %arg1, %arg2 {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x4xf32>, tensor<1xi32>) -> !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
    %1 = lattice.weight @conv.weight {layout = #lattice.weight_layout<conv3d_o_xyz_i>, storage_key = "conv.weight"} : !lattice.weight<conv3d, f32>
    %2 = lattice.weight @conv.bias {layout = #lattice.weight_layout<bias_c>, storage_key = "conv.bias"} : !lattice.weight<bias, f32>
    %3 = lattice.conv3d %0, %1, %2 {accumulation = "canonical_f32", dilation = array<i64: 1, 1, 1>, kernel_size = array<i64: 3, 1, 3>, padding = array<i64: 1, 0, 1>, stride = array<i64: 2, 1, 2>} : (!lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>, !lattice.weight<conv3d, f32>, !lattice.weight<bias, f32>) -> !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
    return %3 : !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
  }
}


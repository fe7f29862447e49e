// A module of a known other producer (mlx-lattice 0.6) is not loaded: the
// diagnostic names the producer and `lattice migrate`.
// RUN: lattice-opt --lattice-verify-artifact --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
!s32 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
// expected-error @+1 {{is the schema digest of mlx-lattice 0.6.x: the artifact was written by that producer and is not loaded as is; migrate it once with `lattice migrate SRC DST`}}
module attributes {lattice.input_names = ["x_coords", "x_features", "x_active"], lattice.input_roles = ["sparse_coords", "sparse_features", "sparse_active"], lattice.ir_version = 2 : i64, lattice.output_names = ["y"], lattice.output_roles = ["sparse_tensor"], lattice.schema_digest = "1380f1e819fc0eb1af587202ecec3c14ec2c981d249333c5061f0263f82072ad", lattice.weight_file = "weights.safetensors"} {
  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
    %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
    return %x : !s16
  }
}

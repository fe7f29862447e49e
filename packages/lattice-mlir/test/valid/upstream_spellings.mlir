// Hand-written: spellings Lattice reads besides its own printed form. The
// version may have any integer type; max/min are synonyms printed as
// maximum/minimum; a weight without packing is dense; a packed weight may be
// declared with its dequantized float type. The printed form is a fixed point.
// RUN: sed -e 's/@SCHEMA_DIGEST@/%{digest}/' %s > %t.mlir
// RUN: lattice-opt --lattice-verify-artifact %t.mlir > %t.out
// RUN: lattice-opt --lattice-verify-artifact %t.out | diff - %t.out
// RUN: FileCheck %s < %t.out
// CHECK: lattice.ir_version = 2 : i32
// CHECK: op = #lattice.binary_op<maximum>
// CHECK: op = #lattice.binary_op<minimum>
// CHECK: lattice.weight @head {layout = #lattice.weight_layout<linear_o_i>, storage_key = "head"} : !lattice.weight<linear, f32>
// CHECK: packing = #lattice.packing<int8, group_size = 32, scale_dtype = f16, mode = affine>, storage_key = "proj"} : !lattice.weight<linear, f32>
// CHECK: lattice.linear %features, %[[H:.*]] : (tensor<?x8xf32>, !lattice.weight<linear, f32>) -> tensor<?x4xf32>
!s = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f32>
module attributes {
  lattice.ir_version = 2 : i32,
  lattice.schema_digest = "@SCHEMA_DIGEST@",
  lattice.input_names = ["x_coords", "x_features", "x_active"],
  lattice.input_roles = ["sparse_coords", "sparse_features", "sparse_active"],
  lattice.output_names = ["y", "logits", "projected"],
  lattice.output_roles = ["sparse_tensor", "tensor", "tensor"],
  lattice.weight_file = "weights.safetensors"
} {
  func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf32>, %a: tensor<1xi32>)
      -> (!s, tensor<?x4xf32>, tensor<?x4xf32>) {
    %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>) -> !s
    %m = lattice.sparse.binary %x, %x {op = #lattice.binary_op<max>, join = #lattice.join<outer>} : (!s, !s) -> !s
    %n = lattice.sparse.binary %m, %x {op = #lattice.binary_op<min>, join = #lattice.join<left>} : (!s, !s) -> !s
    %coords, %features, %active = lattice.sparse.decompose %n : !s -> (tensor<?x4xi32>, tensor<?x8xf32>, tensor<1xi32>)
    %h = lattice.weight @head {storage_key = "head", layout = #lattice.weight_layout<linear_o_i>} : !lattice.weight<linear, f32>
    %logits = lattice.linear %features, %h : (tensor<?x8xf32>, !lattice.weight<linear, f32>) -> tensor<?x4xf32>
    %q = lattice.weight @proj {storage_key = "proj", layout = #lattice.weight_layout<linear_o_i>, packing = #lattice.packing<int8, group_size = 32, scale_dtype = f16, mode = affine>} : !lattice.weight<linear, f32>
    %p = lattice.linear %features, %q : (tensor<?x8xf32>, !lattice.weight<linear, f32>) -> tensor<?x4xf32>
    return %n, %logits, %p : !s, tensor<?x4xf32>, tensor<?x4xf32>
  }
}

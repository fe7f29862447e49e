// #lattice.packing<dense> on an i8 weight: a packed element type needs packed packing.
// RUN: lattice-opt --verify-diagnostics %s
!s16 = !lattice.sparse_tensor<rank = 3, coord = batch_x_y_z, feature = row_channel, dtype = f16>
func.func @forward(%c: tensor<?x4xi32>, %f: tensor<?x8xf16>, %a: tensor<1xi32>) -> !s16 {
  %x = lattice.sparse.make %c, %f, %a {stride = array<i64: 1, 1, 1>} : (tensor<?x4xi32>, tensor<?x8xf16>, tensor<1xi32>) -> !s16
  // expected-error-re @+1 {{has packed element type i8 but no packed packing attribute; add packing = #lattice.packing<int4|int8{{.*}}[rule weight.packed_dtype]}}
  %d = lattice.weight @d {layout = #lattice.weight_layout<conv3d_o_xyz_i>, packing = #lattice.packing<dense>, storage_key = "d"} : !lattice.weight<conv3d, i8>
  return %x : !s16
}

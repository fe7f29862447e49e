"""mlx_lattice: sparse 3D convolutional networks on MLX."""

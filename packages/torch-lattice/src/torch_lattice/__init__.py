"""torch_lattice: sparse 3D convolutional networks on PyTorch, and the lattice exporter."""

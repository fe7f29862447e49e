"""lattice_conformance: proof that the torch and MLX runtimes agree on an artifact."""

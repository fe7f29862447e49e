"""lattice_conformance: proof that the torch and MLX runtimes agree on an artifact."""

from lattice_contract.artifact import distribution_version

__all__ = ["__version__"]

__version__ = distribution_version("lattice_conformance")

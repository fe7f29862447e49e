"""lattice_tools: the ``lattice`` command and what it runs (demo, inspect, migrate, view).

The user-facing tools sit above every other Lattice package: they may import
the contract, both runtimes and the conformance package, and nothing below
imports them.
"""

from lattice_contract.artifact import distribution_version

__all__ = ["__version__"]

__version__ = distribution_version("lattice_tools")

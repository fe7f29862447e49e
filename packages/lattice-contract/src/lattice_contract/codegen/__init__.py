"""Generators run at build time: the C++ dialect's TableGen and tables, the builder's methods.

The top layer of the contract.  ``python -m lattice_contract.codegen.tablegen``
writes ``LatticeDialect.td`` and the schema tables the native verifier is
compiled from; ``python -m lattice_contract.codegen.builder_methods``
regenerates :mod:`lattice_contract.builder.methods`.
"""

from __future__ import annotations

# Nothing is imported here: each generator runs as ``python -m`` on its own
# module, and importing them from the face would load them twice.
__all__: list[str] = []

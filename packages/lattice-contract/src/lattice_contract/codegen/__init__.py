"""Generators run at build time: the C++ dialect's TableGen and tables, the builder's methods.

The top layer of the contract.  ``python -m lattice_contract.codegen.tablegen``
writes ``LatticeDialect.td`` and the schema tables the native verifier is
compiled from; ``python -m lattice_contract.codegen.builder_methods``
regenerates :mod:`lattice_contract.builder.methods`.
"""

from __future__ import annotations

from lattice_contract.codegen import tablegen
from lattice_contract.codegen.builder_methods import (
    TARGET,
    render_methods,
)
from lattice_contract.codegen.tablegen import (
    render_all,
)

__all__ = [
    "TARGET",
    "render_all",
    "render_methods",
    "tablegen",
]

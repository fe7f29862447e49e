"""The public names both runtimes' ``nn`` packages export, listed once.

``mlx_lattice.nn.__all__`` and ``torch_lattice.nn.__all__`` are
:data:`NN_NAMES` plus the few names only one runtime has (its own module
base, torch's ``Dropout`` and ``SyncBatchNorm``), which each runtime lists
itself.  The declared layers (:mod:`lattice_contract.frontend.nn_layers`,
:mod:`~lattice_contract.frontend.nn_activations`, :mod:`~lattice_contract.frontend.nn_convs`,
:mod:`~lattice_contract.frontend.nn_features`)
contribute their class names; :data:`RUNTIME_LAYER_NAMES` are the modules
each runtime writes wholly itself.  A test checks that each runtime exports
exactly this list and that each exported layer subclasses its declaration.
"""

from __future__ import annotations

import lattice_contract.frontend.nn_activations as nn_activations
import lattice_contract.frontend.nn_convs as nn_convs
import lattice_contract.frontend.nn_features as nn_features
import lattice_contract.frontend.nn_layers as nn_layers

__all__ = ["DECLARED_LAYERS", "NN_NAMES", "RUNTIME_LAYER_NAMES"]

DECLARED_LAYERS: dict[str, type[nn_layers.Layer]] = {
    **nn_layers.layer_classes(vars(nn_layers)),
    **nn_layers.layer_classes(vars(nn_activations)),
    **nn_layers.layer_classes(vars(nn_convs)),
    **nn_layers.layer_classes(vars(nn_features)),
}
"""Every public layer declared in the contract, by the name both runtimes give it."""

RUNTIME_LAYER_NAMES: tuple[str, ...] = ("BatchNorm", "Sequential")
"""Modules both runtimes offer but write wholly themselves: torch's ``BatchNorm`` trains
(batch statistics, running updates) where MLX's is inference-only, and each ``Sequential``
is its library's container."""

NN_NAMES: tuple[str, ...] = tuple(sorted([*DECLARED_LAYERS, *RUNTIME_LAYER_NAMES]))
"""The names both runtimes' ``nn`` packages export."""

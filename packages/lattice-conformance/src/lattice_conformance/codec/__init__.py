"""A lossless geometry codec for voxel clouds: octree + context models + the neural artifact.

``encode_voxels`` / ``decode_voxels`` are the codec; ``NeuralModel`` runs the
exported geometry artifact on MLX or torch; ``baselines`` computes what a user
would otherwise have (LZMA, order-0 entropy, Draco) on the same voxel set.
"""

from lattice_conformance.codec.codec import EncodeResult, decode_voxels, encode_voxels, read_header
from lattice_conformance.codec.format import FORMAT_VERSION, CodecFormatError
from lattice_conformance.codec.neural import NeuralModel

__all__ = [
    "FORMAT_VERSION",
    "CodecFormatError",
    "EncodeResult",
    "NeuralModel",
    "decode_voxels",
    "encode_voxels",
    "read_header",
]

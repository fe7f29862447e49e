"""Packed affine weights: upstream's stored layout, MLX bits, round trips, conv and linear."""

from __future__ import annotations

import pytest
import torch
from torch_lattice import ops
from torch_lattice.ops import QuantizedWeight, quantize_weight
from torch_lattice.ops.reference import random_sparse


def test_int4_packing_matches_a_hand_computed_word() -> None:
    # values -15..0 twice: the edge of larger magnitude (-15) becomes the bias, scale 1, codes
    # 0..15; code i of a word sits in bits [4i, 4i+4): word 0 = 0x76543210, word 1 = 0xFEDCBA98
    w = torch.cat([torch.arange(16.0), torch.arange(16.0)])[None, :] - 15.0
    q = quantize_weight(w, bits=4, group_size=32, scale_dtype=torch.float32)
    assert q.weight.dtype == torch.uint32 and tuple(q.weight.shape) == (1, 1, 4)
    words = q.weight.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    assert words.tolist() == [[[0x76543210, 0xFEDCBA98, 0x76543210, 0xFEDCBA98]]]
    assert q.scales.tolist() == [[[1.0]]] and q.biases.tolist() == [[[-15.0]]]
    assert torch.equal(q.dequantize(), w)
    # values 0..15: the larger edge (15) is the bias and the scale is -1, so codes run backwards
    # (what mx.quantize produces for this input: 0x89abcdef, 0x01234567)
    q = quantize_weight(w + 15.0, bits=4, group_size=32, scale_dtype=torch.float32)
    words = q.weight.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    assert words.tolist() == [[[0x89ABCDEF, 0x01234567, 0x89ABCDEF, 0x01234567]]]
    assert q.scales.tolist() == [[[-1.0]]] and q.biases.tolist() == [[[15.0]]]
    assert torch.equal(q.dequantize(), w + 15.0)


def test_int8_packing_little_endian_bytes() -> None:
    codes = torch.tensor([1, 2, 3, 250] + [0] * 28, dtype=torch.int64)
    words = (codes.reshape(8, 4) << torch.tensor([0, 8, 16, 24])).sum(1)
    packed = words.to(torch.int32).view(torch.uint32)[None, None]
    q = QuantizedWeight(packed, torch.ones(1, 1, 1), torch.zeros(1, 1, 1), 8, 32)
    assert q.codes()[0, 0, :5].tolist() == [1, 2, 3, 250, 0]
    assert int(words[0]) == 0xFA030201


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group", [32, 64])
def test_round_trip_error_is_within_one_step(bits: int, group: int) -> None:
    g = torch.Generator().manual_seed(bits + group)
    w = torch.randn(6, 3, 3, 3, 128, generator=g)
    q = quantize_weight(w, bits=bits, group_size=group, scale_dtype=torch.float32)
    assert tuple(q.weight.shape) == (27, 128 * bits // 32, 6)  # K > 1: (K, words, C_out)
    assert tuple(q.scales.shape) == (27, 128 // group, 6)
    assert q.shape == tuple(w.shape)
    err = (q.dequantize() - w).abs().reshape(6, 27, -1, group)
    step = q.scales.abs().permute(2, 0, 1)[..., None]  # (C_out, K, groups, 1)
    assert bool((err <= step + 1e-5).all())  # MLX rescales so one edge is exact


def test_c_in_is_padded_and_the_packing_is_read_back_by_the_consumer() -> None:
    w = torch.randn(4, 1, 1, 1, 3, generator=torch.Generator().manual_seed(1))
    q = quantize_weight(w, bits=8, group_size=32, scale_dtype=torch.float16)
    assert tuple(q.weight.shape) == (1, 4, 8) and tuple(q.scales.shape) == (1, 4, 1)
    read = QuantizedWeight(q.weight, q.scales, q.biases, 8, 32)  # as from a file: no shape
    assert read.padded_in_channels == 32 and read.taps == 1 and read.out_channels == 4
    torch.testing.assert_close(read.dequantize_as((4, 1, 1, 1, 3)), q.dequantize())
    with pytest.raises(ValueError, match="dequantize_as"):
        read.dequantize()
    with pytest.raises(ValueError, match="cannot hold"):
        read.dequantize_as((4, 1, 1, 1, 40))


def test_quantized_conv_and_linear_equal_dequantized_weights() -> None:
    g = torch.Generator().manual_seed(3)
    x = random_sparse(g, 30, 32, extent=5)
    w = torch.randn(8, 3, 3, 3, 32, generator=g)
    q = quantize_weight(w, bits=4, group_size=32, scale_dtype=torch.float16)
    a = ops.subm_conv3d(x, q, kernel_size=3)
    b = ops.subm_conv3d(x, q.dequantize(), kernel_size=3)
    torch.testing.assert_close(a.feats, b.feats)
    lw = quantize_weight(torch.randn(5, 32, generator=g), bits=8, group_size=32)
    torch.testing.assert_close(ops.linear(x.feats, lw), x.feats @ lw.dequantize().t())


def test_bad_packings_are_rejected() -> None:
    with pytest.raises(ValueError, match="bits"):
        quantize_weight(torch.randn(2, 32), bits=3, group_size=32)
    with pytest.raises(ValueError, match="group_size"):
        quantize_weight(torch.randn(2, 32), bits=4, group_size=16)
    with pytest.raises(ValueError, match="linear"):
        quantize_weight(torch.randn(2, 3, 48), bits=4, group_size=32)
    good = quantize_weight(torch.randn(2, 64), bits=4, group_size=32)
    with pytest.raises(TypeError, match="uint32"):
        QuantizedWeight(good.weight.view(torch.int32), good.scales, good.biases, 4, 32)
    with pytest.raises(ValueError, match="need"):
        QuantizedWeight(good.weight, good.scales[:, :, :1], good.biases[:, :, :1], 4, 32)
    with pytest.raises(ValueError, match=r"\(K, C_out"):
        QuantizedWeight(good.weight[0], good.scales[0], good.biases[0], 4, 32)
    with pytest.raises(TypeError, match="biases"):
        QuantizedWeight(good.weight, good.scales, good.biases.half(), 4, 32)

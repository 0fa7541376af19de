"""Chapter 4's block ledger and chapter 5's HBM traffic counts, against modules and brute force."""

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from lib.blocks import Block, swiglu_hidden
from lib.costs import block_weights, flash_attention_io, layer_flops, standard_attention_io


def _matrix_weights(block: nn.Module) -> int:
    return sum(m.weight.numel() for m in block.modules() if isinstance(m, nn.Linear))


@pytest.mark.parametrize(
    "d, heads, kv_heads, ffn",
    [(64, 4, None, "mlp"), (96, 6, 2, "mlp"), (128, 8, 2, "swiglu"), (64, 4, 1, "swiglu")],
)
def test_block_weights_match_a_real_block(d, heads, kv_heads, ffn):
    block = Block(d, heads, n_kv_heads=kv_heads, ffn=ffn, bias=False)
    hidden = swiglu_hidden(d) if ffn == "swiglu" else 4 * d
    ledger = block_weights(d, n_heads=heads, n_kv_heads=kv_heads, hidden=hidden, gated=ffn == "swiglu")
    assert ledger.total == _matrix_weights(block)
    assert ledger.attention == _matrix_weights(block.attn)


def test_twelve_d_squared_and_chapter_5s_linear_term():
    d, n = 256, 100
    ledger = block_weights(d, n_heads=8)
    assert (ledger.attention, ledger.ffn, ledger.total) == (4 * d * d, 8 * d * d, 12 * d * d)
    assert ledger.forward_flops(n) == 24 * n * d * d == layer_flops(n, d).linear


def test_forward_flops_match_torch_flop_counter():
    d, heads, n = 64, 4, 10
    block = Block(d, heads, n_kv_heads=2, ffn="swiglu", bias=False)
    block.attn.fused = False  # plain matmuls, so the counter sees the attention products too
    with FlopCounterMode(display=False) as counter:
        block(torch.randn(1, n, d))
    ledger = block_weights(d, n_heads=heads, n_kv_heads=2, hidden=swiglu_hidden(d), gated=True)
    pairwise = layer_flops(n, d).pairwise
    assert counter.get_total_flops() == ledger.forward_flops(n) + pairwise


def test_block_weights_rejects_bad_heads():
    with pytest.raises(ValueError, match="n_kv_heads"):
        block_weights(64, n_heads=4, n_kv_heads=3)


def _simulated_flash_io(n, d, block_q, block_k):
    """Walk Algorithm 1's loops and add up every tile it loads from and stores to HBM."""
    moved = 0
    for k_start in range(0, n, block_k):
        bk = min(block_k, n - k_start)
        moved += 2 * bk * d  # load K_j, V_j
        for q_start in range(0, n, block_q):
            bq = min(block_q, n - q_start)
            moved += 2 * bq * d + 2 * bq  # load Q_i, O_i, l_i, m_i
            moved += bq * d + 2 * bq  # store O_i, l_i, m_i
    return moved


@pytest.mark.parametrize("n, d, sram", [(256, 16, 1024), (1000, 64, 20000), (4096, 64, 98304), (300, 128, 5000)])
def test_flash_io_equals_the_loop_it_models(n, d, sram):
    io = flash_attention_io(n, d, sram)
    assert io.block_k == -(-sram // (4 * d)) and io.block_q == min(io.block_k, d)
    assert io.elements == _simulated_flash_io(n, d, io.block_q, io.block_k)


def test_flash_io_scales_as_n2_d2_over_m():
    base = flash_attention_io(8192, 64, 65536).elements
    assert flash_attention_io(8192, 64, 2 * 65536).elements == pytest.approx(base / 2, rel=0.05)
    assert flash_attention_io(2 * 8192, 64, 65536).elements == pytest.approx(4 * base, rel=0.05)
    assert standard_attention_io(4096, 64) == 4 * 4096 * 64 + 4 * 4096**2
    assert base < standard_attention_io(8192, 64)


def test_flash_io_rejects_nonpositive_sizes():
    with pytest.raises(ValueError, match="positive"):
        flash_attention_io(0, 64, 1000)


def test_block_weights_takes_numpy_sizes_and_refuses_a_bool():
    assert block_weights(np.int64(64), n_heads=np.int64(4), n_kv_heads=np.int32(2)) == block_weights(
        64, n_heads=4, n_kv_heads=2
    )
    for kwargs, name in (({"n_heads": True}, "n_heads"), ({"n_kv_heads": 2.0}, "n_kv_heads")):
        with pytest.raises(ValueError, match=f"block_weights: {name} must be a positive integer"):
            block_weights(64, **kwargs)

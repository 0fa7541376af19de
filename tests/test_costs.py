"""The cost model reproduces chapter 5's figures and agrees with brute force and torch."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from lib.attention import attention
from lib.costs import (
    GIB,
    MIB,
    causal_pairs,
    dense_pairs,
    edge_counts,
    global_local_pairs,
    layer_flops,
    linear_attention_cost,
    linear_attention_flops,
    pattern_flops,
    pattern_mask,
    pattern_pairs,
    score_matrix_bytes,
    window_pairs,
)


def test_worked_example_score_matrix_figures():
    assert score_matrix_bytes(4096, bytes_per_element=2) == 32 * MIB  # one fp16 head
    assert score_matrix_bytes(4096, heads=32, bytes_per_element=2) == 1 * GIB
    assert score_matrix_bytes(8192, heads=8, bytes_per_element=4) == 2 * GIB  # the benchmark's naive scores


def test_doubling_n_quadruples_pairwise_and_doubles_linear_terms():
    small, large = layer_flops(2048, 1024), layer_flops(4096, 1024)
    assert large.pairwise == 4 * small.pairwise
    assert large.projections == 2 * small.projections and large.ffn == 2 * small.ffn
    assert large.total < 4 * small.total  # so total work need not quadruple


def test_pairwise_flops_match_torch_flop_counter():
    n, d_model, heads = 128, 64, 4
    q = torch.randn(1, heads, n, d_model // heads)
    with FlopCounterMode(display=False) as counter:
        attention(q, q, q)
    assert counter.get_total_flops() == layer_flops(n, d_model).pairwise


def test_projection_and_ffn_flops_match_torch_flop_counter():
    n, d_model = 32, 48
    x = torch.randn(n, d_model)
    projections = [torch.nn.Linear(d_model, d_model, bias=False) for _ in range(4)]
    ffn = torch.nn.Sequential(
        torch.nn.Linear(d_model, 4 * d_model, bias=False), torch.nn.Linear(4 * d_model, d_model, bias=False)
    )
    with FlopCounterMode(display=False) as counter:
        for projection in projections:
            projection(x)
        ffn(x)
    flops = layer_flops(n, d_model)
    assert counter.get_total_flops() == flops.projections + flops.ffn


@pytest.mark.parametrize("n", [1, 2, 7, 64, 129])
@pytest.mark.parametrize("window, n_global", [(1, 0), (3, 2), (8, 1), (200, 5), (16, 200)])
def test_pattern_counts_match_brute_force_masks(n, window, n_global):
    assert dense_pairs(n) == pattern_mask("dense", n).sum()
    assert causal_pairs(n) == pattern_mask("causal", n).sum()
    assert window_pairs(n, window) == pattern_mask("window", n, window=window).sum()
    assert (
        global_local_pairs(n, window, n_global)
        == pattern_mask("global+local", n, window=window, n_global=n_global).sum()
    )


def test_window_and_linear_grow_linearly():
    assert window_pairs(20_000, 256) * 2 == pytest.approx(window_pairs(40_000, 256), rel=0.01)
    assert linear_attention_cost(8192, 64) == 2 * linear_attention_cost(4096, 64)
    counts = edge_counts(4096)
    assert counts["dense"] > counts["causal"] > counts["window (w=256)"]
    with pytest.raises(ValueError, match="pattern must be"):
        pattern_mask("banded", 4)


def test_pattern_flops_agree_with_the_layer_model_and_the_pair_counts():
    d_model, heads = 512, 8
    for n in (64, 1000):
        dense = pattern_flops("dense", n, head_dim=d_model // heads, heads=heads)
        assert dense == layer_flops(n, d_model).pairwise
        assert pattern_flops("causal", n, head_dim=64) == 4 * 64 * causal_pairs(n)
    assert pattern_pairs("window", 100, window=10) == pattern_mask("window", 100, window=10).sum()
    assert pattern_pairs("global+local", 100, window=5, n_global=3) == global_local_pairs(100, 5, 3)
    assert pattern_pairs("linear", 100) is None
    assert pattern_flops("linear", 4096, head_dim=64) == linear_attention_flops(4096, 4096, 64)
    with pytest.raises(ValueError, match="pattern must be one of"):
        pattern_pairs("strided", 10)


def test_fixed_window_and_global_patterns_grow_linearly_dense_quadratically():
    for pattern in ("window", "global+local", "linear"):
        ratio = pattern_flops(pattern, 65536, window=256, n_global=16) / pattern_flops(
            pattern, 32768, window=256, n_global=16
        )
        assert ratio == pytest.approx(2.0, rel=0.02), pattern
    assert pattern_flops("dense", 8192) == 4 * pattern_flops("dense", 4096)

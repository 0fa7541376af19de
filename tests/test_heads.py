"""lib.heads: chapter 2's shape table, hand-built heads and precision comparison."""

import matplotlib
import torch
from torch import nn

from lib.attention import MultiHeadAttention, causal_mask
from lib.heads import (
    HEAD_NAMES,
    head_weights,
    kv_parameter_table,
    plot_head_weights,
    precision_comparison,
    reshape_steps,
    sdpa_backends,
    shape_table,
    toy_sentence_heads,
)

matplotlib.use("Agg")


def test_shape_table_matches_the_chapter_with_named_sizes():
    batch, n, m, d, h, h_kv = 2, 5, 7, 48, 6, 3
    module = MultiHeadAttention(d, h, n_kv_heads=h_kv)
    rows = {row.name: row.shape for row in shape_table(module, torch.randn(batch, n, d), torch.randn(batch, m, d))}
    d_k = d // h
    assert rows["W_Q"] == (d, h * d_k) and rows["W_K"] == (d, h_kv * d_k) and rows["W_O"] == (h * d_k, d)
    assert rows["Q"] == (batch, h, n, d_k) and rows["K"] == (batch, h_kv, m, d_k) and rows["V"] == (batch, h_kv, m, d_k)
    assert rows["scores / weights"] == (batch, h, n, m) and rows["per-head output"] == (batch, h, n, d_k)
    assert rows["concatenated"] == (batch, n, h * d_k) and rows["output"] == (batch, n, d)


def test_reshape_steps_end_where_forward_ends():
    module = MultiHeadAttention(32, 4)
    steps = reshape_steps(module, torch.randn(3, 6, 32))
    assert [shape for _, shape in steps] == [
        (3, 6, 32), (3, 6, 4, 8), (3, 4, 6, 8), (3, 4, 6, 6), (3, 4, 6, 8), (3, 6, 4, 8), (3, 6, 32), (3, 6, 32)
    ]  # fmt: skip


def test_toy_heads_read_their_patterns():
    module, x, tokens = toy_sentence_heads()
    weights = head_weights(module, x, is_causal=True)  # (4, 6, 6)
    assert weights.shape == (4, 6, 6) and len(HEAD_NAMES) == 4
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 6))
    assert torch.all(weights[:, ~causal_mask(6, 6)] == 0)  # nothing from the future
    previous = weights[0].argmax(-1).tolist()
    assert previous[1:] == [0, 1, 2, 3, 4]  # head 0: token i reads token i - 1
    same = weights[1][4]  # the second "the" reads both "the"s equally
    assert abs(same[0] - 0.5) < 0.02 and abs(same[4] - 0.5) < 0.02
    assert torch.all(weights[2][:, 0] > 0.95)  # head 2: everyone reads the first token
    torch.testing.assert_close(weights[3][5], torch.full((6,), 1 / 6))  # head 3: uniform
    assert tokens[0] == "the" and module(x).shape == x.shape


def test_plot_has_one_labelled_heatmap_per_head():
    module, x, tokens = toy_sentence_heads()
    fig = plot_head_weights(head_weights(module, x), tokens, titles=HEAD_NAMES)
    heatmaps = [ax for ax in fig.axes if ax.get_images()]
    assert len(heatmaps) == 4
    assert all(ax.get_xlabel() == "key token" for ax in heatmaps) and heatmaps[0].get_ylabel() == "query token"


def test_kv_parameter_table_counts_against_nn_linear():
    rows = kv_parameter_table(d_model=64, n_heads=8)
    assert [row.n_kv_heads for row in rows] == [8, 2, 1]
    assert [row.saving for row in rows] == [1.0, 4.0, 8.0]
    for row in rows:
        reference = 2 * sum(p.numel() for p in nn.Linear(64, row.n_kv_heads * 8, bias=False).parameters())
        assert row.kv_params == reference and row.k_shape == (2, row.n_kv_heads, 16, 8)


def test_precision_rows_within_tolerance_and_ordered():
    rows = precision_comparison(tokens=16, head_dim=8)
    assert [row.dtype for row in rows] == ["float32", "float16", "bfloat16"]
    assert all(row.within for row in rows)
    # lower precision, larger error: the tolerances must follow the formats
    assert rows[0].ours_error < rows[1].ours_error < rows[2].ours_error


def test_sdpa_backends_always_offer_the_math_fallback():
    q = torch.randn(1, 2, 4, 8)
    verdicts = sdpa_backends(q, q, q, is_causal=True)
    assert set(verdicts) == {"flash_attention", "efficient_attention", "cudnn_attention", "math"}
    assert verdicts["math"] is True
    if not torch.cuda.is_available():
        assert verdicts["efficient_attention"] is False and verdicts["cudnn_attention"] is False

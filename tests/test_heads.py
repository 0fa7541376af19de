"""lib.heads: chapter 2's shape table, hand-built heads, KV and head-count costs."""

import matplotlib
import pytest
import torch
from torch import nn

from lib.attention import MultiHeadAttention, causal_mask
from lib.heads import (
    HEAD_NAMES,
    head_weights,
    kv_parameter_table,
    plot_head_weights,
    reshape_steps,
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


def test_projection_shape_table_tells_every_letter_apart():
    from lib.heads import projection_shape_table

    batch, n, m, d, h, d_k, d_v = 2, 3, 7, 20, 4, 6, 8
    gen = torch.Generator().manual_seed(0)
    x, context = torch.randn(batch, n, d, generator=gen), torch.randn(batch, m, d, generator=gen)
    w_q, w_k = torch.randn(d, h * d_k, generator=gen), torch.randn(d, h * d_k, generator=gen)
    w_v, w_o = torch.randn(d, h * d_v, generator=gen), torch.randn(h * d_v, d, generator=gen)
    rows = {row.name: row.shape for row in projection_shape_table(x, context, w_q, w_k, w_v, w_o, h)}
    assert rows["Q"] == (batch, h, n, d_k) and rows["K"] == (batch, h, m, d_k) and rows["V"] == (batch, h, m, d_v)
    assert rows["scores / weights"] == (batch, h, n, m) and rows["per-head output"] == (batch, h, n, d_v)
    assert rows["concatenated"] == (batch, n, h * d_v) and rows["W_O"] == (h * d_v, d)
    assert rows["output"] == (batch, n, d)
    with pytest.raises(ValueError, match="share d_k"):
        projection_shape_table(x, context, w_q, w_v, w_v, w_o, h)


def test_module_shape_table_agrees_with_the_projection_table():
    from lib.heads import projection_shape_table

    module = MultiHeadAttention(24, 4)
    x, context = torch.randn(2, 3, 24), torch.randn(2, 5, 24)
    weights = [p.weight.T for p in (module.q_proj, module.k_proj, module.v_proj, module.out_proj)]
    assert shape_table(module, x, context) == projection_shape_table(x, context, *weights, 4)


def test_two_relationships_one_head_averages_two_heads_read_sharply():
    import torch.nn.functional as F

    from lib.heads import two_relationships

    r = two_relationships(gain=8.0)
    # one head: the query meets keys 0 and 2 equally, scores q·k / √4
    expected = torch.softmax(r.keys @ r.query / 2.0, dim=-1)
    torch.testing.assert_close(r.one_head_weights, expected)
    assert abs(r.one_head_weights[0] - r.one_head_weights[2]) < 1e-12 and r.one_head_weights[0] < 0.5
    torch.testing.assert_close(r.one_head_output[:2], (r.values[0, :2] + r.values[2, :2]) / 2, atol=0.01, rtol=0)
    # two heads: the same vectors cut in half, read by torch's SDPA
    q, k, v = (t.view(t.shape[0], 2, 2).transpose(0, 1) for t in (r.query[None], r.keys, r.values))
    sdpa = F.scaled_dot_product_attention(q, k, v)  # (2, 1, 2)
    torch.testing.assert_close(r.two_head_output, sdpa[:, 0].reshape(-1))
    assert r.two_head_weights[0, 0] > 0.99 and r.two_head_weights[1, 2] > 0.99
    torch.testing.assert_close(r.two_head_output, torch.cat([r.values[0, :2], r.values[2, 2:]]), atol=0.01, rtol=0)


def test_head_cost_is_the_same_for_every_head_count():
    from lib.heads import head_cost_table

    d, batch, tokens = 48, 2, 5
    rows = head_cost_table(d, heads=(1, 3, 8), batch=batch, tokens=tokens)
    assert [row.head_dim for row in rows] == [48, 16, 6]
    assert {row.parameters for row in rows} == {4 * (d * d + d)}
    # four d × d projections per token, plus Q Kᵀ and weights @ V: 2 FLOPs per multiply-add
    expected = 2 * batch * tokens * 4 * d * d + 2 * 2 * batch * tokens * tokens * d
    assert {row.flops for row in rows} == {expected}
    assert {row.projection_flops for row in rows} == {2 * batch * tokens * 4 * d * d}
    # the weights are not free: one tokens × tokens matrix per sequence and head
    assert [row.weight_elements for row in rows] == [batch * h * tokens * tokens for h in (1, 3, 8)]

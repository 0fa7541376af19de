"""Where the KV budget goes, and KV-head pooling, against hand counts and the unpooled model."""

import numpy as np
import pytest
import torch

from lib.gpt import GPT, GPTConfig
from lib.serving import (
    Request,
    contiguous_breakdown,
    expected_paged_waste,
    fill_paged,
    mean_pool_kv_heads,
    next_token_shift,
    paged_breakdown,
    sample_requests,
)


def test_contiguous_breakdown_by_hand():
    requests = [Request(10, 6), Request(4, 2), Request(20, 20)]
    parts = contiguous_breakdown(requests, budget_tokens=150, max_len=64, progress=0.5)
    # two reservations of 64 fit; now 10+3 and 4+1 tokens; final 16 and 6
    assert (parts.token_states, parts.reserved, parts.internal) == (18, 4, 128 - 22)
    assert (parts.external, parts.free) == (150 - 128, 0)
    assert parts.budget == 150
    assert parts.share("token_states") == pytest.approx(18 / 150) and parts.admitted == 2
    everyone = contiguous_breakdown(requests[:2], budget_tokens=150, max_len=64)
    assert (everyone.external, everyone.free) == (0, 150 - 128)  # nobody waits: the rest is just free


def test_paged_breakdown_by_hand():
    requests = [Request(10, 6), Request(4, 2), Request(20, 20)]
    parts = paged_breakdown(requests, budget_tokens=40, block_size=8, progress=0.5)
    # now 13, 5 and 30 tokens: 2 + 1 blocks fit, the third needs 4 of the 2 left. The first's
    # tail of 3 slots is all reserved (3 more tokens to come); the second's tail of 3 holds its
    # one later token and then 2 slots no token fills.
    assert (parts.token_states, parts.reserved, parts.internal, parts.external) == (18, 3 + 1, 2, 0)
    assert parts.free == 16 and parts.budget == 40 and parts.admitted == 2
    done = paged_breakdown(requests, budget_tokens=40, block_size=8, progress=1.0)
    # at their final lengths 16 and 6 (2 + 1 blocks) nothing is reserved: the second's 2 empty slots are waste
    assert (done.token_states, done.reserved, done.internal, done.admitted) == (22, 0, 2, 2)


def test_expected_waste_matches_the_measured_fill():
    requests = sample_requests(300, max_len=2048, seed=0)
    for block_size in (16, 64, 256):
        paged = fill_paged(requests, budget_tokens=10**7, block_size=block_size)  # everyone fits
        predicted = expected_paged_waste([r.total for r in requests], block_size)
        assert paged.wasted_fraction == pytest.approx(predicted, rel=0.25)


def _model(kv_heads, seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=40, n_layers=2, d_model=32, n_heads=4, n_kv_heads=kv_heads, max_len=32)).eval()


def test_pooling_identical_heads_changes_nothing():
    model = _model(2)
    with torch.no_grad():
        for block in model.blocks:  # make the two KV heads equal, so the mean is each of them
            for proj in (block.attn.k_proj, block.attn.v_proj):
                first = proj.weight[:8].clone()
                proj.weight[8:] = first
    pooled = mean_pool_kv_heads(model, 1)
    assert pooled.config.n_kv_heads == 1 and pooled.blocks[0].attn.k_proj.weight.shape == (8, 32)
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(pooled(ids), model(ids), atol=1e-5, rtol=1e-5)


def test_pooled_weights_are_the_group_means():
    model = _model(4)
    pooled = mean_pool_kv_heads(model, 2)
    k = model.blocks[1].attn.k_proj.weight.view(4, 8, 32)  # (Hkv, D, C)
    expected = torch.stack((k[:2].mean(0), k[2:].mean(0)))  # consecutive heads form a group
    torch.testing.assert_close(pooled.blocks[1].attn.k_proj.weight.view(2, 8, 32), expected)
    with pytest.raises(ValueError, match="the model.s n_kv_heads=4 is not a multiple of n_kv_heads=3"):
        mean_pool_kv_heads(model, 3)


def test_next_token_shift_of_a_model_with_itself_is_zero():
    model = _model(2)
    ids = torch.randint(0, 40, (100,), generator=torch.Generator().manual_seed(2))
    same = next_token_shift(model, model, ids, context=16, windows=4)
    assert same.mean_kl == pytest.approx(0.0, abs=1e-12) and same.top1_agreement == 1.0
    assert same.loss_before == same.loss_after
    other = next_token_shift(model, _model(2, seed=5), ids, context=16, windows=4)
    assert other.mean_kl > 0 and other.loss_after != other.loss_before


def test_mean_pool_takes_a_numpy_head_count_and_refuses_a_bool():
    model = _model(4)
    assert mean_pool_kv_heads(model, np.int64(2)).config.n_kv_heads == 2
    with pytest.raises(ValueError, match="n_kv_heads must be a positive integer, got True"):
        mean_pool_kv_heads(model, True)

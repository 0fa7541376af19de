"""Attention maps and layer ablation re-run the GPT's own pieces: they must agree with its forward pass."""

import math

import pytest
import torch

from lib.gpt import GPT, GPTConfig
from lib.gpt_probes import (
    ablated_logits,
    attention_maps,
    decode_seconds,
    kv_bytes_per_token,
    mean_head_outputs,
    prefix_matching_scores,
    repeated_tokens_losses,
    run_heads,
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=50, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, max_len=64)).eval()


def test_maps_are_causal_distributions(model):
    idx = torch.randint(0, 50, (2, 11))
    maps = attention_maps(model, idx)  # (L, B, H, T, T)
    assert maps.shape == (2, 2, 4, 11, 11)
    assert torch.allclose(maps.sum(-1), torch.ones(2, 2, 4, 11))
    assert (maps.triu(1) == 0).all()


def test_maps_rebuild_each_layers_attention_output(model):
    """weights @ v, heads merged and projected, is the block's own attention branch."""
    idx = torch.randint(0, 50, (1, 9))
    maps = attention_maps(model, idx)
    with torch.no_grad():
        x = model.embed(idx)
        from lib.rope import rope_cos_sin

        rotation = rope_cos_sin(torch.arange(9), model.freqs, x.dtype)
        for layer, block in enumerate(model.blocks):
            h = block.norm1(x)
            _, _, v = block.attn.project(h)  # (B, Hkv, T, D)
            v = v.repeat_interleave(2, dim=1)  # (B, H, T, D)
            mine = block.attn.out_proj(block.attn.merge_heads(maps[layer] @ v))
            assert torch.allclose(mine, block.attention_branch(h, None, True, rotation), atol=1e-5)
            x = block(x, is_causal=True, rotation=rotation)


def test_ablation_without_skips_is_the_model(model):
    idx = torch.randint(0, 50, (2, 7))
    with torch.no_grad():
        assert torch.allclose(ablated_logits(model, idx), model(idx), atol=1e-5)


def test_ablating_every_attention_makes_each_position_independent(model):
    """With no attention, position t's logits depend on token t alone (and nothing before it)."""
    a, b = torch.tensor([[3, 4, 5]]), torch.tensor([[9, 8, 5]])
    out_a, out_b = ablated_logits(model, a, (0, 1)), ablated_logits(model, b, (0, 1))
    assert torch.allclose(out_a[0, -1], out_b[0, -1], atol=1e-6)
    assert not torch.allclose(ablated_logits(model, a)[0, -1], ablated_logits(model, b)[0, -1], atol=1e-4)


def test_bad_inputs_raise(model):
    with pytest.raises(ValueError, match="skip_attention"):
        ablated_logits(model, torch.zeros(1, 3, dtype=torch.long), (2,))
    with pytest.raises(ValueError, match="idx"):
        attention_maps(model, torch.zeros(3))
    with pytest.raises(TypeError, match="GPT"):
        attention_maps(torch.nn.Linear(2, 2), torch.zeros(1, 3, dtype=torch.long))


def test_kv_bytes_per_token_matches_a_filled_cache(model):
    caches = model.new_caches(1, 10)
    model(torch.zeros(1, 10, dtype=torch.long), caches=caches)
    stored = sum(c.k[:, :, : len(c)].numel() + c.v[:, :, : len(c)].numel() for c in caches) * 4
    assert kv_bytes_per_token(model) * 10 == stored
    assert math.isfinite(decode_seconds(model, 8, steps=2, repeats=1))


def test_run_heads_without_replacement_is_the_model(model):
    idx = torch.randint(0, 50, (3, 10))
    logits, heads = run_heads(model, idx)
    with torch.no_grad():
        assert torch.allclose(logits, model(idx), atol=1e-5)
    assert heads.shape == (2, 3, 4, 10, 8)  # (L, B, H, T, D)


def test_zeroing_every_head_of_a_layer_is_skipping_its_attention(model):
    """The GPT has no biases: heads all zero add nothing, as ablated_logits' skipped branch does."""
    idx = torch.randint(0, 50, (2, 9))
    zero = torch.zeros(8)
    logits, _ = run_heads(model, idx, {(1, h): zero for h in range(4)})
    assert torch.allclose(logits, ablated_logits(model, idx, (1,)), atol=1e-5)


def test_mean_head_outputs_is_the_average_of_run_heads(model):
    windows = torch.randint(0, 50, (4, 12))
    _, heads = run_heads(model, windows)
    means = mean_head_outputs(model, windows)  # (L, H, D)
    for layer, head in ((0, 1), (1, 3)):
        by_hand = torch.stack([heads[layer, b, head, t] for b in range(4) for t in range(12)]).mean(0)
        assert torch.allclose(means[layer, head], by_hand, atol=1e-6)


def test_a_head_the_output_ignores_has_no_ablation_effect(model):
    """Zero the out_proj columns that read head 2 of layer 0: replacing that head changes nothing."""
    import copy

    silent = copy.deepcopy(model)
    with torch.no_grad():
        silent.blocks[0].attn.out_proj.weight[:, 16:24] = 0  # head 2's D=8 features
    idx = torch.randint(0, 50, (2, 9))
    before, _ = run_heads(silent, idx)
    after, _ = run_heads(silent, idx, {(0, 2): torch.full((8,), 5.0)})
    assert torch.allclose(before, after, atol=1e-6)
    changed, _ = run_heads(silent, idx, {(0, 1): torch.full((8,), 5.0)})
    assert not torch.allclose(before, changed, atol=1e-3)


def test_repeated_tokens_losses_against_a_loop(model):
    first, second = repeated_tokens_losses(model, length=6, batch=3, seed=1)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 50, (3, 6), generator=gen)
    seq = torch.cat([tokens, tokens], 1)
    losses = []
    with torch.no_grad():
        for b in range(3):
            logp = torch.log_softmax(model(seq[b : b + 1])[0], -1)  # (12, V)
            losses.append([-logp[t, seq[b, t + 1]].item() for t in range(11)])
    by_hand = torch.tensor(losses)  # (3, 11): predicting tokens 1..11
    assert math.isclose(first, by_hand[:, :5].mean().item(), rel_tol=1e-5)
    assert math.isclose(second, by_hand[:, 6:].mean().item(), rel_tol=1e-5)
    assert abs(first - math.log(50)) < 1.0  # an untrained model cannot predict random tokens


def test_prefix_matching_scores_pick_the_token_after_the_earlier_copy(model):
    scores = prefix_matching_scores(model, length=5, batch=2, seed=3)  # (L, H)
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 50, (2, 5), generator=gen)
    maps = attention_maps(model, torch.cat([tokens, tokens], 1))  # (L, B, H, 10, 10)
    by_hand = torch.zeros(2, 4)
    for j in range(4):  # query 5 + j (the second copy of token j) reads key j + 1
        by_hand += maps[:, :, :, 5 + j, j + 1].mean(1) / 4
    assert torch.allclose(scores, by_hand, atol=1e-6)


def test_head_probes_refuse_bad_heads_and_lengths(model):
    with pytest.raises(ValueError, match="replace names heads"):
        run_heads(model, torch.zeros(1, 3, dtype=torch.long), {(0, 4): torch.zeros(8)})
    with pytest.raises(ValueError, match="length"):
        repeated_tokens_losses(model, length=40)  # 2 x 40 > max_len 64


def test_induction_tests_draw_only_from_the_tokens_given(model):
    from lib.gpt_probes import _random_repeats

    allowed = torch.tensor([3, 7, 11, 40])
    idx = _random_repeats(model, 8, 4, 0, allowed)  # (4, 16)
    assert set(idx.unique().tolist()) <= set(allowed.tolist())
    assert torch.equal(idx[:, :8], idx[:, 8:])
    # the whole vocabulary is the default, drawn exactly as before the option existed
    gen = torch.Generator().manual_seed(2)
    assert torch.equal(_random_repeats(model, 5, 2, 2, None)[:, :5], torch.randint(0, 50, (2, 5), generator=gen))
    first, second = repeated_tokens_losses(model, length=6, batch=3, seed=1, tokens=allowed)
    assert math.isfinite(first) and math.isfinite(second)
    for bad in (torch.tensor([1]), torch.tensor([0, 50]), torch.zeros(2, 2, dtype=torch.long)):
        with pytest.raises(ValueError, match="tokens must be"):
            prefix_matching_scores(model, length=5, tokens=bad)

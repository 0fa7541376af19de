"""Attention maps and layer ablation re-run the GPT's own pieces: they must agree with its forward pass."""

import math

import pytest
import torch

from lib.gpt import GPT, GPTConfig
from lib.gpt_probes import ablated_logits, attention_maps, decode_seconds, kv_bytes_per_token


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

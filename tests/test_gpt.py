"""lib.gpt: cached generation equals recomputation; an independent forward; sampling; training."""

import math

import pytest
import torch
import torch.nn.functional as F

from lib.gpt import GPT, GPTConfig, count_parameters, sample_next
from lib.kv_cache import CacheFullError
from lib.rope import rope_cos_sin

TINY = dict(vocab_size=50, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, max_len=40)


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**TINY, **overrides})).eval()


def _sharp_model(seed=0, **overrides):
    """A model whose attention is far from uniform (GPT init makes scores tiny), so that a wrong
    position or mask changes the output visibly."""
    model = _model(seed, **overrides)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.q_proj.weight.mul_(10)
            block.attn.k_proj.weight.mul_(10)
    return model


def _prompt(batch=2, length=7, seed=1, vocab=50):
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def _reference_forward(model, idx):
    """The same network written without lib.blocks or lib.rope: a brute-force check of the wiring."""
    config = model.config
    batch, tokens = idx.shape
    heads, kv_heads, width = config.n_heads, config.n_kv_heads, config.head_dim
    angles = torch.arange(tokens, dtype=torch.float64)[:, None] * (
        config.rope_base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    )  # (T, D/2)
    cos, sin = angles.cos().float(), angles.sin().float()

    def rope(x):  # "half" layout: pair i with i + D/2
        first, second = x[..., : width // 2], x[..., width // 2 :]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

    def rms(x, weight):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

    x = model.embed.weight[idx]  # (B, T, C)
    for block in model.blocks:
        a = block.attn
        h = rms(x, block.norm1.weight)
        q = rope((h @ a.q_proj.weight.T).view(batch, tokens, heads, width).transpose(1, 2))
        k = rope((h @ a.k_proj.weight.T).view(batch, tokens, kv_heads, width).transpose(1, 2))
        v = (h @ a.v_proj.weight.T).view(batch, tokens, kv_heads, width).transpose(1, 2)
        k = k.repeat_interleave(heads // kv_heads, dim=1)  # each KV head serves consecutive query heads
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(width)  # (B, H, T, T)
        scores = scores.masked_fill(~torch.ones(tokens, tokens, dtype=torch.bool).tril(), float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, tokens, heads * width)
        x = x + out @ a.out_proj.weight.T
        h = rms(x, block.norm2.weight)
        f = block.ffn
        x = x + (F.silu(h @ f.gate_proj.weight.T) * (h @ f.up_proj.weight.T)) @ f.down_proj.weight.T
    return rms(x, model.norm.weight) @ model.embed.weight.T  # tied head


def test_forward_matches_a_written_out_reference():
    model = _sharp_model()
    idx = _prompt(length=11)
    with torch.no_grad():
        torch.testing.assert_close(model(idx), _reference_forward(model, idx), atol=1e-5, rtol=1e-4)
        assert model(idx).shape == (2, 11, 50)
        torch.testing.assert_close(model(idx, last_only=True), model(idx)[:, -1:])


def test_forward_is_causal():
    model = _sharp_model()
    idx = _prompt(length=10)
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 50  # change only the future of position 5
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[:, :6], model(changed)[:, :6])


def test_prefill_and_decode_logits_equal_full_recomputation():
    model = _sharp_model(seed=3)
    idx = _prompt(length=12, seed=4)
    with torch.no_grad():
        full = model(idx)  # (B, 12, V)
        caches = model.new_caches(2)
        parts = [model(idx[:, :5], caches=caches)]  # prefill 5
        for t in range(5, 12):  # then decode one token at a time at positions 5, 6, ...
            parts.append(model(idx[:, t : t + 1], caches=caches))
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)
    assert len(caches[0]) == 12
    assert caches[0].k.shape[1] == 2  # the cache stores Hkv = 2 heads, not H = 4


def test_cache_needs_the_right_positions():
    """Give the decoded token position 0 instead of the cache length and the logits change."""
    model = _sharp_model(seed=3)
    idx = _prompt(length=6, seed=4)
    with torch.no_grad():
        caches = model.new_caches(2)
        model(idx[:, :5], caches=caches)
        right = model(idx[:, 5:], caches=caches)[:, -1]  # position 5 = len(cache)
        wrong_caches = model.new_caches(2)
        model(idx[:, :5], caches=wrong_caches)
        x = model.embed(idx[:, 5:])
        for block, cache in zip(model.blocks, wrong_caches, strict=True):  # the bug: positions restart at 0
            x = block(x, is_causal=True, rotation=rope_cos_sin(torch.tensor([0]), model.freqs, x.dtype), cache=cache)
        wrong = model.head(model.norm(x))[:, -1]
    assert (right - wrong).abs().max() > 1e-3  # rounding differences are about 1e-6
    torch.testing.assert_close(right, model(idx)[:, -1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("overrides", [{}, {"n_kv_heads": 1}, {"n_kv_heads": 4, "ffn": "mlp", "norm": "layer"}])
def test_greedy_with_cache_equals_without(overrides):
    model = _sharp_model(seed=5, **overrides)
    idx = _prompt(length=6, seed=6)
    with_cache = model.generate(idx, 12, use_cache=True)
    without = model.generate(idx, 12, use_cache=False)
    assert with_cache.shape == (2, 18)
    assert torch.equal(with_cache, without)
    assert torch.equal(with_cache[:, :6], idx)


@pytest.mark.parametrize(
    ("overrides", "prompt_len", "new_tokens"),
    [({"n_kv_heads": 1}, 1, 30), ({"n_kv_heads": 2, "n_layers": 3}, 25, 3), ({"n_kv_heads": 4}, 2, 37)],
)
def test_greedy_with_cache_equals_without_at_other_lengths(overrides, prompt_len, new_tokens):
    """A one-token prompt, a long prompt with few steps, and a run up to max_len (MQA, GQA, MHA)."""
    model = _sharp_model(seed=9, **overrides)
    idx = _prompt(batch=3, length=prompt_len, seed=10)
    with_cache = model.generate(idx, new_tokens, use_cache=True)
    assert with_cache.shape == (3, prompt_len + new_tokens)
    assert torch.equal(with_cache, model.generate(idx, new_tokens, use_cache=False))


def test_greedy_is_the_argmax_of_a_fresh_forward():
    model = _model(seed=7)
    idx = _prompt(batch=1, length=4, seed=8)
    out = model.generate(idx, 5)
    for t in range(4, 9):
        with torch.no_grad():
            assert out[0, t] == model(out[:, :t])[0, -1].argmax()


def test_sampling_is_seeded_and_top_k_restricts():
    model = _model(seed=9)
    idx = _prompt(batch=3, length=3, seed=10)
    a = model.generate(idx, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(0))
    b = model.generate(idx, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(0))
    c = model.generate(idx, 10, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)
    # the cache changes nothing in sampling either, given the same generator state
    d = model.generate(idx, 10, temperature=1.0, top_k=5, use_cache=False, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, d)
    # top_k = 1 is greedy
    assert torch.equal(model.generate(idx, 8, temperature=0.7, top_k=1), model.generate(idx, 8))


def test_sample_next_distribution():
    logits = torch.tensor([[0.0, math.log(3.0), -1e9, math.log(2.0)]])  # probabilities 1/6, 3/6, 0, 2/6
    many = logits.expand(30_000, 4)
    draws = sample_next(many, temperature=1.0, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=4).float() / 30_000
    torch.testing.assert_close(frequencies, torch.tensor([1 / 6, 0.5, 0.0, 1 / 3]), atol=0.015, rtol=0)
    top2 = sample_next(many, temperature=1.0, top_k=2, generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(top2, minlength=4).float() / 30_000  # renormalized over the top two: 3/5, 2/5
    torch.testing.assert_close(frequencies, torch.tensor([0.0, 0.6, 0.0, 0.4]), atol=0.015, rtol=0)
    hot = sample_next(many, temperature=2.0, generator=torch.Generator().manual_seed(0))  # flatter: ∝ sqrt(p)
    expected = torch.tensor([1.0, math.sqrt(3.0), 0.0, math.sqrt(2.0)])
    frequencies = torch.bincount(hot, minlength=4).float() / 30_000
    torch.testing.assert_close(frequencies, expected / expected.sum(), atol=0.015, rtol=0)
    assert sample_next(logits, temperature=0.0).tolist() == [1]
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        sample_next(logits, temperature=1.0, top_k=0)


def test_generate_restores_training_mode_and_validates():
    model = _model()
    model.train()
    model.generate(_prompt(), 2)
    assert model.training
    with pytest.raises(ValueError, match="max_len=40"):
        model.generate(_prompt(length=30), 11)
    with pytest.raises(ValueError, match="token ids must lie in 0..49"):
        model(torch.tensor([[1, 50]]))
    with pytest.raises(TypeError, match="integer token ids"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        model(torch.zeros(3, dtype=torch.long))
    caches = model.new_caches(2, max_len=8)
    model(_prompt(length=7), caches=caches)
    with pytest.raises(CacheFullError):
        model(_prompt(length=2), caches=caches)
    with pytest.raises(ValueError, match="batch"):
        model(_prompt(batch=3, length=1), caches=model.new_caches(2))
    assert torch.equal(model.generate(_prompt(), 0), _prompt())


def test_bad_configs():
    with pytest.raises(ValueError, match="n_kv_heads"):
        GPTConfig(**{**TINY, "n_kv_heads": 3})
    with pytest.raises(ValueError, match="d_model"):
        GPTConfig(**{**TINY, "d_model": 30})
    with pytest.raises(ValueError, match="even"):
        GPTConfig(**{**TINY, "d_model": 12, "n_heads": 4, "n_kv_heads": 4})


@pytest.mark.parametrize(
    "overrides",
    [{}, {"tie_embeddings": False}, {"ffn": "mlp", "norm": "layer", "bias": True}, {"bias": True, "n_kv_heads": 1}],
)
def test_count_parameters(overrides):
    model = _model(**overrides)
    unique = {id(p): p.numel() for p in model.parameters()}
    assert count_parameters(model.config) == sum(unique.values())


def test_sampling_arguments_are_checked_even_when_nothing_is_sampled():
    model, idx = _model(), _prompt()
    logits = torch.zeros(2, 50)
    for bad in (float("nan"), float("inf"), -0.5, True):
        with pytest.raises(ValueError, match=r"temperature must be a finite number >= 0, got"):
            sample_next(logits, temperature=bad)
        with pytest.raises(ValueError, match="temperature"):
            model.generate(idx, 0, temperature=bad)
    with pytest.raises(ValueError, match="top_k must be a positive integer or None, got 0"):
        model.generate(idx, 0, temperature=1.0, top_k=0)
    with pytest.raises(ValueError, match="max_new_tokens must be a non-negative integer"):
        model.generate(idx, -1)


def test_top_k_one_is_the_argmax_even_among_tied_logits():
    logits = torch.tensor([[0.0, 3.0, 3.0, 1.0], [5.0, 5.0, 5.0, 5.0]])  # ties for the top
    for seed in range(20):
        drawn = sample_next(logits, temperature=0.9, top_k=1, generator=torch.Generator().manual_seed(seed))
        assert drawn.tolist() == logits.argmax(dim=-1).tolist() == [1, 0]


def test_numpy_integer_sizes_build_a_model():
    import numpy as np

    config = GPTConfig(**{**TINY, "d_model": np.int64(32), "n_heads": np.int64(4), "n_kv_heads": np.int32(2)})
    assert type(config.d_model) is int
    model = GPT(config).eval()
    assert model(_prompt()).shape == (2, 7, 50)


def _capstone_sized(max_len):
    """The capstone's shape (lib.capstone.CAPSTONE_MODEL) with a longer context, attention made sharp."""
    from lib.capstone import CAPSTONE_MODEL

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=512, **{**CAPSTONE_MODEL, "max_len": max_len})).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.q_proj.weight.mul_(10)
            block.attn.k_proj.weight.mul_(10)
    return model


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_cast_leaves_rope_in_full_precision(dtype):
    """model.to(bfloat16 / float16) keeps RoPE's frequencies in float32, so the logits differ from
    float32's by the dtype's own rounding (measured: 2.7 eps for both), where frequencies rounded
    to the dtype, as a floating buffer was, give 12.6 eps (bfloat16) and 68 eps (float16)."""
    import copy

    model = _capstone_sized(max_len=1024)
    idx = torch.randint(0, 512, (1, 1024), generator=torch.Generator().manual_seed(1))
    half = copy.deepcopy(model).to(dtype)
    assert half.freqs.dtype == torch.float32 and torch.equal(half.freqs, model.freqs)
    cos, sin = half.rotation(0, 1024, "cpu", dtype)  # (T, D/2) each, in the model's dtype
    angles = torch.arange(1024, dtype=torch.float64)[:, None] * model.freqs.double()  # (T, D/2)
    eps = torch.finfo(dtype).eps
    assert cos.dtype == dtype and (cos.double() - angles.cos()).abs().max() <= eps / 2  # rounding alone
    assert (sin.double() - angles.sin()).abs().max() <= eps / 2
    broken = copy.deepcopy(half)  # the old bug: the frequencies rounded to the model's dtype
    broken.freqs = half.freqs.to(dtype).float()
    broken._rotations.clear()
    with torch.no_grad():
        want = model(idx)
        scale = want.abs().max()
        error = (half(idx).float() - want).abs().max() / scale
        broken_error = (broken(idx).float() - want).abs().max() / scale
    assert error <= 4 * eps, f"{dtype}: logits off by {error / eps:.1f} eps"
    assert broken_error > 4 * eps  # the test tells the two apart


def test_rope_tables_are_cached_per_device_dtype_and_length():
    model = _model()
    first = model.rotation(0, 10, "cpu", torch.float32)
    again = model.rotation(3, 7, "cpu", torch.float32)
    assert again[0].data_ptr() == first[0][3:].data_ptr()  # a slice of the same table, not a new one
    assert len(model._rotations) == 1
    double = model.rotation(0, 10, "cpu", torch.float64)
    assert double[0].dtype == torch.float64 and len(model._rotations) == 2
    torch.testing.assert_close(first[0], double[0].float(), atol=0, rtol=0)
    model.config.max_len = 60  # a longer context: a new, longer table
    assert model.rotation(0, 60, "cpu", torch.float32)[0].shape == (60, TINY["d_model"] // TINY["n_heads"] // 2)
    with pytest.raises(ValueError, match="exceed max_len=60"):
        model.rotation(50, 11, "cpu", torch.float32)
    with pytest.raises(ValueError, match="start must be a non-negative integer"):
        model.rotation(-1, 2, "cpu", torch.float32)


def test_the_rope_frequencies_are_no_buffer_and_the_state_dict_is_unchanged():
    """Cached trained models (.cache/trained) load: the frequencies were a non-persistent buffer and
    are a plain attribute now, so the state_dict holds the same keys."""
    model = _model()
    assert "freqs" not in dict(model.named_buffers()) and "freqs" not in model.state_dict()
    _model().load_state_dict(model.state_dict())  # strict

"""lib.attention.MultiHeadAttention against nn.MultiheadAttention, SDPA and a per-head loop."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.attention import (
    MultiHeadAttention,
    attention,
    causal_mask,
    mask_from_torch,
    padding_mask,
    segment_mask,
)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def make_module(d_model=32, n_heads=4, n_kv_heads=None, seed=0, **kwargs):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, **kwargs).eval()


def per_head_loop(module, x, context=None, allowed=None):
    """Brute force: every head of every batch item as its own small softmax read, then concatenate.

    ``allowed`` is a full (B, H, N, M) boolean tensor."""
    source = x if context is None else context
    batch, n, _ = x.shape
    m = source.shape[1]
    d = module.head_dim
    group = module.n_heads // module.n_kv_heads
    out = torch.zeros(batch, n, module.n_heads * d, dtype=x.dtype)
    for b in range(batch):
        q_all, k_all, v_all = module.q_proj(x[b]), module.k_proj(source[b]), module.v_proj(source[b])
        for h in range(module.n_heads):
            kv = h // group
            q = q_all[:, h * d : (h + 1) * d]
            k = k_all[:, kv * d : (kv + 1) * d]
            v = v_all[:, kv * d : (kv + 1) * d]
            for i in range(n):
                keys = [j for j in range(m) if allowed is None or allowed[b, h, i, j]]
                if not keys:
                    continue  # zero row: our convention
                weights = torch.softmax(q[i] @ k[keys].T / d**0.5, dim=0)
                out[b, i, h * d : (h + 1) * d] = weights @ v[keys]
    return module.out_proj(out)


# (d_model, H, Hkv, B, N, M or None for self-attention)
CONFIGS = [
    (32, 4, 4, 2, 5, None),
    (32, 4, 2, 3, 6, None),
    (24, 6, 1, 2, 4, 7),
    (16, 2, 2, 1, 9, 3),
    (48, 8, 4, 2, 1, 11),
]


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("config", CONFIGS)
def test_matches_per_head_loop(config, fused):
    d_model, h, h_kv, batch, n, m = config
    module = make_module(d_model, h, h_kv, fused=fused)
    x = randn(batch, n, d_model, seed=1)
    context = None if m is None else randn(batch, m, d_model, seed=2)
    with torch.no_grad():
        out = module(x, context)
        expected = per_head_loop(module, x, context)
    assert out.shape == (batch, n, d_model)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fused", [True, False])
def test_masks_match_per_head_loop_with_empty_rows(fused):
    module = make_module(32, 4, 2, fused=fused)
    x, context = randn(3, 5, 32, seed=3), randn(3, 8, 32, seed=4)
    mask = padding_mask([8, 2, 0], 8) & causal_mask(5, 8)  # (3, 1, 5, 8); batch 2 reads nothing
    allowed = mask.expand(3, 4, 5, 8)
    with torch.no_grad():
        out = module(x, context, mask)
        expected = per_head_loop(module, x, context, allowed)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # the empty rows of batch item 2 end as the output bias alone (zeros before out_proj)
    torch.testing.assert_close(out[2], module.out_proj.bias.detach().expand(5, 32))


@pytest.mark.parametrize("n, m", [(6, 6), (2, 7), (7, 3)])
@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_fused_and_reference_agree_outputs_and_gradients(n, m, h_kv):
    torch.manual_seed(5)
    fused = MultiHeadAttention(32, 4, n_kv_heads=h_kv).double()
    plain = MultiHeadAttention(32, 4, n_kv_heads=h_kv, fused=False).double()
    plain.load_state_dict(fused.state_dict())
    x = randn(2, n, 32, seed=6, dtype=torch.float64)
    context = randn(2, m, 32, seed=7, dtype=torch.float64)
    mask = padding_mask([m, m - 1], m)
    results = []
    for module in (fused, plain):
        xs, cs = x.clone().requires_grad_(), context.clone().requires_grad_()
        out = module(xs, cs, mask, is_causal=True)
        out.sin().sum().backward()
        grads = [xs.grad, cs.grad] + [p.grad for p in module.parameters()]
        results.append((out, grads))
    (out_f, grads_f), (out_p, grads_p) = results
    assert torch.isfinite(out_f).all()
    torch.testing.assert_close(out_f, out_p, atol=1e-10, rtol=1e-8)
    for a, b in zip(grads_f, grads_p, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-8)


def test_fused_float_mask_with_minus_inf_rows_is_zero():
    module = make_module(16, 2)
    x = randn(1, 3, 16, seed=8)
    bias = torch.zeros(3, 3)
    bias[1] = float("-inf")
    with torch.no_grad():
        fused = module(x, mask=bias)
        module.fused = False
        plain = module(x, mask=bias)
    torch.testing.assert_close(fused, plain, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(fused[0, 1], module.out_proj.bias.detach())


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_from_torch_matches_nn_multihead_attention(batch_first, bias, seed):
    gen = torch.Generator().manual_seed(seed)
    n_heads = [1, 2, 4][seed]
    d_model = n_heads * int(torch.randint(2, 9, (), generator=gen))
    batch, n = int(torch.randint(1, 4, (), generator=gen)), int(torch.randint(2, 9, (), generator=gen))
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=batch_first).eval()
    with torch.no_grad():  # torch zero-initializes its biases; make them matter
        for p in theirs.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    ours = MultiHeadAttention.from_torch(theirs).eval()
    assert ours.q_proj.bias is None if not bias else ours.q_proj.bias is not None
    x = torch.randn(batch, n, d_model, generator=gen)
    lengths = torch.randint(1, n + 1, (batch,), generator=gen)
    key_padding = torch.arange(n)[None, :] >= lengths[:, None]  # (B, N), True = padding (torch)
    blocked = torch.ones(n, n, dtype=torch.bool).triu(1)  # True = blocked (torch)
    torch_in = x if batch_first else x.transpose(0, 1)
    for kwargs in ({}, {"key_padding_mask": key_padding}, {"attn_mask": blocked}):
        expected, _ = theirs(torch_in, torch_in, torch_in, need_weights=False, **kwargs)
        expected = expected if batch_first else expected.transpose(0, 1)
        mask = mask_from_torch(kwargs.get("attn_mask"), kwargs.get("key_padding_mask"))
        for fused in (True, False):
            ours.fused = fused
            torch.testing.assert_close(ours(x, mask=mask), expected, atol=1e-5, rtol=1e-5)
    # both masks together, and torch's causal flag against ours
    expected, _ = theirs(
        torch_in, torch_in, torch_in, attn_mask=blocked, key_padding_mask=key_padding, need_weights=False
    )
    expected = expected if batch_first else expected.transpose(0, 1)
    ours_out = ours(x, mask=padding_mask(lengths, n), is_causal=True)
    torch.testing.assert_close(ours_out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(x, mask=mask_from_torch(blocked, key_padding)), expected, atol=1e-5, rtol=1e-5)


def test_from_torch_cross_attention_and_3d_float_masks():
    torch.manual_seed(9)
    theirs = nn.MultiheadAttention(12, 3, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x, context = randn(2, 4, 12, seed=10), randn(2, 6, 12, seed=11)
    bias = randn(2 * 3, 4, 6, seed=12)  # (B * h, N, M) additive
    key_padding = torch.zeros(2, 6)
    key_padding[1, 4:] = float("-inf")  # float like attn_mask: torch deprecates mixing the two
    expected, _ = theirs(x, context, context, attn_mask=bias, key_padding_mask=key_padding, need_weights=False)
    mask = mask_from_torch(bias, key_padding, n_heads=3)
    assert mask.dtype == torch.float32 and mask.shape == (2, 3, 4, 6)
    torch.testing.assert_close(ours(x, context, mask), expected, atol=1e-5, rtol=1e-5)


def test_flipped_polarity_gives_a_different_answer():
    """Passing torch's mask (True = blocked) straight to ours reads exactly the wrong keys."""
    torch.manual_seed(13)
    theirs = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = randn(1, 4, 8, seed=14)
    blocked = torch.ones(4, 4, dtype=torch.bool).triu(1)
    expected, _ = theirs(x, x, x, attn_mask=blocked, need_weights=False)
    assert not torch.allclose(ours(x, mask=blocked), expected, atol=1e-3)
    torch.testing.assert_close(ours(x, mask=~blocked), expected, atol=1e-5, rtol=1e-5)


def test_sdpa_top_left_differs_from_our_bottom_right_with_a_cache():
    module = make_module(16, 2)
    x, cache = randn(1, 2, 16, seed=15), randn(1, 5, 16, seed=16)
    q, k, v = module.project(x, cache)
    ours = module.attend(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, attention(q, k, v, causal_mask(2, 5)), atol=1e-6, rtol=1e-6)
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(ours, top_left, atol=1e-3)


def test_kv_cache_pieces_reproduce_full_causal_forward():
    """Feeding keys one chunk at a time through project/attend/merge equals the full pass."""
    module = make_module(32, 4, 2)
    x = randn(2, 7, 32, seed=17)
    with torch.no_grad():
        full = module(x, is_causal=True)
        _, k_all, v_all = module.project(x)
        q_new, _, _ = module.project(x[:, 4:])  # the last three queries, keys 0..6 cached
        heads = module.attend(q_new, k_all, v_all, is_causal=True)
        tail = module.out_proj(module.merge_heads(heads))
    torch.testing.assert_close(tail, full[:, 4:], atol=1e-6, rtol=1e-6)


def test_split_and_merge_heads_round_trip_and_layout():
    x = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 3, 8)  # (B, N, h·D) with h=4, D=2
    heads = MultiHeadAttention.split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    torch.testing.assert_close(heads[1, 2, 0], x[1, 0, 4:6])  # head 2 of token 0 = features 4..5
    torch.testing.assert_close(MultiHeadAttention.merge_heads(heads), x)


def test_gqa_and_mqa_parameter_savings():
    full = MultiHeadAttention(64, 8, bias=False)
    gqa = MultiHeadAttention(64, 8, n_kv_heads=2, bias=False)
    mqa = MultiHeadAttention(64, 8, n_kv_heads=1, bias=False)
    assert full.k_proj.weight.shape == (64, 64)
    assert gqa.k_proj.weight.shape == (16, 64) and gqa.v_proj.weight.shape == (16, 64)
    assert mqa.k_proj.weight.shape == (8, 64)
    kv_params = [m.k_proj.weight.numel() + m.v_proj.weight.numel() for m in (full, gqa, mqa)]
    assert kv_params == [8192, 8192 // 4, 8192 // 8]  # shrink by H / Hkv
    x = randn(2, 5, 64, seed=18)
    for module in (full, gqa, mqa):
        assert module(x).shape == (2, 5, 64)


def test_gqa_matches_sdpa_enable_gqa_on_projected_heads():
    module = make_module(32, 8, 2, fused=False)
    x = randn(2, 6, 32, seed=19)
    with torch.no_grad():
        q, k, v = module.project(x)
        expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        torch.testing.assert_close(module.attend(q, k, v), expected, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("fused", [True, False])
def test_dropout_is_on_in_training_and_off_in_eval(fused):
    module = make_module(32, 4, dropout=0.5, fused=fused)
    x = randn(2, 6, 32, seed=20)
    module.eval()
    torch.testing.assert_close(module(x), module(x))
    module.fused = not fused
    torch.testing.assert_close(module(x), module.eval()(x))
    module.fused = fused
    module.train()
    torch.manual_seed(0)
    first = module(x)
    second = module(x)
    assert not torch.allclose(first, second)
    module.eval()
    assert not torch.allclose(first, module(x))


def test_segment_mask_equals_separate_documents():
    """Two packed documents give what each gives alone."""
    module = make_module(16, 2)
    docs = [randn(1, 3, 16, seed=21), randn(1, 4, 16, seed=22)]
    packed = torch.cat(docs, dim=1)
    ids = torch.tensor([0] * 3 + [1] * 4)
    with torch.no_grad():
        together = module(packed, mask=segment_mask(ids), is_causal=True)
        apart = torch.cat([module(doc, is_causal=True) for doc in docs], dim=1)
    torch.testing.assert_close(together, apart, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"d_model": 30, "n_heads": 4}, "d_model=30 is not a multiple of n_heads=4: each head takes d_model / n_heads"),
        ({"d_model": 32, "n_heads": 4, "n_kv_heads": 3}, "n_heads=4 is not a multiple of n_kv_heads=3"),
        ({"d_model": 32, "n_heads": 0}, "n_heads must be a positive integer"),
        ({"d_model": 32, "n_heads": 4, "dropout": 1.0}, "dropout must be a probability"),
    ],
)
def test_bad_constructor_arguments(kwargs, words):
    with pytest.raises(ValueError) as info:
        MultiHeadAttention(**kwargs)
    assert words in str(info.value)


@pytest.mark.parametrize(
    "args, error, words",
    [
        ((randn(2, 5, 16),), ValueError, "x must have shape (B, tokens, d_model=32), got (2, 5, 16)"),
        ((randn(5, 32),), ValueError, "got (5, 32)"),
        ((randn(2, 5, 32), randn(3, 7, 32)), ValueError, "context has batch size 3 but x has 2"),
        ((randn(2, 5, 32), randn(2, 7, 8)), ValueError, "context must have shape"),
        ((randn(2, 5, 32), None, torch.ones(5, 6, dtype=torch.bool)), ValueError, "(2, 4, 5, 5)"),
        (
            (randn(2, 5, 32), randn(2, 7, 32), torch.ones(3, 1, 1, 7, dtype=torch.bool)),
            ValueError,
            "does not broadcast",
        ),
        ((randn(2, 5, 32), None, torch.ones(5, 5, dtype=torch.long)), TypeError, "mask must be bool"),
        (([[1.0]],), TypeError, "x must be a torch.Tensor"),
    ],
)
def test_bad_forward_inputs_name_the_argument_and_shapes(args, error, words):
    module = make_module(32, 4)
    with pytest.raises(error) as info:
        module(*args)
    assert words in str(info.value)


def test_from_torch_refuses_what_it_cannot_copy():
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("n_kv_heads", [4, 2])
def test_nan_at_padded_positions_reaches_no_other_token(fused, n_kv_heads):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, n_kv_heads=n_kv_heads, fused=fused).eval()
    x = torch.randn(2, 7, 16)
    mask = padding_mask([7, 4], 7)  # (B, 1, 1, M)
    clean = mha(x, mask=mask, is_causal=True)
    x[1, 4:] = float("nan")  # whatever padding holds
    got = mha(x, mask=mask, is_causal=True)
    torch.testing.assert_close(got[0], clean[0], atol=0, rtol=0)
    torch.testing.assert_close(got[1, :4], clean[1, :4])
    assert torch.isfinite(got[1, :4]).all()

"""lib.blocks against torch: nn.LayerNorm, nn.RMSNorm, nn.TransformerEncoderLayer, SDPA."""

import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.attention import causal_mask, padding_mask
from lib.blocks import (
    Block,
    FeedForward,
    LayerNorm,
    RMSNorm,
    SwiGLU,
    ffn_parameters,
    layer_norm,
    make_norm,
    rms_norm,
    swiglu_hidden,
)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _randomize(module, seed=0):
    """Random weights everywhere (norm weights and biases included), so no parameter is a no-op."""
    gen = _gen(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5 + (1.0 if p.ndim == 1 else 0.0))
    return module


# --- norms --------------------------------------------------------------------------------
def test_layer_norm_hand_worked():
    # [1, 2, 3, 4]: mean 2.5, biased variance 1.25, so the outputs are (x - 2.5) / sqrt(1.25 + eps).
    out = layer_norm(torch.tensor([1.0, 2.0, 3.0, 4.0]), eps=0.0)
    expected = torch.tensor([-1.5, -0.5, 0.5, 1.5]) / 1.25**0.5
    torch.testing.assert_close(out, expected)
    # RMSNorm of [3, 4]: rms = sqrt((9 + 16) / 2) = sqrt(12.5).
    torch.testing.assert_close(rms_norm(torch.tensor([3.0, 4.0]), eps=0.0), torch.tensor([3.0, 4.0]) / 12.5**0.5)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("shape", [(7,), (3, 5, 16), (2, 1, 4, 33)])
def test_layer_norm_matches_torch(fused, shape):
    d = shape[-1]
    ours, theirs = _randomize(LayerNorm(d)), nn.LayerNorm(d)
    theirs.load_state_dict(ours.state_dict())  # same parameter names, or this raises
    ours.fused = fused
    x = torch.randn(shape, generator=_gen(1)) * 3 + 2
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("shape", [(7,), (3, 5, 16), (2, 1, 4, 33)])
def test_rms_norm_matches_torch(fused, shape):
    d = shape[-1]
    ours, theirs = _randomize(RMSNorm(d)), nn.RMSNorm(d, eps=1e-6)
    theirs.load_state_dict(ours.state_dict())
    ours.fused = fused
    x = torch.randn(shape, generator=_gen(1)) * 3 + 2
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


def test_parameter_names_and_defaults_match_torch():
    assert dict(LayerNorm(6).named_parameters()).keys() == dict(nn.LayerNorm(6).named_parameters()).keys()
    assert dict(RMSNorm(6).named_parameters()).keys() == dict(nn.RMSNorm(6).named_parameters()).keys()
    assert list(dict(LayerNorm(6, bias=False).named_parameters())) == ["weight"]
    assert torch.equal(LayerNorm(6).weight, torch.ones(6)) and torch.equal(LayerNorm(6).bias, torch.zeros(6))
    assert LayerNorm(6).eps == 1e-5 and RMSNorm(6).eps == 1e-6


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_plain_and_fused_norms_agree_with_gradients(kind):
    norm = _randomize(make_norm(kind, 24))
    x = torch.randn(4, 9, 24, generator=_gen(2), requires_grad=True)
    upstream = torch.randn(4, 9, 24, generator=_gen(3))
    results = []
    for fused in (True, False):
        norm.fused = fused
        norm.zero_grad()
        x.grad = None
        out = norm(x)
        (out * upstream).sum().backward()
        results.append((out.detach(), x.grad.clone(), [p.grad.clone() for p in norm.parameters()]))
    (out_a, gx_a, gp_a), (out_b, gx_b, gp_b) = results
    torch.testing.assert_close(out_a, out_b, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gx_a, gx_b, atol=1e-4, rtol=1e-4)
    for a, b in zip(gp_a, gp_b, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_centering_is_what_separates_the_two_norms():
    x = torch.randn(5, 8, generator=_gen(4))
    shifted = x + 10.0  # the same constant added to every feature of every token
    torch.testing.assert_close(layer_norm(shifted), layer_norm(x), atol=1e-4, rtol=1e-4)
    assert (rms_norm(shifted) - rms_norm(x)).abs().max() > 0.5
    centered = x - x.mean(-1, keepdim=True)  # once centered, RMSNorm and LayerNorm coincide
    torch.testing.assert_close(rms_norm(centered, eps=1e-5), layer_norm(centered, eps=1e-5), atol=1e-5, rtol=1e-5)


def test_half_precision_plain_norms_compute_in_float32():
    x = torch.randn(3, 64, generator=_gen(5)) * 300  # squares overflow float16 (max 65504)
    for plain, fused in ((layer_norm, lambda t: F.layer_norm(t, (64,))), (rms_norm, lambda t: F.rms_norm(t, (64,)))):
        out = plain(x.half())
        assert out.dtype == torch.float16 and torch.isfinite(out).all()
        torch.testing.assert_close(out.float(), fused(x), atol=2e-3, rtol=2e-3)


def test_norm_errors_name_the_value():
    with pytest.raises(ValueError, match="'batch'"):
        make_norm("batch", 8)
    with pytest.raises(ValueError, match=r"d=8.*\(2, 5\)"):
        LayerNorm(8)(torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"d=8.*\(2, 5\)"):
        RMSNorm(8)(torch.zeros(2, 5))


# --- feed-forward networks --------------------------------------------------------------
@pytest.mark.parametrize("activation,fn", [("gelu", F.gelu), ("relu", F.relu)])
def test_feed_forward_is_two_projections(activation, fn):
    ffn = _randomize(FeedForward(8, activation=activation))
    assert ffn.hidden == 32  # 4d by default
    x = torch.randn(2, 5, 8, generator=_gen(6))
    w1, b1, w2, b2 = ffn.up_proj.weight, ffn.up_proj.bias, ffn.down_proj.weight, ffn.down_proj.bias
    torch.testing.assert_close(ffn(x), fn(x @ w1.T + b1) @ w2.T + b2)


def test_swiglu_is_a_gated_product_then_a_projection():
    ffn = _randomize(SwiGLU(12, 20))
    x = torch.randn(3, 12, generator=_gen(7))
    gate, up, down = ffn.gate_proj.weight, ffn.up_proj.weight, ffn.down_proj.weight
    expected = (x @ gate.T * torch.sigmoid(x @ gate.T) * (x @ up.T)) @ down.T
    torch.testing.assert_close(ffn(x), expected)
    assert ffn.gate_proj.bias is None  # no biases by default (Shazeer, 2020)


def test_swiglu_width_rounds_8d_over_3_up_to_a_multiple_of_8():
    assert swiglu_hidden(96) == 256  # 8·96/3 = 256 exactly
    assert swiglu_hidden(512) == 1368  # 1365.33 -> 1368
    assert swiglu_hidden(768) == 2048
    assert swiglu_hidden(10, multiple_of=1) == 27  # ceil(26.67)
    for d in (64, 100, 512, 4096):
        f = swiglu_hidden(d)
        assert f % 8 == 0 and 8 * d / 3 <= f < 8 * d / 3 + 8
        assert abs(3 * d * f - 8 * d * d) / (8 * d * d) < 0.05  # about the weights of a 4d MLP


@pytest.mark.parametrize("bias", [True, False])
def test_ffn_parameters_counts_the_modules(bias):
    for d, f in ((8, 32), (12, 20), (64, 256)):
        mlp = FeedForward(d, f, bias=bias)
        glu = SwiGLU(d, f, bias=bias)
        assert ffn_parameters(d, f, bias=bias) == sum(p.numel() for p in mlp.parameters())
        assert ffn_parameters(d, f, gated=True, bias=bias) == sum(p.numel() for p in glu.parameters())
    assert ffn_parameters(512, 2048, bias=False) == 8 * 512**2


@pytest.mark.parametrize("ffn", [FeedForward(16), SwiGLU(16)], ids=["mlp", "swiglu"])
def test_ffn_acts_on_each_token_separately(ffn):
    x = torch.randn(2, 6, 16, generator=_gen(8))
    changed = x.clone()
    changed[1, 3] += torch.randn(16, generator=_gen(9))
    moved = (ffn(changed) - ffn(x)).abs().amax(-1)  # (B, N)
    assert moved[1, 3] > 1e-3
    moved[1, 3] = 0
    assert moved.max() == 0  # exactly: no other token's output changes


def test_ffn_errors_name_the_value():
    with pytest.raises(ValueError, match="'tanh'"):
        FeedForward(8, activation="tanh")
    with pytest.raises(ValueError, match="hidden"):
        SwiGLU(8, 0)
    with pytest.raises(ValueError, match=r"d=8.*\(3, 7\)"):
        FeedForward(8)(torch.zeros(3, 7))


# --- the block against torch's encoder layer ----------------------------------------------
PLACEMENTS = list(itertools.product([True, False], ["relu", "gelu"], [False, True]))


@pytest.mark.parametrize("norm_first,activation,causal", PLACEMENTS)
def test_from_torch_matches_encoder_layer(norm_first, activation, causal):
    gen = _gen(10)
    for trial in range(3):  # random shapes
        heads = int(torch.randint(1, 5, (1,), generator=gen))
        d = heads * int(torch.randint(2, 9, (1,), generator=gen))
        batch, tokens = (int(v) for v in torch.randint(1, 7, (2,), generator=gen))
        layer = nn.TransformerEncoderLayer(
            d, heads, dim_feedforward=3 * d, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
        )
        _randomize(layer, seed=trial)
        ours = Block.from_torch(layer)
        x = torch.randn(batch, tokens, d, generator=gen)
        if causal:
            src_mask = nn.Transformer.generate_square_subsequent_mask(tokens)  # float, -inf above the diagonal
            expected = layer(x, src_mask=src_mask, is_causal=True)
            got = ours(x, is_causal=True)
        else:
            expected, got = layer(x), ours(x)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [True, False])
def test_from_torch_eval_mode_gradients_and_sequence_first_layers(norm_first):
    layer = _randomize(nn.TransformerEncoderLayer(12, 3, 24, dropout=0.1, norm_first=norm_first), seed=3).eval()
    ours = Block.from_torch(layer)
    assert not ours.training and ours.dropout1.p == 0.1
    x = torch.randn(5, 2, 12, generator=_gen(11), requires_grad=True)  # (N, B, d): batch_first=False
    expected = layer(x)
    got = ours(x.transpose(0, 1)).transpose(0, 1)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    (grad_theirs,) = torch.autograd.grad(expected.square().sum(), x)
    (grad_ours,) = torch.autograd.grad(got.square().sum(), x)
    torch.testing.assert_close(grad_ours, grad_theirs, atol=1e-4, rtol=1e-4)


def test_from_torch_padding_mask_has_the_opposite_polarity():
    layer = _randomize(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), seed=4)
    ours = Block.from_torch(layer)
    x = torch.randn(2, 5, 8, generator=_gen(12))
    lengths = [5, 3]
    keep = padding_mask(lengths, 5)  # (B, 1, 1, M), True = may read
    blocked = ~keep[:, 0, 0, :]  # torch's key padding mask: True = may NOT read
    expected = layer(x, src_key_padding_mask=blocked)
    got = ours(x, keep)
    torch.testing.assert_close(got[0], expected[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got[1, :3], expected[1, :3], atol=1e-4, rtol=1e-4)  # padded queries: unspecified


def test_from_torch_float64_and_bias_free_layers():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, bias=False, dtype=torch.float64)
    _randomize(layer, seed=5)
    ours = Block.from_torch(layer)
    assert ours.norm1.bias is None and ours.ffn.up_proj.bias is None
    x = torch.randn(2, 4, 8, generator=_gen(13), dtype=torch.float64)
    torch.testing.assert_close(ours(x), layer(x), atol=1e-10, rtol=1e-10)


def _reference_block(block, x, *, is_causal, n_kv_heads):
    """The block recomputed with torch's own pieces: nn.RMSNorm, SDPA with enable_gqa, a SwiGLU by hand."""
    rms1, rms2 = nn.RMSNorm(x.shape[-1], eps=1e-6), nn.RMSNorm(x.shape[-1], eps=1e-6)
    rms1.load_state_dict(block.norm1.state_dict())
    rms2.load_state_dict(block.norm2.state_dict())
    attn, ffn = block.attn, block.ffn
    batch, tokens, d = x.shape
    heads, head_dim = attn.n_heads, d // attn.n_heads

    def heads_of(t, h):
        return t.view(batch, tokens, h, head_dim).transpose(1, 2)

    h = rms1(x)
    q = heads_of(F.linear(h, attn.q_proj.weight, attn.q_proj.bias), heads)
    k = heads_of(F.linear(h, attn.k_proj.weight, attn.k_proj.bias), n_kv_heads)
    v = heads_of(F.linear(h, attn.v_proj.weight, attn.v_proj.bias), n_kv_heads)
    read = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    u = x + attn.out_proj(read.transpose(1, 2).reshape(batch, tokens, d))
    h = rms2(u)
    return u + ffn.down_proj(F.silu(ffn.gate_proj(h)) * ffn.up_proj(h))


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("is_causal", [False, True])
def test_llama_style_block_matches_a_reference_built_from_torch(n_kv_heads, is_causal):
    block = _randomize(Block(32, 4, n_kv_heads=n_kv_heads, ffn="swiglu", norm="rms", bias=False), seed=6)
    assert isinstance(block.norm1, RMSNorm) and isinstance(block.ffn, SwiGLU)
    assert block.attn.k_proj.out_features == n_kv_heads * 8
    x = torch.randn(3, 7, 32, generator=_gen(14))
    expected = _reference_block(block, x, is_causal=is_causal, n_kv_heads=n_kv_heads)
    torch.testing.assert_close(block(x, is_causal=is_causal), expected, atol=1e-4, rtol=1e-4)


def test_block_fused_and_plain_attention_agree_and_masks_combine():
    block = _randomize(Block(16, 4, hidden=40), seed=7)
    x = torch.randn(2, 6, 16, generator=_gen(15))
    mask = padding_mask([6, 4], 6) & causal_mask(6, 6)
    fused = block(x, mask)
    block.attn.fused = False
    torch.testing.assert_close(block(x, mask), fused, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(block(x, is_causal=True), block(x, causal_mask(6, 6)), atol=1e-5, rtol=1e-5)


def test_block_causal_output_ignores_the_future():
    block = _randomize(Block(16, 2), seed=8)
    x = torch.randn(1, 6, 16, generator=_gen(16))
    later = x.clone()
    later[0, 4:] += torch.randn(2, 16, generator=_gen(19))  # not a constant: LayerNorm would remove that
    torch.testing.assert_close(block(later, is_causal=True)[0, :4], block(x, is_causal=True)[0, :4])
    assert (block(later)[0, :4] - block(x)[0, :4]).abs().max() > 1e-3  # without the mask it does not


def test_block_dropout_only_in_training():
    block = Block(16, 2, dropout=0.5)
    x = torch.randn(2, 5, 16, generator=_gen(17))
    block.eval()
    torch.testing.assert_close(block(x), block(x))
    block.train()
    torch.manual_seed(0)
    assert not torch.allclose(block(x), block(x))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(d_model=10, n_heads=3), "Block: d_model=10 is not a multiple of n_heads=3"),
        (dict(d_model=16, n_heads=4, n_kv_heads=3), "n_kv_heads=3"),
        (dict(d_model=16, n_heads=4, norm="batch"), "'batch'"),
        (dict(d_model=16, n_heads=4, ffn="moe"), "'moe'"),
        (dict(d_model=16, n_heads=4, activation="tanh"), "'tanh'"),
        (dict(d_model=16, n_heads=4, ffn="swiglu", activation="relu"), "'relu'"),
        (dict(d_model=0, n_heads=4), "d_model"),
    ],
)
def test_block_rejects_bad_configurations(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Block(**kwargs)


def test_block_rejects_bad_inputs():
    block = Block(16, 4)
    with pytest.raises(ValueError, match=r"d=16.*\(2, 5, 12\)"):
        block(torch.zeros(2, 5, 12))
    with pytest.raises(ValueError, match=r"\(5, 16\)"):
        block(torch.zeros(5, 16))
    with pytest.raises(TypeError, match="list"):
        block([[0.0] * 16])
    with pytest.raises(TypeError, match="TransformerDecoderLayer"):
        Block.from_torch(nn.TransformerDecoderLayer(16, 4))


def test_attention_branch_is_the_hook_a_model_overrides():
    class NoAttention(Block):
        def attention_branch(self, x, mask, is_causal, rotation=None, cache=None):
            return torch.zeros_like(x)

    block = _randomize(NoAttention(16, 2), seed=9)
    x = torch.randn(2, 3, 16, generator=_gen(18))
    torch.testing.assert_close(block(x), x + block.ffn(block.norm2(x)))


# --- chapter 4's exercise answers, worked out with the modules themselves ----------------
def _zero_branches(block):
    with torch.no_grad():
        for name, p in block.named_parameters():
            if not name.startswith("norm"):
                p.zero_()
    return block


def test_chapter_4_answers_agree_with_lib_blocks():
    from lib.checks import CORRECT, exercises, grade

    token = torch.tensor([[[1.0, 3.0, 4.0, 8.0]]])  # (B=1, N=1, d=4)
    x = torch.randn(1, 8, 8, generator=_gen(20))
    changed = x.clone()
    changed[0, 5] += torch.randn(8, generator=_gen(21))
    block = _randomize(Block(8, 2), seed=10)
    ffn_moved = (block.ffn(changed) - block.ffn(x)).abs().amax(-1) > 1e-6  # (1, 8)
    block_moved = (block(changed, is_causal=True) - block(x, is_causal=True)).abs().amax(-1) > 1e-6  # (1, 8)
    a1, a2 = torch.tensor(0.5), torch.tensor(-0.8)
    scalar = torch.tensor(1.3, requires_grad=True)
    y1 = scalar + a1 * scalar
    (slope,) = torch.autograd.grad(y1 + a2 * y1, scalar)
    answers = {
        "4.ffn-params": sum(p.numel() for p in FeedForward(96, 320).parameters()),
        "4.swiglu-width": swiglu_hidden(400),
        "4.layernorm-by-hand": nn.LayerNorm(4, elementwise_affine=False, eps=0.0)(torch.tensor([2.0, 4.0, 6.0, 8.0])),
        "4.prenorm-zero-branches": _zero_branches(Block(4, 1))(token)[0, 0],
        "4.postnorm-zero-branches": _zero_branches(Block(4, 1, norm_first=False))(token)[0, 0],
        "4.what-changes": [int(ffn_moved.sum()), int(block_moved.sum())],
        "4.residual-gradient": slope,
    }
    for exercise_id, answer in answers.items():
        result = grade(exercises()[exercise_id], answer)
        assert result.status == CORRECT, (exercise_id, answer, result.message)
    assert 3 * 400 * swiglu_hidden(400) > 8 * 400**2  # 8·400/3 is not whole: swiglu_hidden rounds up


def test_rms_norm_exercise_refuses_torch_and_names_layer_norm():
    """torch's own RMSNorm does the exercise's work: refused, by name (issue 30). A LayerNorm
    written by hand is the named mistake."""
    from lib.checks import INCORRECT, exercises, grade

    exercise = exercises()["4.rms-norm"]
    result = grade(exercise, lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps))
    assert result.status == INCORRECT and "torch.nn.functional.rms_norm" in result.feedback

    def by_hand(x, w, eps):
        centered = x - x.mean(dim=-1, keepdim=True)
        return centered * torch.rsqrt(centered.pow(2).mean(dim=-1, keepdim=True) + eps) * w

    result = grade(exercise, by_hand)
    assert result.status == INCORRECT and "that is LayerNorm" in result.feedback


@pytest.mark.parametrize("norm_first", [True, False])
def test_block_nan_at_padded_positions_reaches_no_other_token(norm_first):
    block = _randomize(Block(16, 4, n_kv_heads=2, norm_first=norm_first), seed=23).eval()
    x = torch.randn(2, 6, 16, generator=_gen(24))
    mask = padding_mask([6, 3], 6)
    clean = block(x, mask, is_causal=True)
    x[1, 3:] = float("nan")
    got = block(x, mask, is_causal=True)
    torch.testing.assert_close(got[:, :3], clean[:, :3])
    torch.testing.assert_close(got[0], clean[0])


def test_block_takes_numpy_integer_sizes():
    import numpy as np

    block = Block(np.int64(16), np.int64(4), n_kv_heads=np.int32(2), hidden=np.int64(24))
    assert block.attn.n_kv_heads == 2 and block.ffn.hidden == 24
    with pytest.raises(ValueError, match="Block: d_model must be a positive integer, got True"):
        Block(True, 4)

"""lib.attention against torch's scaled_dot_product_attention and hand-worked numbers."""

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import random_qkv

from lib.attention import attention, causal_mask, padding_mask, softmax

# (batch axes, H, Hkv, N, M, d_k, d_v): N != M, d_k != d_v, grouped heads, extra batch axes.
SHAPES = [
    ((), 1, 1, 1, 1, 1, 1),
    ((2,), 4, 4, 7, 7, 16, 16),
    ((3,), 2, 2, 5, 11, 8, 3),
    ((1,), 8, 2, 13, 6, 32, 64),
    ((2, 3), 6, 3, 4, 9, 5, 7),
    ((2,), 4, 1, 17, 17, 64, 32),
]


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_sdpa_without_mask(shape):
    batch, h, h_kv, n, m, d_k, d_v = shape
    q, k, v = random_qkv(batch, h, h_kv, n, m, d_k, d_v, dtype=torch.float32)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=h != h_kv)
    torch.testing.assert_close(attention(q, k, v), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_sdpa_with_bool_mask(shape, seed):
    batch, h, h_kv, n, m, d_k, d_v = shape
    q, k, v = random_qkv(batch, h, h_kv, n, m, d_k, d_v, seed=seed, dtype=torch.float32)
    gen = torch.Generator().manual_seed(100 + seed)
    mask = torch.rand(*batch, h, n, m, generator=gen) > 0.4
    mask[..., 0] = True  # every row keeps one key: SDPA's NaN-or-zero convention is not under test here
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=h != h_kv)
    torch.testing.assert_close(attention(q, k, v, mask), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_sdpa_with_float_mask_and_custom_scale(shape):
    batch, h, h_kv, n, m, d_k, d_v = shape
    q, k, v = random_qkv(batch, h, h_kv, n, m, d_k, d_v, seed=3, dtype=torch.float32)
    bias = torch.randn(n, m)  # broadcasts over batch and heads
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.37, enable_gqa=h != h_kv)
    torch.testing.assert_close(attention(q, k, v, bias, scale=0.37), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n, m", [(5, 5), (3, 8), (1, 9), (4, 4)])
def test_causal_is_bottom_right(n, m):
    q, k, v = random_qkv((2,), 4, 2, n, m, 8, 8, seed=4, dtype=torch.float32)
    # Independent reference: tril with the diagonal shifted by M - N, as FlashAttention 2.1+.
    bottom_right = torch.ones(n, m, dtype=torch.bool).tril(diagonal=m - n)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right, enable_gqa=True)
    torch.testing.assert_close(attention(q, k, v, is_causal=True), expected, atol=1e-5, rtol=1e-5)
    if n == m:  # only then does torch's top-left alignment agree
        torch.testing.assert_close(
            attention(q, k, v, is_causal=True),
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
            atol=1e-5,
            rtol=1e-5,
        )


def test_causal_differs_from_top_left_when_n_less_than_m():
    q, k, v = random_qkv((1,), 1, 1, 2, 5, 4, 4, seed=5, dtype=torch.float32)
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(attention(q, k, v, is_causal=True), top_left)


def test_causal_mask_rows():
    assert causal_mask(2, 2).tolist() == [[True, False], [True, True]]
    # two new queries after three cached keys: positions 3 and 4 of 5
    assert causal_mask(2, 5).tolist() == [[True, True, True, True, False], [True] * 5]
    # more queries than keys: the first query has nothing to read
    assert causal_mask(3, 2).tolist() == [[False, False], [True, False], [True, True]]


def test_causal_combined_with_padding_mask():
    q, k, v = random_qkv((2,), 2, 2, 6, 6, 4, 4, seed=6, dtype=torch.float32)
    lengths = torch.tensor([6, 3])
    mask = padding_mask(lengths, 6) & causal_mask(6, 6)
    assert mask.shape == (2, 1, 6, 6)
    out = attention(q, k, v, mask)
    # brute force: each (b, h, i) reads keys j <= i and j < length[b]
    for b in range(2):
        for h in range(2):
            for i in range(6):
                keys = [j for j in range(6) if j <= i and j < lengths[b]]
                scores = torch.stack([q[b, h, i] @ k[b, h, j] / 2.0 for j in keys])
                expected = torch.softmax(scores, 0) @ v[b, h, keys]
                torch.testing.assert_close(out[b, h, i], expected, atol=1e-5, rtol=1e-5)


def test_lesson_worked_example():
    q = torch.tensor([[1.0, 0.0]])  # (N=1, D=2)
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    values = torch.tensor([[2.0, 0.0], [0.0, 4.0]])
    out, weights = attention(q, keys, values, return_weights=True)
    torch.testing.assert_close(weights, torch.tensor([[0.6698, 0.3302]]), atol=1e-4, rtol=0)
    torch.testing.assert_close(out, torch.tensor([[1.3395, 1.3210]]), atol=1e-4, rtol=0)
    first_position = causal_mask(2, 2)[:1]  # the query is token 0 of a two-token sequence
    out, weights = attention(q, keys, values, first_position, return_weights=True)
    assert weights.tolist() == [[1.0, 0.0]] and out.tolist() == [[2.0, 0.0]]


def test_all_masked_rows_give_zeros_and_finite_gradients():
    q, k, v = random_qkv((2,), 2, 2, 4, 5, 8, 3, seed=7, dtype=torch.float32)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    mask = torch.ones(2, 2, 4, 5, dtype=torch.bool)
    mask[0, 1, 2] = False  # one row with nothing to read
    mask[1] = False  # a whole batch item
    out, weights = attention(q, k, v, mask, return_weights=True)
    assert torch.all(out[0, 1, 2] == 0) and torch.all(weights[0, 1, 2] == 0)
    assert torch.all(out[1] == 0) and torch.all(weights[1] == 0)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    for name, t in (("q", q), ("k", k), ("v", v)):
        assert torch.isfinite(t.grad).all(), name
    assert torch.all(q.grad[0, 1, 2] == 0)
    # and the allowed rows are unchanged by their neighbours being masked
    expected = F.scaled_dot_product_attention(q[:1].detach(), k[:1].detach(), v[:1].detach(), attn_mask=mask[:1])
    torch.testing.assert_close(out[0, 0].detach(), expected[0, 0], atol=1e-5, rtol=1e-5)


def test_more_queries_than_keys_causal_first_rows_zero():
    q, k, v = random_qkv((), 1, 1, 4, 2, 3, 3, seed=8, dtype=torch.float32)
    out = attention(q, k, v, is_causal=True)
    assert torch.all(out[0, :2] == 0) and torch.isfinite(out).all()


def test_float_mask_with_minus_inf_row():
    q, k, v = random_qkv((), 1, 1, 2, 3, 3, 3, seed=9, dtype=torch.float32)
    bias = torch.zeros(2, 3)
    bias[1] = float("-inf")
    out = attention(q, k, v, bias)
    assert torch.all(out[0, 1] == 0) and torch.isfinite(out).all()


def test_gradients_match_sdpa():
    q, k, v = random_qkv((2,), 4, 2, 6, 9, 8, 5, dtype=torch.float64, seed=10)
    mask = causal_mask(6, 9)
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    attention(*ours, mask).sin().sum().backward()
    F.scaled_dot_product_attention(*ref, attn_mask=mask, enable_gqa=True).sin().sum().backward()
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-8)


def test_gradcheck():
    q, k, v = (t.requires_grad_() for t in random_qkv((1,), 2, 1, 3, 4, 3, 2, dtype=torch.float64, seed=11))
    mask = torch.tensor([[True, True, False, False], [True, False, True, True], [False] * 4])
    assert torch.autograd.gradcheck(lambda q, k, v: attention(q, k, v, mask, is_causal=True), (q, k, v))


@pytest.mark.parametrize("dtype, atol", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_half_precision_close_to_float32(dtype, atol):
    q, k, v = random_qkv((2,), 4, 2, 33, 47, 64, 64, seed=12, dtype=torch.float32)
    reference = attention(q, k, v, is_causal=True)
    low = attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True)
    assert low.dtype == dtype
    # fp16 keeps 11 significant bits, bf16 8: errors of a few units in the last place of
    # outputs that are O(1).
    torch.testing.assert_close(low.float(), reference, atol=atol, rtol=atol)


def test_softmax_stable_and_all_minus_inf():
    x = torch.tensor([[1000.0, 1001.0], [float("-inf")] * 2, [-1000.0, float("-inf")]])
    out = softmax(x)
    expected = torch.tensor([[1 / (1 + math.e), math.e / (1 + math.e)], [0.0, 0.0], [1.0, 0.0]])
    torch.testing.assert_close(out, expected)
    y = torch.randn(3, 4, 5)
    for dim in (0, 1, -1):
        torch.testing.assert_close(softmax(y, dim), torch.softmax(y, dim))


@pytest.mark.parametrize(
    "args, kwargs, error, words",
    [
        ((torch.randn(1, 2, 4), torch.randn(1, 3, 5), torch.randn(1, 3, 5)), {}, ValueError, "d_k=4 but k has d_k=5"),
        ((torch.randn(3, 2, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4)), {}, ValueError, "not a multiple"),
        ((torch.randn(2, 2, 4), torch.randn(2, 3, 4), torch.randn(2, 5, 4)), {}, ValueError, "k and v must agree"),
        ((torch.randn(2, 2, 2, 4), torch.randn(3, 2, 3, 4), torch.randn(3, 2, 3, 4)), {}, ValueError, "batch axes"),
        ((torch.randn(2, 4), torch.randn(3, 4).half(), torch.randn(3, 4)), {}, TypeError, "share a dtype"),
        ((torch.ones(2, 4, dtype=torch.long),) * 3, {}, TypeError, "floating-point"),
        (([[1.0]], torch.randn(3, 4), torch.randn(3, 4)), {}, TypeError, "q must be a torch.Tensor"),
        ((torch.randn(4), torch.randn(4), torch.randn(4)), {}, ValueError, "(..., heads, tokens, width)"),
        (
            (torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 4), torch.ones(3, 2, dtype=torch.bool)),
            {},
            ValueError,
            "does not broadcast",
        ),
        (
            (torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 4), torch.ones(2, 3, dtype=torch.long)),
            {},
            TypeError,
            "mask must be bool",
        ),
        ((torch.randn(2, 4), torch.randn(3, 4), torch.randn(3, 4)), {"scale": float("nan")}, ValueError, "scale"),
    ],
)
def test_bad_input_errors_name_the_argument(args, kwargs, error, words):
    with pytest.raises(error) as info:
        attention(*args, **kwargs)
    assert words in str(info.value)


def test_error_message_shows_shapes():
    with pytest.raises(ValueError, match=r"q: \(2, 8, 16, 64\), k: \(2, 8, 16, 32\)"):
        attention(torch.randn(2, 8, 16, 64), torch.randn(2, 8, 16, 32), torch.randn(2, 8, 16, 32))


def test_device_mismatch_is_reported():
    meta = torch.randn(3, 4, device="meta")
    with pytest.raises(ValueError, match="one device"):
        attention(torch.randn(2, 4), meta, meta)


def test_padding_mask_shape_and_errors():
    mask = padding_mask([2, 0], 3)
    assert mask.shape == (2, 1, 1, 3)
    assert mask[:, 0, 0].tolist() == [[True, True, False], [False, False, False]]
    with pytest.raises(ValueError, match="lengths must lie in 0..3"):
        padding_mask([4], 3)


def test_no_keys_at_all_gives_zeros():
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 0, 4), torch.randn(2, 0, 5)
    out, weights = attention(q, k, v, return_weights=True)
    assert out.shape == (2, 3, 5) and torch.all(out == 0) and weights.shape == (2, 3, 0)


def test_contract_names_are_importable_from_lib_attention():
    """DESIGN.md promises these mask helpers in lib.attention, wherever they are defined; the
    input checks are lib.validation's own and are not promised here."""
    import lib.attention
    import lib.masks

    for name in ("sliding_window_mask", "segment_mask", "mask_from_torch"):
        assert getattr(lib.attention, name) is getattr(lib.masks, name)
        assert name in lib.attention.__all__
    assert not {"validate_attention_inputs", "resolve_scale"} & set(lib.attention.__all__)
    assert set(lib.attention.__all__) >= {"softmax", "attention", "causal_mask", "padding_mask", "MultiHeadAttention"}


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_nan_at_a_padded_position_contributes_nothing(mask_kind):
    """0 · NaN is NaN: a NaN key or value no query may read must still reach no row."""
    q, k, v = random_qkv((2,), 4, 2, 6, 9, 8, 5, dtype=torch.float64, seed=21)
    mask = padding_mask([9, 6], 9)  # (B, 1, 1, M): sequence 1 has 3 padded keys
    if mask_kind == "float":
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    clean = attention(q, k, v, mask, is_causal=True)
    k[1, :, 6:], v[1, :, 6:] = float("nan"), float("nan")
    out, weights = attention(q, k, v, mask, is_causal=True, return_weights=True)
    torch.testing.assert_close(out, clean, atol=0, rtol=0)
    assert torch.all(weights[1, ..., 6:] == 0)


def test_a_nan_key_under_a_float_mask_reaches_only_the_rows_that_read_it():
    q, k, v = random_qkv((1,), 2, 2, 8, 8, 4, 4, dtype=torch.float64, seed=22)
    causal = torch.zeros(8, 8, dtype=torch.float64).masked_fill(~causal_mask(8, 8), float("-inf"))
    k[..., 5, :] = float("nan")
    out = attention(q, k, v, causal)
    assert torch.isnan(out[..., 5:, :]).all()
    torch.testing.assert_close(out[..., :5, :], attention(q[..., :5, :], k[..., :5, :], v[..., :5, :], is_causal=True))


def test_repeat_kv_serves_consecutive_query_heads():
    from lib.attention import repeat_kv

    kv = torch.arange(2 * 3 * 4.0).view(1, 2, 3, 4)  # (B, Hkv, M, D)
    expanded = repeat_kv(kv, 3)  # (B, 6, M, D)
    assert expanded.shape == (1, 6, 3, 4) and repeat_kv(kv, 1) is kv
    for head in range(6):
        assert torch.equal(expanded[:, head], kv[:, head // 3])
    torch.testing.assert_close(expanded, kv.repeat_interleave(3, dim=1), atol=0, rtol=0)


def test_dropout_falls_on_the_weights_that_read_v():
    q, k, v = random_qkv((1,), 4, 2, 5, 7, 8, 6, dtype=torch.float64, seed=23)
    torch.manual_seed(0)
    out, weights = attention(q, k, v, is_causal=True, dropout_p=0.5, return_weights=True)
    torch.manual_seed(0)
    _, undropped = attention(q, k, v, is_causal=True, return_weights=True)
    expected = torch.nn.functional.dropout(undropped, 0.5)  # the same draw, from the same seed
    torch.testing.assert_close(weights, expected, atol=0, rtol=0)
    torch.testing.assert_close(out, weights @ v.repeat_interleave(2, dim=1))
    with pytest.raises(ValueError, match=r"dropout_p must be a probability in \[0, 1\), got 1.0"):
        attention(q, k, v, dropout_p=1.0)

"""Linear attention: the O(N) forms equal a brute-force loop, and differ from softmax attention."""

import pytest
import torch
import torch.nn.functional as F
from conftest import random_qkv

from lib.attention import attention
from lib.costs import linear_attention_flops
from lib.linear_attention import elu_feature_map, linear_attention, linear_attention_quadratic


def brute_force(q, k, v, is_causal):
    """One query, one key at a time, straight from Katharopoulos et al. (2020), eq. 4."""
    groups = q.shape[-3] // k.shape[-3]
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    n, m = q.shape[-2], k.shape[-2]
    for index in torch.cartesian_prod(*[torch.arange(s) for s in q.shape[:-2]]).reshape(-1, q.ndim - 2).tolist():
        *batch, head = index
        kv_head = head // groups
        for i in range(n):
            numerator, normalizer = torch.zeros(v.shape[-1], dtype=q.dtype), 0.0
            for j in range(m):
                if is_causal and j > m - n + i:
                    continue
                weight = (F.elu(q[(*batch, head, i)]) + 1) @ (F.elu(k[(*batch, kv_head, j)]) + 1)
                numerator += weight * v[(*batch, kv_head, j)]
                normalizer += weight
            if normalizer:
                out[(*batch, head, i)] = numerator / normalizer
    return out


# (batch, H, Hkv, N, M, D, Dv, chunk): N != M both ways, GQA, chunks off the lengths
SHAPES = [
    ((2,), 4, 2, 7, 11, 5, 3, 4),
    ((1,), 2, 2, 9, 9, 4, 4, 2),
    ((), 3, 1, 10, 6, 3, 2, 4),
    ((1,), 1, 1, 1, 5, 4, 4, 64),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_forms_equal_a_brute_force_loop(shape, is_causal):
    batch, h, h_kv, n, m, d, d_v, chunk = shape
    q, k, v = random_qkv(batch, h, h_kv, n, m, d, d_v, dtype=torch.float64)
    expected = brute_force(q, k, v, is_causal)
    torch.testing.assert_close(linear_attention_quadratic(q, k, v, is_causal=is_causal), expected)
    torch.testing.assert_close(linear_attention(q, k, v, is_causal=is_causal, chunk=chunk), expected)


def test_chunked_causal_matches_quadratic_at_length():
    q, k, v = random_qkv((1,), 4, 2, 300, 300, 16, 16, seed=1, dtype=torch.float64)
    expected = linear_attention_quadratic(q, k, v, is_causal=True)
    for chunk in (1, 17, 64, 1000):
        torch.testing.assert_close(linear_attention(q, k, v, is_causal=True, chunk=chunk), expected)


def test_gradients_match_the_quadratic_twin():
    inputs = random_qkv((1,), 2, 2, 20, 20, 4, 4, seed=2, dtype=torch.float64)
    ours = [t.clone().requires_grad_() for t in inputs]
    ref = [t.clone().requires_grad_() for t in inputs]
    linear_attention(*ours, is_causal=True, chunk=6).square().sum().backward()
    linear_attention_quadratic(*ref, is_causal=True).square().sum().backward()
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_it_is_not_softmax_attention():
    """An approximation: the weights are φ(q)·φ(k), not exp(q·k/√d), so the outputs differ."""
    q, k, v = random_qkv((1,), 2, 2, 64, 64, 16, 16, seed=3, dtype=torch.float64)
    gap = (linear_attention(q, k, v) - attention(q, k, v)).abs().max().item()
    assert gap > 0.05
    # ... but it is a weighted average of the values: every output lies within their range
    out = linear_attention(q, k, v)
    assert (out <= v.amax(dim=-2, keepdim=True) + 1e-12).all() and (out >= v.amin(dim=-2, keepdim=True) - 1e-12).all()


def test_feature_map_is_positive():
    x = torch.linspace(-50, 50, 101, dtype=torch.float64)
    assert (elu_feature_map(x) > 0).all() and (elu_feature_map(x.float()) > 0).all()
    torch.testing.assert_close(elu_feature_map(x), F.elu(x) + 1, atol=1e-15, rtol=0)
    torch.testing.assert_close(elu_feature_map(torch.tensor([0.0, 2.0])), torch.tensor([1.0, 3.0]))


def test_flops_grow_linearly_and_match_the_counter():
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = random_qkv((), 1, 1, 96, 96, 8, 8, dtype=torch.float64)
    with FlopCounterMode(display=False) as counter:
        linear_attention(q[0], k[0], v[0])
    assert counter.get_total_flops() == linear_attention_flops(96, 96, 8)
    assert linear_attention_flops(8192, 8192, 64) == 2 * linear_attention_flops(4096, 4096, 64)


def test_causal_rows_before_the_first_key_are_zero():
    q, k, v = random_qkv((1,), 2, 2, 6, 3, 4, 4, seed=4, dtype=torch.float64)
    out = linear_attention(q, k, v, is_causal=True, chunk=2)
    assert (out[..., :3, :] == 0).all() and torch.isfinite(out).all()


def test_bad_input_is_reported():
    q, k, v = random_qkv((1,), 4, 3, 5, 5, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="not a multiple"):
        linear_attention(q, k, v)
    q, k, v = random_qkv((1,), 2, 2, 5, 5, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="chunk must be a positive integer"):
        linear_attention(q, k, v, is_causal=True, chunk=0)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        linear_attention(q, k, v, is_causal=None)


@pytest.mark.parametrize("position", ["key", "value"])
def test_a_nan_reaches_the_same_rows_whatever_the_chunk(position):
    """Rows before position 5 never read it: no chunk size lets the NaN reach them."""
    q, k, v = random_qkv((1,), 2, 1, 20, 20, 4, 4, dtype=torch.float64, seed=7)
    (k if position == "key" else v)[..., 5, :] = float("nan")
    reference = linear_attention_quadratic(q, k, v, is_causal=True)
    assert torch.isnan(reference[..., 5:, :]).all() and torch.isfinite(reference[..., :5, :]).all()
    clean = linear_attention_quadratic(q[..., :5, :], k[..., :5, :], v[..., :5, :], is_causal=True)
    torch.testing.assert_close(reference[..., :5, :], clean)
    for chunk in (1, 3, 4, 8, 64):
        got = linear_attention(q, k, v, is_causal=True, chunk=chunk)
        torch.testing.assert_close(got, reference, equal_nan=True)

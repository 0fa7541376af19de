"""One NaN contract for every attention path: a NaN or inf key or value that no query may read
(a padded position, or one older than every query's window) changes no output and no gradient.

The paths: ``attention`` (the plain twin), ``_fused_attention`` (SDPA), ``tiled_attention``
plain and fast, each plain, causal and windowed, with a bool and a float mask, for a prefill
(N = M) and for queries reading a longer cache (N < M); ``MultiHeadAttention`` both ways and a
``Block`` decoding from a ``KVCache`` whose padded slots hold NaN. Each test backpropagates and
checks that q's, k's and v's gradients are finite too, and that the outputs equal the same
call with the unread entries set to 0 (so nothing was silently zeroed that a query reads).
"""

import pytest
import torch

from lib.attention import _fused_attention, attention, padding_mask
from lib.blocks import Block
from lib.kv_cache import KVCache
from lib.masks import sliding_window_mask
from lib.tiled_softmax import tiled_attention

B, H, HKV, M, D = 2, 4, 2, 40, 8
LENGTHS = [40, 29]  # the second sequence's keys 29.. are padding
POISONED = (30, 33, 39)  # padded positions of sequence 1: NaN key, NaN value, inf key


def _poison(k, v):
    k, v = k.clone(), v.clone()
    k[1, :, POISONED[0]] = float("nan")
    v[1, :, POISONED[1]] = float("nan")
    k[1, :, POISONED[2]] = float("inf")
    return k, v


def _mask(kind):
    allowed = padding_mask(LENGTHS, M)  # (B, 1, 1, M)
    if kind == "bool":
        return allowed
    return torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed, float("-inf"))


def _paths(causal, window):
    """name -> f(q, k, v, mask), every way the library attends."""
    paths = {}
    if window is None:
        paths["attention"] = lambda q, k, v, mask: attention(q, k, v, mask, is_causal=causal)
        paths["fused"] = lambda q, k, v, mask: _fused_attention(q, k, v, mask, causal, 0.0)
    else:  # the windowed reference: attention with the window as a mask (the float mask carries it already)
        paths["attention"] = lambda q, k, v, mask: attention(
            q, k, v, mask & sliding_window_mask(q.shape[-2], M, window) if mask.dtype == torch.bool else mask
        )
    for fast in (True, False):
        paths[f"tiled fast={fast}"] = lambda q, k, v, mask, fast=fast: tiled_attention(
            q, k, v, mask, is_causal=causal, window=window, fast=fast, block_q=16, block_k=16
        )
    return paths


def _run(path, n_queries, k, v, mask, seed=0):
    q = torch.randn(B, H, n_queries, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    q, k, v = q.requires_grad_(), k.clone().requires_grad_(), v.clone().requires_grad_()
    out = path(q, k, v, mask)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (True, 16)])
@pytest.mark.parametrize("n_queries", [M, 5, 1])  # a prefill, then queries reading a longer cache
def test_a_nan_at_a_padded_position_changes_no_output_and_no_gradient(mask_kind, causal, window, n_queries):
    gen = torch.Generator().manual_seed(1)
    k = torch.randn(B, HKV, M, D, dtype=torch.float64, generator=gen)
    v = torch.randn(B, HKV, M, D, dtype=torch.float64, generator=gen)
    mask = _mask(mask_kind)
    if window is not None and mask_kind == "float":
        mask = mask.masked_fill(~sliding_window_mask(n_queries, M, window), float("-inf"))
    clean_k, clean_v = k.clone(), v.clone()
    clean_k[1, :, list(POISONED)] = 0.0
    clean_v[1, :, list(POISONED)] = 0.0
    poisoned_k, poisoned_v = _poison(k, v)
    for name, path in _paths(causal, window).items():
        got = _run(path, n_queries, poisoned_k, poisoned_v, mask)
        want = _run(path, n_queries, clean_k, clean_v, mask)
        for label, tensor, expected in zip(("output", "dq", "dk", "dv"), got, want, strict=True):
            assert torch.isfinite(tensor).all(), f"{name}: {label} is not finite"
            torch.testing.assert_close(tensor, expected, msg=lambda m, n=name, lb=label: f"{n}, {lb}: {m}")


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("n_queries", [1, 5])
def test_keys_older_than_every_window_are_unread_even_if_nan(fast, n_queries):
    """No mask at all: with N < M, keys before M - N - window + 1 are outside every query's window."""
    window = 8
    gen = torch.Generator().manual_seed(2)
    k = torch.randn(1, 2, M, D, dtype=torch.float64, generator=gen)
    v = torch.randn(1, 2, M, D, dtype=torch.float64, generator=gen)
    old = M - n_queries - window  # the newest key no query reads
    poisoned_k, poisoned_v = k.clone(), v.clone()
    poisoned_k[..., 0, :], poisoned_v[..., old, :] = float("nan"), float("inf")
    q = torch.randn(1, 2, n_queries, D, dtype=torch.float64, generator=gen, requires_grad=True)
    pk, pv = poisoned_k.requires_grad_(), poisoned_v.requires_grad_()
    out = tiled_attention(q, pk, pv, window=window, fast=fast, block_q=16, block_k=16)
    out.sum().backward()
    for label, tensor in (("output", out), ("dq", q.grad), ("dk", pk.grad), ("dv", pv.grad)):
        assert torch.isfinite(tensor).all(), label
    want = attention(q.detach(), k, v, sliding_window_mask(n_queries, M, window))
    torch.testing.assert_close(out.detach(), want)


@pytest.mark.parametrize("fused", [True, False])
def test_decoding_from_a_kv_cache_with_nan_in_its_padded_slots(fused):
    """A batch of two prompts, the shorter one right-padded, with NaN in the cache's padded slots
    (a cache's storage may hold anything there): each new token reads the cache with the padding
    masked, through ``MultiHeadAttention``'s fused or plain twin, and its output and every gradient
    (the new tokens', each parameter's) are those of a cache holding zeros there."""
    torch.manual_seed(4)
    block = Block(32, 4, n_kv_heads=2, ffn="swiglu", norm="rms").double()
    block.attn.fused = fused
    prompt, new, lengths = 12, 3, [12, 7]
    x = torch.randn(B, prompt + new, 32, dtype=torch.float64)
    keys_ok = padding_mask(lengths, prompt)  # (B, 1, 1, L): the real prompt tokens
    results = []
    for fill in (float("nan"), 0.0):
        cache = KVCache(B, 2, prompt + new, 8, dtype=torch.float64)
        with torch.no_grad():
            block(x[:, :prompt], keys_ok & torch.ones(prompt, prompt, dtype=torch.bool).tril(), cache=cache)
        cache.k[1, :, lengths[1] : prompt] = fill  # the padded slots
        cache.v[1, :, lengths[1] : prompt] = fill
        xs = x[:, prompt:].clone().requires_grad_()
        outs = []
        for t in range(new):  # each new token reads the real prompt tokens and the new ones so far
            readable = torch.cat([keys_ok, torch.ones(B, 1, 1, t + 1, dtype=torch.bool)], dim=-1)
            outs.append(block(xs[:, t : t + 1], readable, cache=cache))
        out = torch.cat(outs, dim=1)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
        results.append((out.detach(), xs.grad, {name: p.grad.clone() for name, p in block.named_parameters()}))
        block.zero_grad()
    (out, dx, grads), (clean_out, clean_dx, clean_grads) = results
    assert torch.isfinite(out).all() and torch.isfinite(dx).all()
    torch.testing.assert_close(out, clean_out)
    torch.testing.assert_close(dx, clean_dx)
    for name, grad in grads.items():
        assert torch.isfinite(grad).all(), name
        torch.testing.assert_close(grad, clean_grads[name], msg=lambda m, n=name: f"{n}: {m}")

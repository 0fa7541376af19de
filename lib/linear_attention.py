"""Linear attention with the elu + 1 feature map (chapter 5): an approximation, not a tiling.

Softmax attention weighs key j for query i by exp(q_i·k_j / √d_k), which couples every
query with every key: N·M pairs. Linear attention (Katharopoulos et al. 2020) replaces
that weight with a product of features, φ(q_i)·φ(k_j), with φ(x) = elu(x) + 1 > 0. Then
the sum over keys factors:

    out_i = Σ_j (φ(q_i)·φ(k_j)) v_j / Σ_j φ(q_i)·φ(k_j)
          = φ(q_i)ᵀ S / φ(q_i)ᵀ z,     S = Σ_j φ(k_j) v_jᵀ  (D, Dv),  z = Σ_j φ(k_j)  (D,)

S and z are built once, in M·D·Dv work, and each query reads them: the cost is linear
in N and grows with the feature width D instead (``lib.costs.linear_attention_flops``).
The weights are no longer a softmax, so the output differs from softmax attention: this
changes the model, and a network must be trained (or adapted) with it. Contrast
``lib.tiled_softmax``, which computes softmax attention exactly and only changes where
the numbers live.

Causal attention sums only the keys up to each query's position, i.e. S and z become
running sums. Materializing a running S for every position costs N·D·Dv memory, so the
keys are taken in chunks: inside a chunk the (C, C) products are formed with a causal
mask, and S, z carry everything before the chunk.

Shape letters: B batch axes (``...``), H query heads, Hkv key/value heads, N queries,
M keys, D head width, Dv value width, C the chunk length.
"""

from __future__ import annotations

import torch

from lib.attention import repeat_kv
from lib.validation import positive_int, validate_attention_inputs

CHUNK = 64  # keys per chunk of the causal form: big enough for fast matmuls, small enough that (C, C) is cheap


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1: positive everywhere, so every weight and normalizer is positive.

    Subtle: written literally, elu(x) + 1 = (exp(x) - 1) + 1 rounds to exactly 0 below
    x ≈ -37 in float64 (-17 in float32), and a zero row of features gives 0 / 0. For x ≤ 0
    the same value is exp(x), which stays positive far further down.
    """
    return torch.where(x > 0, x + 1.0, torch.exp(x.clamp(max=0.0)))


def _expand_kv_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Grouped-query heads: each KV head serves H // Hkv consecutive query heads (as in attention)."""
    if q.ndim < 3:
        return k, v
    groups = q.shape[-3] // k.shape[-3]
    return repeat_kv(k, groups), repeat_kv(v, groups)  # (..., H, M, ·)


def _read_values(weights: torch.Tensor, allowed: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weights (..., N, M) @ v (..., M, Dv), where a key a row may not read adds nothing.

    Subtle: a masked weight is 0, and 0 · NaN (or 0 · inf) is NaN, so with a non-finite value
    the plain product would reach rows that never read it. Only then is the sum written
    out with the mask, (N, M, Dv) at once: a rare path for inputs that are already broken.
    """
    if bool(torch.isfinite(v).all()):
        return weights @ v  # (..., N, Dv)
    products = weights[..., :, :, None] * v[..., None, :, :]  # (..., N, M, Dv)
    return products.masked_fill(~allowed[..., None], 0.0).sum(dim=-2)  # (..., N, Dv)


def _validate(q, k, v, is_causal):
    validate_attention_inputs(q, k, v, None)
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")


def linear_attention_quadratic(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = False):
    """The plain twin: form the (N, M) weights φ(q_i)·φ(k_j), mask, normalize rows, read v.

    Quadratic in N, as softmax attention is: it is here to check the linear forms against.
    Causal alignment is bottom-right, as everywhere in the book; a row with no key gives 0.
    """
    _validate(q, k, v, is_causal)
    k, v = _expand_kv_heads(q, k, v)
    weights = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)  # (..., H, N, M)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    allowed = torch.ones(n_queries, n_keys, dtype=torch.bool, device=q.device)  # (N, M)
    if is_causal:
        query_pos = torch.arange(n_queries, device=q.device)[:, None] + (n_keys - n_queries)  # (N, 1)
        allowed = torch.arange(n_keys, device=q.device)[None, :] <= query_pos  # (N, M)
        weights = weights.masked_fill(~allowed, 0.0)  # (..., H, N, M); a fill, not a product: 0 · NaN is NaN
    normalizer = weights.sum(dim=-1, keepdim=True)  # (..., H, N, 1)
    numerator = _read_values(weights, allowed, v)  # (..., H, N, Dv)
    return numerator / torch.where(normalizer > 0, normalizer, torch.ones_like(normalizer))  # (..., H, N, Dv)


def linear_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = False, chunk: int = CHUNK
) -> torch.Tensor:
    """Linear attention in O(N) time and memory: q (..., H, N, D), k (..., Hkv, M, D),
    v (..., Hkv, M, Dv) -> (..., H, N, Dv). Equals ``linear_attention_quadratic``.

    ``is_causal``: query i (at absolute position M - N + i) reads keys 0..M - N + i, through
    running sums of φ(k_j) v_jᵀ and φ(k_j), taken ``chunk`` keys at a time. A NaN or inf
    at key j reaches exactly the rows that read it, whatever the chunk.
    """
    _validate(q, k, v, is_causal)
    chunk = positive_int("chunk", chunk)
    k, v = _expand_kv_heads(q, k, v)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)  # (..., H, N, D), (..., H, M, D)
    if not is_causal:
        state = phi_k.transpose(-2, -1) @ v  # (..., H, D, Dv): S = Σ_j φ(k_j) v_jᵀ
        normalizer_state = phi_k.sum(dim=-2)  # (..., H, D): z = Σ_j φ(k_j)
        numerator = phi_q @ state  # (..., H, N, Dv)
        normalizer = (phi_q @ normalizer_state[..., None]).clamp_min(torch.finfo(q.dtype).tiny)  # (..., H, N, 1)
        return numerator / normalizer

    n_queries, n_keys = q.shape[-2], k.shape[-2]
    offset = n_keys - n_queries  # keys before the first query's position: every query reads them
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)  # (..., H, N, Dv)
    past = max(offset, 0)
    state = phi_k[..., :past, :].transpose(-2, -1) @ v[..., :past, :]  # (..., H, D, Dv)
    normalizer_state = phi_k[..., :past, :].sum(dim=-2)  # (..., H, D)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril_()  # (C, C): who reads whom in a chunk
    for key_start in range(past, n_keys, chunk):
        key_end = min(key_start + chunk, n_keys)
        rows = slice(key_start - offset, key_end - offset)  # the queries at these same positions
        phi_q_c = phi_q[..., rows, :]  # (..., H, C, D)
        phi_k_c, v_c = phi_k[..., key_start:key_end, :], v[..., key_start:key_end, :]  # (..., H, C, ·)
        within = (phi_q_c @ phi_k_c.transpose(-2, -1)).tril_()  # (..., H, C, C): each query's keys in the chunk
        n_rows, n_cols = within.shape[-2:]
        numerator = phi_q_c @ state + _read_values(within, causal[:n_rows, :n_cols], v_c)  # (..., H, C, Dv)
        normalizer = phi_q_c @ normalizer_state[..., None] + within.sum(dim=-1, keepdim=True)  # (..., H, C, 1)
        out[..., rows, :] = numerator / normalizer.clamp_min(torch.finfo(q.dtype).tiny)
        state = state + phi_k_c.transpose(-2, -1) @ v_c  # fold the chunk into the running sums
        normalizer_state = normalizer_state + phi_k_c.sum(dim=-2)
    return out  # rows before the first key (N > M) read nothing and stay 0

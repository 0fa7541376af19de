"""Scaled dot-product attention, written out in full (chapters 1 and 2).

This is the reference every other module in the book is checked against: the tiled
FlashAttention loop, the KV cache and the transformer block all promise to give what
`attention` gives.

Shape letters used in the comments:
    B    batch (any number of leading dimensions, written ``...``)
    H    query heads
    Hkv  key/value heads (H is a multiple of Hkv: grouped-query attention)
    N    queries
    M    keys and values
    D    key/query width d_k          Dv  value width d_v

The contract (DESIGN.md):
    * a boolean mask is True where a query MAY read a key, the polarity of
      ``torch.nn.functional.scaled_dot_product_attention``; a float mask is added to the
      scores (0 allowed, -inf disallowed);
    * ``is_causal`` is aligned bottom-right: with N queries and M keys, query i sits at
      absolute position M - N + i, as it does when new queries read a KV cache;
    * a query row with no allowed key gives a zero output row and zero weights, never NaN.
"""

from __future__ import annotations

import math
import numbers

import torch

__all__ = [
    "softmax",
    "attention",
    "causal_mask",
    "sliding_window_mask",
    "padding_mask",
    "validate_attention_inputs",
    "resolve_scale",
]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax; a row whose entries are all -inf gives all zeros.

    exp(x) overflows float32 once x > 88, so we subtract the row maximum first: softmax is
    unchanged by adding a constant to every entry of a row, and afterwards the largest
    exponent is exp(0) = 1.

    Subtle: in a fully masked row the maximum is -inf, and -inf - (-inf) is NaN. We shift
    such rows by 0 instead, so every exponent is exp(-inf) = 0, and divide by 1 instead of
    by their zero sum. The result is a zero row with zero (finite) gradients.

    >>> softmax(torch.tensor([1000.0, 1000.0]))
    tensor([0.5000, 0.5000])
    >>> softmax(torch.tensor([float("-inf"), float("-inf")]))
    tensor([0., 0.])
    """
    if x.shape[dim] == 0:
        return torch.zeros_like(x)  # no keys at all: nothing to normalize
    row_max = x.amax(dim=dim, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    # The max is a constant shift: detaching it changes no gradient, and saves work.
    exps = torch.exp(x - row_max.detach())
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))


def causal_mask(n_queries: int, n_keys: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean (N, M) mask, True where query i may read key j, aligned bottom-right.

    Query i sits at absolute position ``n_keys - n_queries + i`` and reads keys
    0 .. that position. With N == M this is the familiar lower triangle. With N < M
    (new queries reading a KV cache) the last query reads every key. With N > M the
    first N - M queries have no key to read: their rows are all False.

    Subtle: torch's ``scaled_dot_product_attention(is_causal=True)`` aligns top-left
    instead (query i reads keys 0..i whatever M is); the two agree only when N == M.
    """
    if n_queries < 0 or n_keys < 0:
        raise ValueError(f"causal_mask needs non-negative sizes, got n_queries={n_queries}, n_keys={n_keys}")
    query_pos = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)  # (N, 1)
    key_pos = torch.arange(n_keys, device=device)[None, :]  # (1, M)
    return key_pos <= query_pos  # (N, M)


def sliding_window_mask(
    n_queries: int, n_keys: int, window: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean (N, M) mask: query i reads the ``window`` most recent keys up to its own position.

    Aligned bottom-right like ``causal_mask``: query i sits at absolute position
    p = n_keys - n_queries + i and reads key j iff p - window < j <= p. With a window at
    least as long as the keys this is exactly ``causal_mask``; ``window=1`` reads only itself.
    """
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    if n_queries < 0 or n_keys < 0:
        raise ValueError(f"sliding_window_mask needs non-negative sizes, got n_queries={n_queries}, n_keys={n_keys}")
    query_pos = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)  # (N, 1)
    key_pos = torch.arange(n_keys, device=device)[None, :]  # (1, M)
    return (key_pos <= query_pos) & (key_pos > query_pos - window)  # (N, M)


def padding_mask(lengths: torch.Tensor | list[int], n: int) -> torch.Tensor:
    """Boolean (B, 1, 1, n) key mask: True for the first ``lengths[b]`` keys of sequence b.

    The two singleton axes broadcast over heads and queries, so the result combines with
    a causal mask by ``&``: ``padding_mask(lengths, M) & causal_mask(N, M)``.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths must be a 1-D sequence of integers, got {tuple(lengths.shape)} of {lengths.dtype}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > n):
        raise ValueError(f"lengths must lie in 0..{n}, got {lengths.tolist()}")
    key_pos = torch.arange(n, device=lengths.device)  # (M,)
    return (key_pos[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, M)


def validate_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> None:
    """Raise a TypeError/ValueError naming the argument and the shapes seen."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if not tensor.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got {tensor.dtype}")
        if tensor.ndim < 2:
            raise ValueError(f"{name} must have shape (..., heads, tokens, width), got {tuple(tensor.shape)}")
    shapes = f"(q: {tuple(q.shape)}, k: {tuple(k.shape)}, v: {tuple(v.shape)})"
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}")
    if not q.ndim == k.ndim == v.ndim:
        raise ValueError(f"q, k and v must have the same number of dimensions {shapes}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]} {shapes}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k and v must agree on every axis but the last {shapes}")
    if q.ndim >= 3:
        if q.shape[:-3] != k.shape[:-3]:
            raise ValueError(f"q and k must have the same batch axes {shapes}")
        n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
        if n_kv_heads == 0 or n_heads % n_kv_heads:
            raise ValueError(
                f"q has {n_heads} heads, which is not a multiple of the {n_kv_heads} KV heads of k and v {shapes}"
            )
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
        if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
            raise TypeError(f"mask must be bool (True = may read) or float (added to scores), got {mask.dtype}")
        if mask.device != q.device:
            raise ValueError(f"mask is on {mask.device} but q is on {q.device}")
        score_shape = (*q.shape[:-1], k.shape[-2])  # (..., H, N, M)
        try:
            broadcast = torch.broadcast_shapes(mask.shape, score_shape)
        except RuntimeError:
            broadcast = None
        if broadcast != torch.Size(score_shape):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {score_shape} {shapes}"
            )


def resolve_scale(scale: float | None, q: torch.Tensor) -> float:
    """The score scale: 1/sqrt(d_k) by default, else any finite real number (int, float, numpy scalar)."""
    if scale is None:
        if q.shape[-1] == 0:
            raise ValueError(f"q has d_k=0, so the default scale 1/sqrt(d_k) is undefined (q: {tuple(q.shape)})")
        return 1.0 / math.sqrt(q.shape[-1])
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(float(scale)):
        raise ValueError(f"scale must be a finite real number or None, got {scale!r}")
    return float(scale)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ · scale + mask) v, the plain way: the whole score matrix in memory.

    Args:
        q: queries, (..., H, N, D). A 2-D (N, D) tensor is read as one head.
        k: keys, (..., Hkv, M, D), with H a multiple of Hkv. Query head i reads KV head
            i // (H // Hkv), the grouping of torch's ``enable_gqa``.
        v: values, (..., Hkv, M, Dv).
        mask: bool (True = may read) or float (added to the scores), broadcastable to
            (..., H, N, M).
        is_causal: also apply ``causal_mask(N, M)``, aligned bottom-right.
        scale: multiplies the scores; defaults to 1 / sqrt(D).
        return_weights: also return the attention weights (..., H, N, M).

    Returns:
        The output (..., H, N, Dv), and the weights when ``return_weights``. Half-precision
        inputs are computed with a float32 softmax and returned in their own dtype.
    """
    validate_attention_inputs(q, k, v, mask)
    scale = resolve_scale(scale, q)

    n_queries, n_keys = q.shape[-2], k.shape[-2]
    if q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        # Grouped-query attention: each KV head serves H // Hkv consecutive query heads.
        n_groups = q.shape[-3] // k.shape[-3]
        k = k.repeat_interleave(n_groups, dim=-3)  # (..., H, M, D)
        v = v.repeat_interleave(n_groups, dim=-3)  # (..., H, M, Dv)

    scores = (q @ k.transpose(-2, -1)) * scale  # (..., H, N, M)
    if mask is not None and mask.dtype != torch.bool:
        scores = scores + mask.to(scores.dtype)  # additive: 0 allowed, -inf disallowed
    allowed = mask if mask is not None and mask.dtype == torch.bool else None
    if is_causal:
        causal = causal_mask(n_queries, n_keys, device=q.device)  # (N, M)
        allowed = causal if allowed is None else allowed & causal
    if allowed is not None:
        # Mask BEFORE the softmax: a disallowed key must not enter the denominator.
        scores = scores.masked_fill(~allowed, float("-inf"))  # (..., H, N, M)

    # At least float32 for the softmax of fp16/bf16 inputs: exp and the row sum lose too
    # much in 8-11 bits. float64 stays float64.
    softmax_dtype = torch.promote_types(scores.dtype, torch.float32)
    weights = softmax(scores.to(softmax_dtype), dim=-1).to(q.dtype)  # (..., H, N, M)
    output = weights @ v  # (..., H, N, Dv)
    return (output, weights) if return_weights else output

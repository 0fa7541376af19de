"""Masks beyond the causal and padding ones (chapters 2 and 5).

``lib.attention`` holds the two masks every chapter uses (``causal_mask``,
``padding_mask``) and re-exports the first three of these:

* ``sliding_window_mask``: each query reads only its ``window`` most recent keys,
  aligned bottom-right like ``causal_mask``;
* ``segment_mask``: tokens read only their own segment, for several documents packed
  into one row; combine it with ``causal_mask`` and ``padding_mask`` by ``&``;
* ``mask_from_torch``: translates ``nn.MultiheadAttention``'s masks, whose booleans mean
  "blocked", into this book's (and SDPA's), where True means "may read";
* ``zero_unread_keys``: zeroes the keys or values no query may read, so that a NaN at a
  padded position cannot reach any row through 0 · NaN (every masked attention path calls it).

Shape letters: B batch, h heads, N queries, M keys.
"""

from __future__ import annotations

import torch

from lib.validation import positive_int

__all__ = ["sliding_window_mask", "segment_mask", "mask_from_torch", "zero_unread_keys"]


def sliding_window_mask(
    n_queries: int, n_keys: int, window: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean (N, M) mask: query i reads the ``window`` most recent keys up to its own position.

    Aligned bottom-right like ``causal_mask``: query i sits at absolute position
    p = n_keys - n_queries + i and reads key j iff p - window < j <= p. With a window at
    least as long as the keys this is exactly ``causal_mask``; ``window=1`` reads only itself.
    """
    window = positive_int("window", window)
    if n_queries < 0 or n_keys < 0:
        raise ValueError(f"sliding_window_mask needs non-negative sizes, got n_queries={n_queries}, n_keys={n_keys}")
    query_pos = torch.arange(n_queries, device=device)[:, None] + (n_keys - n_queries)  # (N, 1)
    key_pos = torch.arange(n_keys, device=device)[None, :]  # (1, M)
    return (key_pos <= query_pos) & (key_pos > query_pos - window)  # (N, M)


def segment_mask(query_segments: torch.Tensor | list, key_segments: torch.Tensor | list | None = None) -> torch.Tensor:
    """Boolean mask, True where a query and a key belong to the same segment (document).

    Several short documents packed into one row must not read each other: give every token
    the id of its document and let it read only keys with the same id.

    Args:
        query_segments: integer ids, (N,) for one sequence or (B, N) for a batch.
        key_segments: ids of the keys, (M,) or (B, M); defaults to ``query_segments``
            (self-attention). With a KV cache the queries are the last N of M positions,
            so pass ``key_segments`` for all M and ``query_segments`` for the last N.

    Returns:
        (N, M) for 1-D ids, (B, 1, N, M) for 2-D ids (the 1 broadcasts over heads), ready to
        combine with ``causal_mask`` and ``padding_mask`` by ``&``.
    """
    queries = torch.as_tensor(query_segments)
    keys = queries if key_segments is None else torch.as_tensor(key_segments, device=queries.device)
    for name, ids in (("query_segments", queries), ("key_segments", keys)):
        if ids.ndim not in (1, 2) or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(
                f"{name} must be integer ids of shape (N,) or (B, N), got {tuple(ids.shape)} of {ids.dtype}"
            )
    if queries.ndim != keys.ndim or (queries.ndim == 2 and queries.shape[0] != keys.shape[0]):
        raise ValueError(
            f"query_segments {tuple(queries.shape)} and key_segments {tuple(keys.shape)} "
            "must both be 1-D or both (B, ...) with the same batch size"
        )
    same = queries[..., :, None] == keys[..., None, :]  # (N, M) or (B, N, M)
    return same if same.ndim == 2 else same[:, None]  # (N, M) or (B, 1, N, M)


def mask_from_torch(
    attn_mask: torch.Tensor | None = None,
    key_padding_mask: torch.Tensor | None = None,
    *,
    n_heads: int | None = None,
) -> torch.Tensor | None:
    """Translate the masks of ``nn.MultiheadAttention`` into this module's convention.

    Subtle: that module reads a boolean ``attn_mask`` or ``key_padding_mask`` the other way
    round: True means "may NOT read" (is padding). Ours and SDPA's mean "may read". Float
    masks are added to the scores in both conventions and pass through unchanged.

    Args:
        attn_mask: (N, M), or (B * h, N, M) with ``n_heads`` = h given.
        key_padding_mask: (B, M), True (or -inf) at padded keys.
        n_heads: needed to split a 3-D ``attn_mask`` into (B, h, N, M).

    Returns:
        None, or a mask broadcastable to (B, h, N, M): bool (True = may read) when both
        inputs are bool, otherwise float (0 allowed, -inf disallowed).
    """
    parts = []
    if attn_mask is not None:
        if attn_mask.ndim == 3:
            if n_heads is None or attn_mask.shape[0] % n_heads:
                raise ValueError(
                    f"a 3-D attn_mask {tuple(attn_mask.shape)} is (B * n_heads, N, M); "
                    f"pass n_heads dividing its first axis, got n_heads={n_heads}"
                )
            attn_mask = attn_mask.reshape(-1, n_heads, *attn_mask.shape[1:])  # (B, h, N, M)
        elif attn_mask.ndim != 2:
            raise ValueError(f"attn_mask must be (N, M) or (B * n_heads, N, M), got {tuple(attn_mask.shape)}")
        parts.append(attn_mask)
    if key_padding_mask is not None:
        if key_padding_mask.ndim != 2:
            raise ValueError(f"key_padding_mask must be (B, M), got {tuple(key_padding_mask.shape)}")
        parts.append(key_padding_mask[:, None, None, :])  # (B, 1, 1, M)
    if not parts:
        return None
    if all(part.dtype == torch.bool for part in parts):
        allowed = ~parts[0]  # flip the polarity: True now means "may read"
        for part in parts[1:]:
            allowed = allowed & ~part
        return allowed
    dtype = next(part.dtype for part in parts if part.dtype != torch.bool)
    total = None
    for part in parts:
        if part.dtype == torch.bool:  # True = blocked becomes -inf, False becomes 0
            part = torch.zeros(part.shape, dtype=dtype, device=part.device).masked_fill(part, float("-inf"))
        total = part if total is None else total + part
    return total


def zero_unread_keys(x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """x (..., Hkv, M, ·) with each key that no query may read set to 0 (``allowed``: True = may read).

    Subtle: a masked weight is exactly 0, but 0 · NaN is NaN, so a NaN (or inf) value at a
    padded position would reach every row through ``weights @ v``; in scores, NaN + (-inf)
    is NaN. Zeroing what no query reads changes no output that was finite. Query heads that
    share a KV head (GQA) keep a key if any of them reads it.
    """
    readable = torch.atleast_2d(allowed).any(dim=-2)  # (..., H or 1, M)
    if readable.ndim >= 2 and x.ndim >= 3 and readable.shape[-2] not in (1, x.shape[-3]):
        readable = readable.unflatten(-2, (x.shape[-3], -1)).any(dim=-2)  # (..., Hkv, M): any head of the group
    if bool(readable.all()):
        return x
    return x.masked_fill(~readable[..., None], 0.0)  # (..., Hkv, M, ·)

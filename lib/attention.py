"""Scaled dot-product attention and multi-head attention, written out in full (chapters 1 and 2).

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

Chapter 2 adds ``MultiHeadAttention`` (an SDPA path and its plain twin; C = d_model).
Input checks live in ``lib.validation``, the other mask helpers in ``lib.masks``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lib.masks import mask_from_torch, segment_mask, sliding_window_mask, zero_unread_keys
from lib.validation import check_heads, probability, resolve_scale, validate_attention_inputs, validate_module_inputs

__all__ = ["softmax", "attention", "causal_mask", "sliding_window_mask", "padding_mask", "segment_mask"]
__all__ += ["mask_from_torch", "repeat_kv", "MultiHeadAttention"]


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


def repeat_kv(x: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Grouped-query attention's expansion: (..., Hkv, M, D) -> (..., Hkv · n_groups, M, D).

    Each KV head is repeated for the ``n_groups`` consecutive query heads it serves, so query
    head i reads KV head i // n_groups (torch's ``enable_gqa``, HF's ``repeat_kv``). A copy:
    a KV cache stores the Hkv heads and expands them only here, inside attention.
    """
    if n_groups == 1:
        return x
    x = x.unsqueeze(-3).expand(*x.shape[:-2], n_groups, *x.shape[-2:])  # (..., Hkv, G, M, D), a view
    return x.flatten(-4, -3)  # (..., Hkv·G, M, D)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
    dropout_p: float = 0.0,
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
        dropout_p: drop each weight with this probability (the kept ones scaled by
            1 / (1 - p)), after the softmax and before reading v. The caller decides when:
            ``MultiHeadAttention`` passes its ``dropout`` in training only.

    Returns:
        The output (..., H, N, Dv), and the weights when ``return_weights`` (after dropout,
        the ones that read v). Half-precision inputs are computed with a float32 softmax and
        returned in their own dtype. A key that no query may read contributes nothing, even
        if it holds NaN or inf.
    """
    validate_attention_inputs(q, k, v, mask)
    scale = resolve_scale(scale, q)
    dropout_p = probability("dropout_p", dropout_p)

    n_queries, n_keys = q.shape[-2], k.shape[-2]
    if q.ndim >= 3:
        # Grouped-query attention: each KV head serves H // Hkv consecutive query heads.
        n_groups = q.shape[-3] // k.shape[-3]
        k, v = repeat_kv(k, n_groups), repeat_kv(v, n_groups)  # (..., H, M, D), (..., H, M, Dv)

    allowed = None  # True where a query may read a key
    if mask is not None:
        allowed = mask if mask.dtype == torch.bool else mask != float("-inf")
        # Zero the keys and values no query may read, BEFORE any product: a NaN there would
        # reach the output through 0 · NaN in weights @ v, and q's gradient through dS @ k.
        # (Causal alone hides no key from every query.)
        k, v = zero_unread_keys(k, allowed), zero_unread_keys(v, allowed)  # (..., H, M, D), (..., H, M, Dv)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., H, N, M)
    if mask is not None and mask.dtype != torch.bool:
        scores = scores + mask.to(scores.dtype)  # additive: 0 allowed, -inf disallowed
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
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)  # kept weights scaled by 1 / (1 - p)
    output = weights @ v  # (..., H, N, Dv)
    return (output, weights) if return_weights else output


# --- Chapter 2: multi-head attention ---------------------------------------------------


def _fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    is_causal: bool,
    dropout_p: float,
) -> torch.Tensor:
    """``attention`` through torch's SDPA, with our causal alignment and zero-row convention.

    SDPA may run a fused kernel (flash, memory-efficient, cuDNN, or a CPU flash loop); which
    one runs depends on device, dtype, shapes and mask, and is never promised.
    """
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    gqa = q.shape[-3] != k.shape[-3]
    if is_causal and mask is None and (n_queries == n_keys or (n_queries == 1 and n_keys >= 1)):
        # SDPA needs no mask from us here. With N == M its top-left causal is our bottom-right
        # one (the flag lets it skip the masked half); one decode query (N = 1) sits at the
        # last position and reads every key, so nothing is masked and SDPA takes its fast path.
        causal = n_queries == n_keys
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal, enable_gqa=gqa)
    if is_causal:  # N != M or another mask too: spell the bottom-right triangle out
        causal = causal_mask(n_queries, n_keys, device=q.device)  # (N, M)
        if mask is None:
            mask = causal
        elif mask.dtype == torch.bool:
            mask = mask & causal
        else:
            mask = mask.masked_fill(~causal, float("-inf"))
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, enable_gqa=gqa)
    if mask.dtype != torch.bool:
        mask = mask.to(q.dtype)  # SDPA wants a float mask in the dtype of q
    allowed = mask if mask.dtype == torch.bool else mask > float("-inf")
    k, v = zero_unread_keys(k, allowed), zero_unread_keys(v, allowed)  # (B, Hkv, M, ·): no 0 · NaN from padding
    # Subtle: a row with no allowed key is NaN in some SDPA kernels. Let such rows read
    # everything (finite values and gradients), then zero them: our convention.
    has_key = allowed.any(dim=-1, keepdim=True)  # (..., N, 1)
    if bool(has_key.all()):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=gqa)
    mask = mask | ~has_key if mask.dtype == torch.bool else mask.masked_fill(~has_key, 0.0)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, enable_gqa=gqa)
    return output.masked_fill(~has_key, 0.0)  # (B, H, N, Dv)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: h separately parameterized reads of the same sequence.

    ``forward(x)`` is self-attention; ``forward(x, context)`` is cross-attention, queries
    from x (B, N, C) and keys and values from context (B, M, C). The module is always
    batch-first. Heads have width D = d_model / n_heads (d_k = d_v = D, a convention).

    Args:
        d_model: the model width C.
        n_heads: query heads H; must divide d_model.
        n_kv_heads: key/value heads Hkv, a divisor of H (default H). Fewer KV heads is
            grouped-query attention (GQA, Ainslie et al. 2023); one is multi-query attention
            (MQA, Shazeer 2019). The k and v projections shrink by H / Hkv.
        bias: biases in the four projections.
        dropout: probability of dropping an attention weight in training; off in ``eval()``.
        fused: True routes the read through ``F.scaled_dot_product_attention``; False
            through ``attention``, the plain twin. Both give the same outputs and gradients
            (tests/test_multihead.py); the attribute can be switched at any time.

    The pieces are public so that a KV cache can reuse them: ``project`` gives the heads,
    ``attend`` reads them (any M, bottom-right causal), ``merge_heads`` + ``out_proj`` finish.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        n_kv_heads: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        fused: bool = True,
    ) -> None:
        super().__init__()
        n_heads, n_kv_heads, d_model = check_heads(n_heads, n_kv_heads, d_model)
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.dropout = probability("dropout", dropout)
        self.fused = bool(fused)
        self.q_proj = nn.Linear(d_model, n_heads * self.head_dim, bias=bias)  # C -> H·D
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)  # C -> Hkv·D
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=bias)  # C -> Hkv·D
        self.out_proj = nn.Linear(n_heads * self.head_dim, d_model, bias=bias)  # H·D -> C

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, "
            f"head_dim={self.head_dim}, dropout={self.dropout}, fused={self.fused}"
        )

    @staticmethod
    def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
        """(B, N, h·D) -> (B, h, N, D): cut the features into h heads, then move heads forward."""
        batch, tokens, width = x.shape
        return x.view(batch, tokens, n_heads, width // n_heads).transpose(1, 2)  # (B, h, N, D)

    @staticmethod
    def merge_heads(x: torch.Tensor) -> torch.Tensor:
        """(B, h, N, D) -> (B, N, h·D): the inverse of ``split_heads`` (concatenate the heads).

        Subtle: the transpose must come before the reshape. Reshaping (B, h, N, D) straight
        to (B, N, h·D) runs without error and mixes tokens of different positions.
        """
        batch, heads, tokens, width = x.shape
        return x.transpose(1, 2).reshape(batch, tokens, heads * width)  # (B, N, h·D)

    def project(
        self, x: torch.Tensor, context: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries from x, keys and values from context (default x), split into heads."""
        source = x if context is None else context
        q = self.split_heads(self.q_proj(x), self.n_heads)  # (B, H, N, D)
        k = self.split_heads(self.k_proj(source), self.n_kv_heads)  # (B, Hkv, M, D)
        v = self.split_heads(self.v_proj(source), self.n_kv_heads)  # (B, Hkv, M, D)
        return q, k, v

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """Each query head reads its KV head: (B, H, N, D), (B, Hkv, M, D) x2 -> (B, H, N, D).

        ``is_causal`` is bottom-right (query i at position M - N + i), so new queries can
        read cached keys. Dropout falls on the weights, in training only.
        """
        dropout_p = self.dropout if self.training else 0.0
        if self.fused:
            return _fused_attention(q, k, v, mask, is_causal, dropout_p)
        return attention(q, k, v, mask, is_causal=is_causal, dropout_p=dropout_p)  # (B, H, N, D)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
    ) -> torch.Tensor:
        """(B, N, C) -> (B, N, C). With ``context`` (B, M, C): cross-attention.

        ``mask`` follows the contract of ``attention`` (bool True = may read, or float added
        to the scores), broadcastable to (B, H, N, M), e.g. ``padding_mask(lengths, M)``.
        """
        validate_module_inputs(x, context, mask, d_model=self.d_model, n_heads=self.n_heads)
        q, k, v = self.project(x, context)  # (B, H, N, D), (B, Hkv, M, D), (B, Hkv, M, D)
        heads = self.attend(q, k, v, mask, is_causal=is_causal)  # (B, H, N, D)
        return self.out_proj(self.merge_heads(heads))  # (B, N, C)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention, *, fused: bool = True) -> MultiHeadAttention:
        """A copy of ``nn.MultiheadAttention`` that gives the same outputs.

        Ours is always batch-first: for a ``batch_first=False`` module, feed (B, N, C) where
        it takes (N, B, C). Its masks read True as "blocked": translate them with
        ``mask_from_torch``. ``add_bias_kv``, ``add_zero_attn`` and kdim/vdim != embed_dim
        have no counterpart here and are refused.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"module must be an nn.MultiheadAttention, got {type(module).__name__}")
        if not module._qkv_same_embed_dim:
            raise ValueError(
                f"kdim={module.kdim} / vdim={module.vdim} differ from embed_dim={module.embed_dim}: not supported"
            )
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn have no counterpart in MultiHeadAttention")
        bias = module.in_proj_bias is not None
        weight = module.in_proj_weight
        ours = cls(module.embed_dim, module.num_heads, bias=bias, dropout=module.dropout, fused=fused)
        ours = ours.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            # in_proj_weight stacks W_Q, W_K, W_V as rows: (3C, C)
            projections = (ours.q_proj, ours.k_proj, ours.v_proj)
            for projection, part in zip(projections, weight.chunk(3), strict=True):
                projection.weight.copy_(part)
            for projection, part in zip(projections, module.in_proj_bias.chunk(3) if bias else (), strict=False):
                projection.bias.copy_(part)
            ours.out_proj.load_state_dict(module.out_proj.state_dict())
        return ours.train(module.training)

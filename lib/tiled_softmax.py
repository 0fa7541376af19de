"""Exact attention in tiles: FlashAttention, forward and backward, in a plain and a fast twin (chapter 5).

Naive attention (lib.attention) materializes the whole (N, M) score matrix per head. The
tiled version never does: it walks over blocks of keys keeping, for every query row,
    m   the largest score seen so far,
    l   the sum of exp(score - m) so far,
    acc the sum of exp(score - m) · value so far,
and when a new block raises m it rescales l and acc by exp(m_old - m_new) before adding
the block. At the end acc / l is exactly softmax(scores) @ v: one global softmax, not a
softmax per tile (Dao et al. 2022, Algorithm 1; the loop order is FlashAttention-2's).
The update of m and l is ``lib.online_softmax``'s; which tiles a loop visits (the block
sizes, the causal and windowed schedules) is ``lib.tiling``'s.

Shape letters: B batch axes (``...``), H query heads, Hkv key/value heads, G = H // Hkv
query heads per KV head, N queries, M keys, D head width, Dv value width, bq/bk the
query/key block sizes.

On a CPU "SRAM" is the cache and "HBM" is main memory; what matters here is that no tensor
bigger than a (bq, bk) tile per head is ever created, so memory stays linear in N.

Two twins of the loop. The plain one (``_forward_plain``) reads as Algorithm 1: a block of
queries, every block of keys, ``online_softmax_update`` once per tile, masks applied by
position. The fast one (``_forward_fast``, the default) adds four refinements, each exact,
each worth a measured share of the speed; tests hold the two equal, outputs and gradients:
    * causal attention in two phases: unmasked tiles below the diagonal, one masked tile on
      it (walked in strips of rows, each as wide as its rows read), nothing above; a sliding
      window also skips every tile left of its band, so its work grows linearly in N (the
      schedule is ``lib.tiling``'s);
    * conditional rescaling: once every row has a max, m is kept unless a tile's sums would
      grow too large, which skips a max and a rescale for most tiles (``_forward_fast``);
    * one scratch buffer, reused, for every score tile;
    * diagonal tiles clamp before ``exp`` (torch's CPU exp is slow below -87; ``_exp_tile``).
"""

from __future__ import annotations

import math

import torch

from lib.masks import zero_unread_keys
from lib.online_softmax import finite_or_zero, online_softmax_update
from lib.tiling import BLOCK_K, BLOCK_Q, GroupedHeads, Tiling
from lib.validation import optional_positive_int, positive_int, resolve_scale, validate_attention_inputs

__all__ = ["tiled_attention", "TiledAttention"]


def _masked_scores(scores: torch.Tensor, heads: GroupedHeads, tiling: Tiling, q_start: int, k_start: int, banded: bool):
    """A tile of scores (..., bq, bk) with every mask applied exactly: -inf wherever a query may
    not read, whatever the score was (NaN or inf included). Out of place; the plain way."""
    bq, bk = scores.shape[-2:]
    if heads.mask is not None:
        tile_mask = heads.mask[..., q_start : q_start + bq, k_start : k_start + bk]  # (..., bq, bk)
        if tile_mask.dtype == torch.bool:
            scores = scores.masked_fill(~tile_mask, float("-inf"))
        else:  # subtle: NaN + (-inf) is NaN, so fill the -inf entries again
            scores = (scores + tile_mask).masked_fill(tile_mask == float("-inf"), float("-inf"))
    if banded:
        band = tiling.band(q_start, bq, k_start, bk, heads.n_queries, heads.n_keys, scores.device)  # (bq, bk)
        scores = scores.masked_fill(~band, float("-inf"))
    return scores


def _forward_plain(heads: GroupedHeads, tiling: Tiling) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 1 of FlashAttention (Dao et al. 2022), in FlashAttention-2's loop order.

    Returns the output (..., Hkv, G, N, Dv) and the row log-sum-exp (..., Hkv, G, N).
    """
    n_queries, n_keys = heads.n_queries, heads.n_keys
    acc_dtype = torch.promote_types(heads.q.dtype, torch.float32)  # m, l and acc in float32 at least
    device = heads.q.device
    out = torch.empty(*heads.q.shape[:-1], heads.v.shape[-1], dtype=heads.q.dtype, device=device)  # (..., N, Dv)
    lse = torch.empty(heads.q.shape[:-1], dtype=acc_dtype, device=device)  # (..., Hkv, G, N)
    for q_start in range(0, n_queries, tiling.block_q):  # a block of queries ("load Q_i")
        q_blk = heads.q[..., q_start : q_start + tiling.block_q, :].to(acc_dtype) * tiling.scale  # (..., bq, D)
        bq = q_blk.shape[-2]
        m = torch.full(q_blk.shape[:-1], float("-inf"), dtype=acc_dtype, device=device)  # (..., bq)
        l = torch.zeros_like(m)  # (..., bq)
        acc = torch.zeros(*q_blk.shape[:-1], heads.v.shape[-1], dtype=acc_dtype, device=device)  # (..., bq, Dv)
        for k_start, k_end, banded in tiling.key_tiles(q_start, bq, n_queries, n_keys):  # a block of keys
            k_blk = heads.k[..., k_start:k_end, :].to(acc_dtype)  # (..., Hkv, 1, bk, D)
            v_blk = heads.v[..., k_start:k_end, :].to(acc_dtype)  # (..., Hkv, 1, bk, Dv)
            scores = q_blk @ k_blk.transpose(-2, -1)  # (..., bq, bk): line 8, S = Q Kᵀ (q carries the scale)
            scores = _masked_scores(scores, heads, tiling, q_start, k_start, banded)
            m_new, l = online_softmax_update(m, l, scores)  # lines 9-10: new row max, rescaled sum
            shift = finite_or_zero(m_new)  # (..., bq)
            probs = torch.exp(scores - shift[..., None])  # (..., bq, bk)
            acc = acc * torch.exp(m - shift)[..., None] + probs @ v_blk  # line 12: rescale, add the tile
            m = m_new
        # Line 15: divide once at the end. A row with no allowed key has l = 0 and stays 0.
        out[..., q_start : q_start + bq, :] = (acc / torch.where(l > 0, l, torch.ones_like(l))[..., None]).to(out.dtype)
        lse[..., q_start : q_start + bq] = torch.where(l > 0, m + torch.log(l), torch.full_like(l, float("-inf")))
    return out, lse


def _tile_scores(q_blk, k_blk, mask_g, causal_bias, q_start, k_start, scratch=None):
    """Scores of one (bq, bk) tile with every mask applied: (..., Hkv, G, bq, bk).

    ``scratch``, a flat buffer of at least one tile, is reused for every tile. Our stand-in
    for on-chip SRAM: fresh multi-megabyte tensors cost page faults on every tile, and
    writing into the same memory keeps it warm in the CPU cache.

    Masks are added or filled in place, which is fast but not NaN-proof (NaN + (-inf) is
    NaN); ``_forward_fast`` redoes a tile with ``_masked_scores`` when a NaN shows up.
    """
    bq, bk = q_blk.shape[-2], k_blk.shape[-2]
    shape = (*torch.broadcast_shapes(q_blk.shape[:-2], k_blk.shape[:-2]), bq, bk)
    out = None if scratch is None else scratch[: math.prod(shape)].view(shape)
    scores = torch.matmul(q_blk, k_blk.transpose(-2, -1), out=out)  # (..., Hkv, G, bq, bk); q_blk is pre-scaled
    if mask_g is not None:
        tile_mask = mask_g[..., q_start : q_start + bq, k_start : k_start + bk]
        if tile_mask.dtype == torch.bool:
            scores.masked_fill_(~tile_mask, float("-inf"))
        else:
            scores.add_(tile_mask)
    if causal_bias is not None:  # a diagonal tile of causal attention
        scores.add_(causal_bias)
    return scores


def _band_masks(cache: dict, offset: int, window: int | None, bq: int, bk: int, like: torch.Tensor):
    """(bias, keep) for a masked tile of causal or windowed attention, both (bq, bk): bias is
    -inf where row i may not read column j and 0 elsewhere; keep is 1 where bias is 0, else 0.

    Row i may read column j iff j <= i + offset (the key is not in the query's future) and,
    with a window, j > i + offset - window (the key is not too old). Query i sits at position
    M - N + i (bottom-right), so offset = q_start + M - N - k_start. Tiles with the same
    offset and shape share one pair.

    The bias is added rather than applied with masked_fill_: adding a small tensor broadcast
    over the heads is a plain vectorized pass, several times faster on a CPU.
    """
    key = (offset, window, bq, bk)
    if key not in cache:
        keep = torch.ones(bq, bk, dtype=like.dtype, device=like.device).tril_(offset)  # (bq, bk)
        if window is not None:
            keep.triu_(offset - window + 1)
        bias = torch.zeros_like(keep).masked_fill_(keep == 0, float("-inf"))  # (bq, bk)
        cache[key] = bias, keep
    return cache[key]


def _exp_tile(shifted: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """exp of a tile of shifted scores, in place.

    Subtle, and CPU-specific: torch's vectorized exp leaves its fast path for any input below
    about -87 (where exp underflows), -inf included, and runs 10-100 times slower there. A
    causal diagonal tile is half -inf, so it is clamped first and its masked entries zeroed
    after (``keep``): exp(-80) ≈ 2e-35 is far below float32's resolution next to the row's
    largest weight, exp(0) = 1.
    """
    if keep is None:
        return shifted.exp_()
    return shifted.clamp_(min=-80.0).exp_().mul_(keep)


def _forward_fast(heads: GroupedHeads, tiling: Tiling) -> tuple[torch.Tensor, torch.Tensor]:
    """The fast twin of ``_forward_plain``: the same result, with the four refinements."""
    q_g, k_g, v_g, mask_g = heads.q, heads.k, heads.v, heads.mask
    n_queries, n_keys = heads.n_queries, heads.n_keys
    block_q, block_k = tiling.block_q, tiling.block_k
    # Accumulate in float32 at least, whatever the input dtype (m, l and acc stay fp32 on chip).
    acc_dtype = torch.promote_types(q_g.dtype, torch.float32)
    out = torch.empty(*q_g.shape[:-1], v_g.shape[-1], dtype=q_g.dtype, device=q_g.device)  # (..., Hkv, G, N, Dv)
    lse = torch.empty(q_g.shape[:-1], dtype=acc_dtype, device=q_g.device)  # (..., Hkv, G, N)
    tile_shape = (*q_g.shape[:-2], min(block_q, n_queries), min(block_k, n_keys))  # (..., Hkv, G, bq, bk)
    scratch = torch.empty(math.prod(tile_shape), dtype=acc_dtype, device=q_g.device)  # one tile, reused
    band_cache: dict = {}
    for q_start in range(0, n_queries, block_q):  # FA-2: the outer loop over query blocks
        q_blk = q_g[..., q_start : q_start + block_q, :].to(acc_dtype) * tiling.scale  # (..., Hkv, G, bq, D)
        bq = q_blk.shape[-2]
        m = torch.full(q_blk.shape[:-1], float("-inf"), dtype=acc_dtype, device=q_g.device)  # (..., bq)
        l = torch.zeros_like(m)  # (..., bq)
        acc = torch.zeros(*q_blk.shape[:-1], v_g.shape[-1], dtype=acc_dtype, device=q_g.device)  # (..., bq, Dv)
        every_row_has_a_max = False
        for row_start, row_end, k_start, k_end, masked in tiling.pieces(q_start, bq, n_queries, n_keys):
            # A piece is a tile of keys for all the block's rows, or for a strip of them on a
            # causal diagonal; m_r, l_r and acc_r are views of the strip's rows, updated in place.
            whole = (row_start, row_end) == (0, bq)
            rows = slice(row_start, row_end)
            q_rows = q_blk if whole else q_blk[..., rows, :]  # (..., Hkv, G, br, D)
            m_r, l_r, acc_r = (m, l, acc) if whole else (m[..., rows], l[..., rows], acc[..., rows, :])
            first_row = q_start + row_start
            k_blk = k_g[..., k_start:k_end, :].to(acc_dtype)  # (..., Hkv, 1, bk, D)
            v_blk = v_g[..., k_start:k_end, :].to(acc_dtype)  # (..., Hkv, 1, bk, Dv)
            bias, keep = (None, None)
            if masked:
                offset = first_row + n_keys - n_queries - k_start
                bias, keep = _band_masks(
                    band_cache, offset, tiling.window, row_end - row_start, k_end - k_start, scratch
                )
                if mask_g is not None:
                    keep = None  # the clamp in _exp_tile would revive entries the caller's mask removed
            scores = _tile_scores(q_rows, k_blk, mask_g, bias, first_row, k_start, scratch)
            if every_row_has_a_max or (not whole and bool(torch.isfinite(m_r).all())):
                # Conditional rescaling (as in FlashAttention-4): m only has to keep exp(s - m)
                # from overflowing, not to be the exact running max. If every row's sum over
                # this tile stays below 2**32, keep m and skip the max and the rescaling.
                probs = _exp_tile(scores.sub_(m_r[..., None]), keep)  # (..., br, bk)
                tile_sum = probs.sum(dim=-1)  # (..., br)
                if bool((tile_sum <= 2.0**32).all()):  # also False for inf and NaN
                    l_r += tile_sum
                    acc_r.add_(probs @ v_blk)
                    continue
                # Some score rose far above m: recompute the tile and take the full step.
                scores = _tile_scores(q_rows, k_blk, mask_g, bias, first_row, k_start, scratch)
            # Algorithm 1, lines 9-12: new row max, rescale what we had, add this tile.
            m_new = torch.maximum(m_r, scores.amax(dim=-1))  # (..., br)
            if (masked or mask_g is not None) and bool(m_new.isnan().any()):
                # A NaN score: where no query may read it, the bias left NaN + (-inf) = NaN.
                # Redo this tile with every mask filled exactly, so only rows that read it see it.
                raw = q_rows @ k_blk.transpose(-2, -1)
                scores = _masked_scores(raw, heads, tiling, first_row, k_start, masked)
                m_new = torch.maximum(m_r, scores.amax(dim=-1))  # (..., br)
            shift = finite_or_zero(m_new)
            probs = _exp_tile(scores.sub_(shift[..., None]), keep)  # (..., br, bk), in place
            rescale = torch.exp(m_r - shift)  # (..., br); 0 while a row has seen only -inf
            l_r.mul_(rescale).add_(probs.sum(dim=-1))
            acc_r.mul_(rescale[..., None]).add_(probs @ v_blk)  # (..., br, Dv), in place
            m_r.copy_(m_new)
            # A row that has read nothing yet (m = -inf) needs the full step: exp(s - m) with
            # a made-up m could underflow to 0 for every key.
            if whole:
                every_row_has_a_max = bool(torch.isfinite(m).all())
        # Algorithm 1, line 15: divide once at the end. A row with no allowed key has l = 0.
        out[..., q_start : q_start + bq, :] = (acc / torch.where(l > 0, l, torch.ones_like(l))[..., None]).to(q_g.dtype)
        lse[..., q_start : q_start + bq] = torch.where(l > 0, m + torch.log(l), torch.full_like(l, float("-inf")))
    return out, lse


def _backward(grad_out, heads: GroupedHeads, out, lse, tiling: Tiling):
    """FlashAttention-2's backward: recompute each tile's probabilities from q, k and the saved
    log-sum-exp, and accumulate dq, dk, dv tile by tile (Dao 2023, Algorithm 2). Both twins
    share it; the fast one skips the tiles its forward skipped (a causal diagonal tile is
    recomputed whole here, not in the forward's strips: the same gradients, a little more work)."""
    q_g, k_g, v_g = heads.q, heads.k, heads.v
    n_queries, n_keys = heads.n_queries, heads.n_keys
    acc_dtype = torch.promote_types(q_g.dtype, torch.float32)
    do_g = grad_out.reshape(*q_g.shape[:-1], v_g.shape[-1]).to(acc_dtype)  # (..., Hkv, G, N, Dv)
    o_g = out.reshape(do_g.shape).to(acc_dtype)
    lse_g = lse.reshape(q_g.shape[:-1])  # (..., Hkv, G, N)
    delta = (do_g * o_g).sum(dim=-1)  # (..., Hkv, G, N): rowsum(dO ∘ O), the softmax-backward term
    dq = torch.zeros(q_g.shape, dtype=acc_dtype, device=q_g.device)  # (..., Hkv, G, N, D)
    dk = torch.zeros(k_g.shape[:-3] + k_g.shape[-2:], dtype=acc_dtype, device=q_g.device)  # (..., Hkv, M, D)
    dv = torch.zeros(v_g.shape[:-3] + v_g.shape[-2:], dtype=acc_dtype, device=q_g.device)  # (..., Hkv, M, Dv)
    for q_start in range(0, n_queries, tiling.block_q):
        q_blk = q_g[..., q_start : q_start + tiling.block_q, :].to(acc_dtype) * tiling.scale  # (..., Hkv, G, bq, D)
        bq = q_blk.shape[-2]
        rows = slice(q_start, q_start + bq)
        lse_blk = lse_g[..., rows].to(acc_dtype)[..., None]  # (..., bq, 1)
        for k_start, k_end, masked in tiling.key_tiles(q_start, bq, n_queries, n_keys):
            cols = slice(k_start, k_end)
            k_blk, v_blk = k_g[..., cols, :].to(acc_dtype), v_g[..., cols, :].to(acc_dtype)  # (..., Hkv, 1, bk, ·)
            scores = _masked_scores(q_blk @ k_blk.transpose(-2, -1), heads, tiling, q_start, k_start, masked)
            # p = exp(s - lse), the forward's probabilities again. A row that reads nothing has
            # lse = -inf and only -inf scores: shifted by 0 instead, its p is exp(-inf) = 0.
            probs = torch.exp(scores - finite_or_zero(lse_blk))  # (..., bq, bk)
            do_blk = do_g[..., rows, :]  # (..., Hkv, G, bq, Dv)
            dv[..., cols, :] += (probs.transpose(-2, -1) @ do_blk).sum(dim=-3)  # sum over the G heads sharing v
            dprobs = do_blk @ v_blk.transpose(-2, -1)  # (..., bq, bk)
            dscores = probs * (dprobs - delta[..., rows, None])  # (..., bq, bk): softmax backward
            dq[..., rows, :] += (dscores @ k_blk) * tiling.scale
            dk[..., cols, :] += (dscores.transpose(-2, -1) @ q_blk).sum(dim=-3)  # q_blk already carries scale
    return dq, dk, dv


def _zero_unread(k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, window: int | None, n_queries: int):
    """k and v with every key that no query may read set to 0: those the mask hides from every query,
    and, with a window, those older than the first query's window (queries at M - N .. M - 1 read keys
    after M - N - window). A masked score is -inf and its probability 0, but 0 · NaN is NaN: a NaN or
    inf key or value there would reach the output through P @ V (the plain loop visits every tile)
    and q's gradient through dS @ K."""
    if mask is not None:
        allowed = mask if mask.dtype == torch.bool else mask != float("-inf")
        k, v = zero_unread_keys(k, allowed), zero_unread_keys(v, allowed)  # (..., Hkv, M, ·)
    n_keys = k.shape[-2]
    first_read = n_keys - n_queries - window + 1 if window is not None else 0  # the oldest key any query reads
    if first_read > 0:
        too_old = (torch.arange(n_keys, device=k.device) < first_read)[:, None]  # (M, 1)
        k, v = k.masked_fill(too_old, 0.0), v.masked_fill(too_old, 0.0)
    return k, v


class TiledAttention(torch.autograd.Function):
    """Saves q, k, v, the output and the row log-sum-exp: O(N) extra, never the (N, M) matrix."""

    @staticmethod
    def forward(ctx, q, k, v, mask, tiling: Tiling):
        heads = GroupedHeads.of(q, k, v, mask)
        out, lse = (_forward_fast if tiling.fast else _forward_plain)(heads, tiling)
        out = out.reshape(*q.shape[:-1], v.shape[-1])  # (..., H, N, Dv)
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.tiling = tiling
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, mask = ctx.saved_tensors
        dq, dk, dv = _backward(grad_out, GroupedHeads.of(q, k, v, mask), out, lse, ctx.tiling)
        grads = dq.reshape(q.shape).to(q.dtype), dk.reshape(k.shape).to(k.dtype), dv.reshape(v.shape).to(v.dtype)
        return *grads, None, None  # the mask and the tiling are constants


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    window: int | None = None,
    scale: float | None = None,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
    fast: bool = True,
) -> torch.Tensor:
    """``lib.attention.attention``'s contract, computed tile by tile (no weights returned).

    Shapes, grouped-query heads, bool/float masks, bottom-right ``is_causal`` and the zero
    rows for queries with nothing to read are all as in ``lib.attention``. Differentiable
    with FlashAttention's backward. A float mask is treated as a constant (no gradient).
    A key no query may read contributes nothing, even a NaN one.

    ``window``: a causal sliding window. Equals ``attention(q, k, v,
    sliding_window_mask(N, M, window))`` (combined with ``mask`` by "and"), and visits only
    the key tiles that overlap the band, forward and backward, so at a fixed window the
    work grows linearly in N. A window implies causal attention, with or without is_causal.

    ``fast=False`` runs the plain twin: Algorithm 1 as the paper writes it, every key block
    visited and masked by position; same outputs and gradients, several times slower.
    """
    validate_attention_inputs(q, k, v, mask)
    window = optional_positive_int("window", window)
    scale = resolve_scale(scale, q)  # rejects inf, NaN and non-numbers, as attention does
    block_q, block_k = positive_int("block_q", block_q), positive_int("block_k", block_k)
    k, v = _zero_unread(k, v, mask, window, q.shape[-2])
    tiling = Tiling(bool(is_causal), window, scale, block_q, block_k, bool(fast))
    return TiledAttention.apply(q, k, v, mask, tiling)

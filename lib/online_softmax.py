"""The online softmax: one pass over a row in blocks, keeping only a running max and sum (chapter 5).

softmax needs the row's maximum (for stability) and the sum of exp(x - max) before it can
write a single weight. The online softmax reads the row a block at a time and keeps two
numbers per row,
    m   the largest entry seen so far,
    l   the sum of exp(entry - m) so far,
rescaling l by exp(m_old - m_new) whenever a block raises m (Milakov and Gimelshein 2018).
After the last block, m and l are the row's max and sum, exactly. ``lib.tiled_softmax``
makes this update once per tile of scores: FlashAttention is the online softmax carried
into the weighted sum of values.

Shapes: any leading axes ``...``; the last axis is the row being normalized.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from lib.validation import positive_int

__all__ = ["online_softmax_update", "online_softmax_steps", "online_softmax", "finite_or_zero"]


def online_softmax_update(m: torch.Tensor, l: torch.Tensor, block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the online softmax: fold a block of scores (..., b) into the state (m, l).

    m (...,) is the largest score seen so far, l (...,) the sum of exp(score - m) so far.
    The new max is max(m, max(block)); the old sum was taken against the old max, so it is
    rescaled by exp(m_old - m_new) (1 when the block raised nothing) before the block's
    exp(block - m_new) are added. Subtle: a row that has seen only -inf keeps m = -inf, and
    -inf - (-inf) is NaN, so such rows are shifted by 0 instead: exp(-inf - 0) = 0.
    """
    m_new = torch.maximum(m, block.amax(dim=-1))  # (...,)
    shift = finite_or_zero(m_new)  # (...,)
    l_new = l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)  # (...,)
    return m_new, l_new


def online_softmax_steps(x: torch.Tensor, block_size: int) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """Walk the last axis of ``x`` in blocks, yielding (block end, m, l) after each block.

    m is the running row maximum, l the running sum of exp(x - m). When a block raises the
    maximum, the old sum is rescaled by exp(m_old - m_new): it was computed against the old
    maximum. Print the states to watch the rescaling happen.
    """
    block_size = positive_int("block_size", block_size)
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)  # (...,)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)  # (...,)
    for start in range(0, x.shape[-1], block_size):
        m, l = online_softmax_update(m, l, x[..., start : start + block_size])
        yield min(start + block_size, x.shape[-1]), m, l


def online_softmax(x: torch.Tensor, block_size: int = 128) -> torch.Tensor:
    """softmax(x, dim=-1) from one blockwise pass for m and l, then exp(x - m) / l."""
    if x.shape[-1] == 0:
        return x.clone()
    _, m, l = list(online_softmax_steps(x, block_size))[-1]  # after the last block: row max and sum
    weights = torch.exp(x - finite_or_zero(m)[..., None])
    return weights / torch.where(l > 0, l, torch.ones_like(l))[..., None]  # all -inf rows stay 0


def finite_or_zero(m: torch.Tensor) -> torch.Tensor:
    """A row max of -inf (nothing readable yet) becomes 0, so exp(-inf - 0) = 0, not NaN."""
    return torch.nan_to_num(m, neginf=0.0)

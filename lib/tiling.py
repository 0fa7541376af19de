"""Which tiles of the (N, M) score matrix the tiled attention loops visit (chapter 5).

``lib.tiled_softmax`` computes attention one (bq, bk) tile at a time; this module holds
what both of its twins (plain and fast) and its backward agree on before any score is
computed:

* ``Tiling``: the pattern (causal, a sliding window), the scale and the block sizes, and
  the key tiles a block of queries visits: every key block for the plain twin, only the
  tiles the pattern can read for the fast one;
* ``GroupedHeads``: q, k, v and the mask as views in which the query heads that share a
  KV head (grouped-query attention) read it by broadcasting, with no copy;
* ``visited_pairs``: how many scores the fast loop computes, to compare with the pairs a
  pattern allows (``lib.costs``).

Shape letters as in ``lib.tiled_softmax``: H query heads, Hkv key/value heads, G = H // Hkv,
N queries, M keys, D head width, Dv value width, bq/bk the block sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["BLOCK_Q", "BLOCK_K", "DIAGONAL_ROWS", "Tiling", "GroupedHeads", "visited_pairs"]

# Defaults chosen with `python -m lib.bench attention --sweep` on a 2-core CPU (2026-11-30,
# N=4096, tiled / SDPA and causal / full): (256, 1024) 1.55 and 0.56; (384, 1024) 1.43 and
# 0.64; (512, 1024) 1.36 and 0.67. Taller query blocks mean fewer trips round the Python loop
# but, then, coarser causal skipping (a masked diagonal tile was block_q wide). Since the fast
# loop walks the diagonal in strips of DIAGONAL_ROWS rows and splits key runs evenly, causal /
# full at (384, 1024) is 0.53 to 0.55 (three runs, 2026-12-03). A (384, 1024) tile of 8 heads
# is 12 MB in fp32, so peak memory at N=8192 is a few tiles rather than the 2 GB score matrix.
BLOCK_Q, BLOCK_K = 384, 1024
# The fast loop walks a causal diagonal tile in strips of this many query rows, each strip
# only as wide as its last row reads: a (bq, bq) triangle costs bq·(bq + DIAGONAL_ROWS) / 2
# scores instead of bq², which brings causal attention's work nearer half the full loop's.
DIAGONAL_ROWS = 128


@dataclass(frozen=True)
class Tiling:
    """How the loops walk the (N, M) score matrix: the pattern, the score scale, the block sizes.

    ``fast`` picks the twin: True is the loop with ``lib.tiled_softmax``'s four refinements, False the
    plain loop of Algorithm 1, which visits every key block and masks by position.
    """

    is_causal: bool
    window: int | None  # a causal sliding window, or None
    scale: float  # multiplies the scores (1 / sqrt(D) by default)
    block_q: int = BLOCK_Q
    block_k: int = BLOCK_K
    fast: bool = True
    diagonal_rows: int = DIAGONAL_ROWS

    @property
    def banded(self) -> bool:
        """Causal or windowed: some keys are hidden from some queries by position."""
        return self.is_causal or self.window is not None

    def key_tiles(self, q_start: int, bq: int, n_queries: int, n_keys: int) -> list[tuple[int, int, bool]]:
        """(start, end, masked) of each key tile the query rows [q_start, q_start + bq) visit."""
        if not self.fast:  # the plain twin: every key block, masked by position when banded
            return [(start, min(start + self.block_k, n_keys), self.banded) for start in range(0, n_keys, self.block_k)]
        return _key_tiles(self.is_causal, self.window, q_start, bq, n_queries, n_keys, self.block_k)

    def pieces(self, q_start: int, bq: int, n_queries: int, n_keys: int) -> list[tuple[int, int, int, int, bool]]:
        """(row_start, row_end, key_start, key_end, masked) of each piece of work the fast loop
        computes for the query rows [q_start, q_start + bq); rows count from q_start.

        The key tiles of ``key_tiles``, all rows each, except that causal attention (with no
        window) cuts a masked tile into strips of ``diagonal_rows`` rows, each strip reading
        the tile's keys only up to its last row's position; a strip whose rows read every key
        it is given needs no mask, and one whose rows read none of the tile is dropped.
        """
        tiles = self.key_tiles(q_start, bq, n_queries, n_keys)
        if not (self.fast and self.is_causal and self.window is None):
            return [(0, bq, start, end, masked) for start, end, masked in tiles]
        first = q_start + n_keys - n_queries  # absolute position of the block's first row
        pieces = []
        for start, end, masked in tiles:
            if not masked:
                pieces.append((0, bq, start, end, False))
                continue
            for row_start in range(0, bq, self.diagonal_rows):
                row_end = min(row_start + self.diagonal_rows, bq)
                key_end = min(end, first + row_end)  # one past the strip's last row's position
                if key_end > start:
                    pieces.append((row_start, row_end, start, key_end, first + row_start + 1 < key_end))
        return pieces

    def band(self, q_start: int, bq: int, k_start: int, bk: int, n_queries: int, n_keys: int, device) -> torch.Tensor:
        """(bq, bk) bool, True where query row q_start + i may read key k_start + j by position.

        Query i sits at absolute position M - N + i (bottom-right); it reads key j iff
        j <= its position and, with a window, j > its position - window.
        """
        query_pos = torch.arange(q_start, q_start + bq, device=device)[:, None] + (n_keys - n_queries)  # (bq, 1)
        key_pos = torch.arange(k_start, k_start + bk, device=device)[None, :]  # (1, bk)
        allowed = key_pos <= query_pos  # (bq, bk)
        if self.window is not None:
            allowed &= key_pos > query_pos - self.window
        return allowed


@dataclass
class GroupedHeads:
    """q, k, v (and the mask) as views in which the G query heads of a KV head share it by
    broadcasting: no copy of k or v is made, and the mask is sliced one tile at a time."""

    q: torch.Tensor  # (..., Hkv, G, N, D)
    k: torch.Tensor  # (..., Hkv, 1, M, D)
    v: torch.Tensor  # (..., Hkv, 1, M, Dv)
    mask: torch.Tensor | None  # (..., Hkv, G, N, M), a broadcast view: never materialized

    @classmethod
    def of(cls, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> GroupedHeads:
        if q.ndim == 2:  # (N, D): one head
            q, k, v = q[None], k[None], v[None]
        n_kv_heads, n_groups = k.shape[-3], q.shape[-3] // k.shape[-3]
        mask_g = None
        if mask is not None:
            score_shape = (*q.shape[:-1], k.shape[-2])  # (..., H, N, M)
            mask_g = mask.expand(score_shape).unflatten(-3, (n_kv_heads, n_groups))  # (..., Hkv, G, N, M)
        return cls(q.unflatten(-3, (n_kv_heads, n_groups)), k.unsqueeze(-3), v.unsqueeze(-3), mask_g)

    @property
    def n_queries(self) -> int:
        return self.q.shape[-2]

    @property
    def n_keys(self) -> int:
        return self.k.shape[-2]


def _clamp(position: int, n_keys: int) -> int:
    return min(max(0, position), n_keys)


def _key_tiles(is_causal, window, q_start, bq, n_queries, n_keys, block_k):
    """(start, end, masked) for each key tile that query rows [q_start, q_start + bq) read.

    Causal attention has two phases, as in FlashAttention: keys before the block's first
    query position are readable by every row of the block, so those tiles need no mask and
    go in wide blocks of ``block_k``; the keys from there up to the last row's position form
    the diagonal, masked, at most ``bq`` wide. Keys after that are never read: skipped.

    A sliding window (causal too) also skips the keys before the band: row p reads keys
    (p - window, p], so the block reads (first - window, last] only, where first and last are
    its rows' absolute positions. Of those, the keys every row reads, (last - window, first),
    need no mask; the left edge and the diagonal do. The work per query block is then about
    (bq + window) keys, whatever N is: linear in N at a fixed window.
    """
    if not is_causal and window is None:
        return [(start, min(start + block_k, n_keys), False) for start in range(0, n_keys, block_k)]
    first = q_start + n_keys - n_queries  # the block's first query sits at this absolute position (bottom-right)
    last = first + bq - 1
    diagonal = _clamp(first, n_keys)  # the masked diagonal starts here
    key_end = _clamp(last + 1, n_keys)  # one past the last key any row reads
    key_start, unmasked_start = 0, 0
    if window is not None:
        key_start = _clamp(first - window + 1, n_keys)  # the first key any row of the block reads
        unmasked_start = min(_clamp(last - window + 1, n_keys), diagonal)  # the first key every row reads
        if diagonal - unmasked_start < bq:  # a sliver of unmasked keys: not worth a tile of its own
            unmasked_start = diagonal
    runs = [(key_start, unmasked_start, True), (unmasked_start, diagonal, False), (diagonal, key_end, True)]
    return [tile for run_start, run_end, masked in runs for tile in _even_tiles(run_start, run_end, block_k, masked)]


def _even_tiles(start: int, end: int, block_k: int, masked: bool) -> list[tuple[int, int, bool]]:
    """[start, end) in as few tiles as ``block_k`` allows, of (nearly) equal widths: 1,152 keys
    are two tiles of 576 rather than 1,024 and a narrow 128, which costs nearly as much."""
    n_tiles = -(-(end - start) // block_k)
    if n_tiles <= 0:
        return []
    edges = [start + (end - start) * i // n_tiles for i in range(n_tiles + 1)]
    return [(a, b, masked) for a, b in zip(edges, edges[1:], strict=False)]


def visited_pairs(
    n_queries: int,
    n_keys: int,
    *,
    is_causal: bool = False,
    window: int | None = None,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
    diagonal_rows: int = DIAGONAL_ROWS,
) -> int:
    """How many query-key scores the (fast) tiled loop computes per head, masked entries included.

    Its forward work is 2·D FLOPs per score for QKᵀ and 2·Dv for the weighted values, so
    this is the count to compare with the pairs a pattern allows (``lib.costs``): the
    difference is the price of working in whole tiles.
    """
    tiling = Tiling(bool(is_causal), window, 1.0, block_q, block_k, diagonal_rows=diagonal_rows)
    total = 0
    for q_start in range(0, n_queries, block_q):
        bq = min(block_q, n_queries - q_start)
        pieces = tiling.pieces(q_start, bq, n_queries, n_keys)
        total += sum((row_end - row_start) * (end - start) for row_start, row_end, start, end, _ in pieces)
    return total

"""Applying BPE merges to one chunk: three algorithms that give the same ids (chapter 7).

Encoding replays merges in rank order: while some adjacent pair has a merge, merge the
pair with the lowest rank (its new id), the leftmost on a tie. That is tiktoken's rule,
and for a trained merge list it is also "merge every occurrence of the earliest merge".

- ``bpe_merge_simple``: rescan, merge one pair, repeat. O(n²) for a chunk of n bytes; the
  readable version, used for chunks under 64 bytes (``bpe._HEAP_FROM``).
- ``bpe_merge_heap``: a heap of candidate pairs over a linked list of tokens, O(n log n).
- ``bpe_merge_rounds``: one rank per round, every occurrence at once, with numpy; for
  chunks of kilobytes (a megabyte without a space), falling back to the heap where the
  table's ranks do not rise along merges.

``cut_points`` finds where no merge can ever cross (no token holds the two bytes on either
side), so that a long chunk made of a few distinct pieces, repeated, is merged piece by piece.

``lib.tokenizer.BPETokenizer`` picks one by chunk length; the tests hold all three equal
to each other and to tiktoken. Letters: n tokens in a chunk, p positions of one round,
M merges in a table.
"""

from __future__ import annotations

import heapq
from itertools import pairwise

import numpy as np

_NO_MERGE = 1 << 62  # a rank above every real one
_SPARSE = 64  # rounds hand over to the heap when fewer positions than this wait per rank


def bpe_merge_simple(ids: list[int], merges: dict[tuple[int, int], int]) -> list[int]:
    """Apply ``merges`` to ``ids`` the plain way: find the adjacent pair with the lowest rank
    (its new id; the leftmost on a tie), merge that one occurrence, repeat.

    Each step rescans the whole list, so a chunk of n bytes costs O(n²): the readable twin of
    ``bpe_merge_heap``, used for short chunks where it is also the faster of the two.
    """
    ids = list(ids)
    while len(ids) >= 2:
        ranks = [merges.get(pair, _NO_MERGE) for pair in pairwise(ids)]
        best = min(range(len(ranks)), key=ranks.__getitem__)  # min() keeps the leftmost on ties
        if ranks[best] == _NO_MERGE:
            break
        ids[best : best + 2] = [ranks[best]]
    return ids


def bpe_merge_heap(ids: list[int], merges: dict[tuple[int, int], int]) -> list[int]:
    """The same merges as ``bpe_merge_simple`` in O(n log n): a heap of candidate pairs.

    The tokens live in a doubly linked list over the original positions (``after``,
    ``before``); a token is named by the position of its first byte. The heap holds
    rank·2³² + position, so it pops the lowest rank and, among equal ranks, the leftmost
    pair, the order the simple loop follows. A merge only changes the pairs on either side
    of it, so it pushes at most two new candidates. Entries whose pair has changed since
    they were pushed are stale; we skip them when they come up instead of searching for
    them (the same lazy deletion as the trainer's heap).
    """
    ids = list(ids)
    n = len(ids)
    if n < 2:
        return ids
    after = list(range(1, n + 1))  # position of the next token; n means none
    before = list(range(-1, n - 1))  # position of the previous token; -1 means none
    heap = [rank << 32 | i for i, pair in enumerate(pairwise(ids)) if (rank := merges.get(pair)) is not None]
    heapq.heapify(heap)
    return _heap_merge(ids, after, before, heap, merges)


def _heap_merge(ids: list[int], after: list[int], before: list[int], heap: list[int], merges) -> list[int]:
    """The heap's loop, from any state: ``ids`` per position (-1 for a position merged away),
    the linked list, and a heap that holds every pair with a merge (stale entries allowed).
    Position 0 is always a live token: a merge keeps its left position."""
    n = len(ids)
    while heap:
        key = heapq.heappop(heap)
        rank, left = key >> 32, key & 0xFFFFFFFF
        right = after[left]
        if right >= n or ids[left] < 0 or merges.get((ids[left], ids[right])) != rank:
            continue  # stale: one side was merged away or changed since this entry was pushed
        ids[left], ids[right] = rank, -1  # the pair becomes one token at ``left``; ``right`` dies
        following = after[right]
        after[left] = following
        if following < n:
            before[following] = left
            if (new_rank := merges.get((rank, ids[following]))) is not None:
                heapq.heappush(heap, new_rank << 32 | left)
        previous = before[left]
        if previous >= 0 and (new_rank := merges.get((ids[previous], rank))) is not None:
            heapq.heappush(heap, new_rank << 32 | previous)
    merged, i = [], 0
    while i < n:
        merged.append(ids[i])
        i = after[i]
    return merged


def bpe_merge_rounds(ids: list[int], pair_table: PairTable, sparse: int = _SPARSE) -> list[int]:
    """The same merges as ``bpe_merge_simple``, one *rank* at a time, vectorized with numpy.

    When every merge makes an id above both of its parts (``PairTable.monotone``; true of
    every trained merge list), merging a pair never creates a pair that ranks below it, so
    all occurrences of the lowest-ranked pair can be merged at once, left to right, as
    ``merge`` does. Otherwise (cl100k's table of every split) a round that creates a pair
    ranked below its own is undone and the heap finishes the chunk. Positions wait in one
    bucket per rank; a round takes the lowest rank, checks its positions are still that
    pair, skips every second one of a chain (``a a a`` merges as ``aa a``), merges, and
    files the two new neighbouring pairs of each merge under their ranks. A megabyte
    without a space takes a few hundred rounds (a few thousand with cl100k's 100k ranks)
    of array operations instead of a million heap operations. ``sparse``: once fewer than
    this many positions wait per rank, the heap finishes the chunk, being cheaper per merge
    than a round is per rank (0: rounds to the end).
    """
    n = len(ids)
    if n < 2:
        return list(ids)
    tokens = np.array(ids, dtype=np.int64)  # (n,) the token starting at each position
    after = np.arange(1, n + 1)  # (n,) next token's position; n means none
    before = np.arange(-1, n - 1)  # (n,) previous token's position; -1 means none
    alive = np.ones(n, dtype=bool)  # (n,)
    chosen = np.zeros(n, dtype=bool)  # (n,) the positions of one round, marked only during it
    buckets: dict[int, list[np.ndarray]] = {}
    waiting = [0]  # positions filed in all buckets together (stale ones included)
    ranks_waiting: list[int] = []

    def file(positions: np.ndarray, ranks: np.ndarray | None = None) -> None:
        if ranks is None:
            ranks = pair_table.ranks(tokens, after, positions)  # (p,) -1 where no merge
        positions, ranks = positions[ranks >= 0], ranks[ranks >= 0]
        order = np.argsort(ranks, kind="stable")
        positions, ranks = positions[order], ranks[order]
        starts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]]) if len(ranks) else []
        for part, start in zip(np.split(positions, starts[1:]), starts, strict=False):
            rank = int(ranks[start])
            if rank not in buckets:
                buckets[rank] = []
                heapq.heappush(ranks_waiting, rank)
            buckets[rank].append(part)
        waiting[0] += len(positions)

    file(np.arange(n - 1))
    while ranks_waiting:
        if waiting[0] < sparse * len(ranks_waiting):
            # Few positions per rank are left (the long tail of a large table): a round's fixed
            # cost now exceeds the heap's cost per merge, so the heap goes on from here. Every
            # pair that has a merge waits in a bucket, so the buckets seed the heap.
            tokens[~alive] = -1
            keys = [np.concatenate(parts) + (rank << 32) for rank, parts in buckets.items()]
            heap = np.unique(np.concatenate(keys)).tolist()  # sorted: already a heap
            return _heap_merge(tokens.tolist(), after.tolist(), before.tolist(), heap, pair_table.merges)
        rank = heapq.heappop(ranks_waiting)
        parts = buckets.pop(rank)
        waiting[0] -= sum(map(len, parts))
        positions = np.unique(np.concatenate(parts))  # (p,) sorted, left to right
        positions = positions[alive[positions]]
        positions = positions[pair_table.ranks(tokens, after, positions) == rank]  # drop stale ones
        if not len(positions):
            continue
        # Subtle: in a chain (each pair starts where the previous one ends, as in a a a a),
        # merging one consumes the next; left to right, every second one survives.
        chosen[positions] = True
        follows = (before[positions] >= 0) & chosen[np.maximum(before[positions], 0)]  # (p,)
        chosen[positions] = False  # cleared again: one array serves every round
        run_start = np.maximum.accumulate(np.where(follows, 0, np.arange(len(positions))))  # (p,)
        positions = positions[(np.arange(len(positions)) - run_start) % 2 == 0]
        right = after[positions]  # (p,)
        if not pair_table.monotone:
            # Merging left to right, each merged token first meets the *old* token that
            # follows it (a chosen one merges later). If that pair ranks below this round,
            # tiktoken would take it first: the heap goes on from here.
            following = after[right]  # (p,)
            has_next = following < n
            met = pair_table.lookup(np.full(int(has_next.sum()), rank), tokens[following[has_next]])  # (p',)
            if ((met >= 0) & (met < rank)).any():
                return bpe_merge_heap(tokens[np.flatnonzero(alive)].tolist(), pair_table.merges)
        old_tokens = tokens[positions]  # (p,)
        tokens[positions] = rank
        alive[right] = False
        following = after[right]  # (p,)
        after[positions] = following
        has_next = following < n
        before[following[has_next]] = positions[has_next]
        left = before[positions]  # (p,)
        new_pairs = np.concatenate([left[left >= 0], positions[has_next]])  # (q,)
        new_ranks = None
        if not pair_table.monotone:
            new_ranks = pair_table.ranks(tokens, after, new_pairs)  # (q,)
            if ((new_ranks >= 0) & (new_ranks < rank)).any():
                # A merge made a pair that ranks below this one: tiktoken would take it before
                # the next occurrence of this rank. Undo the round; the heap goes on from here.
                before[following[has_next]] = right[has_next]
                after[positions] = right
                alive[right] = True
                tokens[positions] = old_tokens
                return bpe_merge_heap(tokens[np.flatnonzero(alive)].tolist(), pair_table.merges)
        file(new_pairs, new_ranks)
    return tokens[np.flatnonzero(alive)].tolist()


def joinable_bytes(tokens) -> np.ndarray:
    """(256, 256) bool: ``[x, y]`` is True where some token holds byte x followed by byte y."""
    tokens = [token for token in tokens if len(token) > 1]
    joinable = np.zeros((256, 256), dtype=bool)  # (256, 256)
    if not tokens:
        return joinable
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)  # (B,) every token's bytes, end to end
    last = np.cumsum([len(token) for token in tokens]) - 1  # (T,) where each token ends
    inside = np.ones(len(flat) - 1, dtype=bool)  # (B - 1,) pairs that lie within one token
    inside[last[:-1]] = False
    joinable[flat[:-1][inside], flat[1:][inside]] = True
    return joinable


def cut_points(data: bytes, joinable: np.ndarray) -> list[int]:
    """Positions i (0 < i < len(data)) where no token holds data[i - 1] and data[i] together.

    No merge can ever cross such a place (the merged token would hold those two bytes), and
    a merge changes only the pairs inside its own piece, so the pieces between cut points
    can be merged one at a time, in any order, and give the same ids as the whole. Text made
    of one repeated symbol (a megabyte of one emoji) is mostly cut points.
    """
    if len(data) < 2:
        return []
    values = np.frombuffer(data, dtype=np.uint8)  # (n,)
    return (np.flatnonzero(~joinable[values[:-1], values[1:]]) + 1).tolist()


class PairTable:
    """A merge table as sorted numpy arrays, for looking many pairs up at once."""

    def __init__(self, merges: dict[tuple[int, int], int]) -> None:
        # every id that can sit in a pair, merged ones included, is below width: keys never collide
        self.width = 1 + max((max(*pair, new_id) for pair, new_id in merges.items()), default=0)
        keys = np.array([a * self.width + b for a, b in merges], dtype=np.int64)  # (M,)
        order = np.argsort(keys)
        self.keys = keys[order]  # (M,) sorted
        self.values = np.array(list(merges.values()), dtype=np.int64)[order]  # (M,)
        self.monotone = all(new_id > max(pair) for pair, new_id in merges.items())
        self.size = len(merges)
        self.merges = merges

    def ranks(self, tokens: np.ndarray, after: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """(p,) the merge rank of the pair starting at each position, -1 where there is none."""
        n = len(tokens)
        right = after[positions]  # (p,)
        found = self.lookup(tokens[positions], tokens[np.minimum(right, n - 1)])  # (p,)
        return np.where(right < n, found, -1)

    def lookup(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """(p,) the rank of each pair (left[i], right[i]), -1 where it has no merge."""
        if not self.size:
            return np.full(len(left), -1, dtype=np.int64)
        keys = left * self.width + right  # (p,)
        found = np.minimum(np.searchsorted(self.keys, keys), self.size - 1)  # (p,)
        return np.where(self.keys[found] == keys, self.values[found], -1)

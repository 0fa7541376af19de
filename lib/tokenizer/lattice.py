"""The unigram lattice of every training chunk at once, for EM and pruning (chapter 7).

Unigram training (lib/tokenizer/unigram.py) asks two questions of every chunk of the training text,
again and again as the pieces change: how often each piece is used in expectation over
all segmentations (forward-backward, the E-step), and how often in the single best one
(Viterbi, for pruning). ``expected_counts_plain`` answers the first chunk by chunk, edge by
edge, in log space: the readable version. ``Lattice`` answers both for all chunks at once
with numpy, one character offset at a time; the tests hold the two equal, and Viterbi
equal to ``UnigramTokenizer.segment``.

Shape letters: G gaps between characters over all chunks, E edges (a piece at a place),
C chunks, P candidate pieces; e, t: the edges and target gaps of one offset.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from lib.tokenizer.base import utf8


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    high, low = max(a, b), min(a, b)
    return high + math.log1p(math.exp(low - high))


def expected_counts_plain(chunks: dict[str, int], scores: dict[str, float], max_piece_len: int) -> dict[str, float]:
    """Forward-backward chunk by chunk, edge by edge, in log space: the plain twin of
    ``Lattice.expected_counts``. forward[i] sums over every split of chunk[:i], backward[i]
    over every split of chunk[i:]; a piece's expected uses are the probability mass of the
    splits through each of its edges."""
    expected: dict[str, float] = defaultdict(float)
    for chunk, freq in chunks.items():
        n = len(chunk)
        edges = [  # (start, end, piece), sorted by end
            (start, end, piece)
            for end in range(1, n + 1)
            for start in range(max(0, end - max_piece_len), end)
            if (piece := chunk[start:end]) in scores
        ]
        forward = [0.0] + [-math.inf] * n
        for start, end, piece in edges:  # sorted by end: forward[start] is final
            forward[end] = _logaddexp(forward[end], forward[start] + scores[piece])
        if forward[n] == -math.inf:
            continue  # a character without a piece: byte fallback, no piece is used
        backward = [-math.inf] * n + [0.0]
        for start, end, piece in reversed(edges):
            backward[start] = _logaddexp(backward[start], scores[piece] + backward[end])
        for start, end, piece in edges:
            expected[piece] += freq * math.exp(forward[start] + scores[piece] + backward[end] - forward[n])
    return dict(expected)


class Lattice:
    """Every place a candidate piece fits in every training chunk, as flat numpy arrays.

    Position ``g`` numbers the gaps between characters across all chunks (a chunk of n
    characters has n + 1 of them). An edge is one piece spanning gaps ``start[e]`` to
    ``end[e]``. Forward-backward and Viterbi then run over all chunks at once, one offset
    into the chunks at a time: every edge into a gap shares that gap's offset, so each step
    is a grouped log-sum-exp (or max) over a slice of the arrays, instead of a Python loop
    over each edge. ``UnigramTokenizer.segment`` is the plain twin, chunk by chunk, and the
    tests hold them equal. Built once per training run; ``keep`` drops pruned pieces.
    Every character of the text gets an edge, so Viterbi can always spell a chunk (a
    character without a piece costs its bytes, as in ``segment``).
    """

    def __init__(self, chunks: dict[str, int], pieces: Iterable[str], max_piece_len: int) -> None:
        self.pieces = sorted(set(pieces) | {char for chunk in chunks for char in chunk})
        index = {piece: i for i, piece in enumerate(self.pieces)}
        starts, ends, piece_ids, first_gaps, last_gaps = [], [], [], [], []
        base = 0
        for chunk in chunks:
            n = len(chunk)
            for end in range(1, n + 1):
                for start in range(max(0, end - max_piece_len), end):
                    if (i := index.get(chunk[start:end])) is not None:
                        starts.append(base + start)
                        ends.append(base + end)
                        piece_ids.append(i)
            first_gaps.append(base)
            last_gaps.append(base + n)
            base += n + 1
        self.n_gaps = base
        self.first_gap = np.array(first_gaps, dtype=np.int64)  # (C,) chunk c starts at this gap
        self.last_gap = np.array(last_gaps, dtype=np.int64)  # (C,) and ends at this one
        self.freq = np.array(list(chunks.values()), dtype=np.float64)  # (C,)
        chunk_of_gap = np.repeat(np.arange(len(chunks)), self.last_gap - self.first_gap + 1)  # (G,)
        self._set_edges(
            np.array(starts, dtype=np.int64),
            np.array(ends, dtype=np.int64),
            np.array(piece_ids, dtype=np.int64),
            chunk_of_gap,
        )

    def _set_edges(self, start, end, piece, chunk_of_gap) -> None:
        self.chunk_of_gap = chunk_of_gap
        self.start, self.end, self.piece = start, end, piece  # (E,) each
        offset_end = end - self.first_gap[chunk_of_gap[end]]  # (E,) position of the end within its chunk
        offset_start = start - self.first_gap[chunk_of_gap[start]]  # (E,)
        self._by_end = self._groups(offset_end, end, start)  # forward: gap by gap, left to right
        self._by_start = self._groups(-offset_start, start, end)  # backward: right to left

    @staticmethod
    def _groups(level, target, tie):
        """Edges ordered by level, then target gap, then ``tie``; for each level, the edge
        order and where each target's run of edges starts."""
        order = np.lexsort((tie, target, level))  # (E,)
        level, target = level[order], target[order]
        groups = []
        bounds = np.flatnonzero(np.diff(level)) + 1
        for part in np.split(np.arange(len(order)), bounds):
            if len(part) == 0:
                continue
            edges = order[part]  # (e,)
            run_starts = np.flatnonzero(np.r_[True, target[part][1:] != target[part][:-1]])  # (t,)
            run_lengths = np.diff(np.append(run_starts, len(part)))  # (t,)
            groups.append((edges, run_starts, target[part][run_starts], run_lengths))
        return groups

    def keep(self, alive: set[str]) -> None:
        """Forget the edges of pieces that are gone (characters always stay)."""
        mask = np.array([piece in alive or len(piece) == 1 for piece in self.pieces])[self.piece]  # (E,)
        self._set_edges(self.start[mask], self.end[mask], self.piece[mask], self.chunk_of_gap)

    def _edge_scores(self, scores: dict[str, float], fallback: float | None) -> np.ndarray:
        """(E,) each edge's score; a character that is no piece scores ``fallback`` per byte
        (or -inf: EM uses no byte-fallback edges)."""
        table = np.array(
            [
                scores[p]
                if p in scores
                else (fallback * len(utf8(p)) if fallback is not None and len(p) == 1 else -np.inf)
                for p in self.pieces
            ]
        )  # (P,)
        return table[self.piece]  # (E,)

    def expected_counts(self, scores: dict[str, float]) -> dict[str, float]:
        """Forward-backward over every chunk: the expected uses of each piece, weighted by
        chunk frequency. A chunk that no split covers adds nothing (as in the log version)."""
        edge_score = self._edge_scores(scores, None)  # (E,)
        forward = np.full(self.n_gaps, -np.inf)  # (G,)
        forward[self.first_gap] = 0.0
        for edges, runs, targets, lengths in self._by_end:
            forward[targets] = _group_logsumexp(forward[self.start[edges]] + edge_score[edges], runs, lengths)
        backward = np.full(self.n_gaps, -np.inf)  # (G,)
        backward[self.last_gap] = 0.0
        for edges, runs, targets, lengths in self._by_start:
            backward[targets] = _group_logsumexp(backward[self.end[edges]] + edge_score[edges], runs, lengths)
        total = forward[self.last_gap]  # (C,) log-sum over all splits of each chunk
        chunk = self.chunk_of_gap[self.start]  # (E,)
        with np.errstate(invalid="ignore"):
            log_posterior = forward[self.start] + edge_score + backward[self.end] - total[chunk]  # (E,)
        usable = np.isfinite(log_posterior)
        weights = np.zeros(len(self.start))  # (E,)
        weights[usable] = np.exp(log_posterior[usable]) * self.freq[chunk[usable]]
        counts = np.bincount(self.piece, weights=weights, minlength=len(self.pieces))  # (P,)
        return {self.pieces[i]: float(counts[i]) for i in np.flatnonzero(counts)}

    def viterbi_uses(self, scores: dict[str, float], byte_score: float) -> dict[str, float]:
        """How often each piece (or fallback character) is used by the best split of every
        chunk, weighted by chunk frequency. Ties go to the piece that starts first, as in
        ``segment``."""
        edge_score = self._edge_scores(scores, byte_score)  # (E,)
        best = np.full(self.n_gaps, -np.inf)  # (G,)
        best[self.first_gap] = 0.0
        back = np.full(self.n_gaps, -1, dtype=np.int64)  # (G,) the edge that ends the best split
        for edges, runs, targets, lengths in self._by_end:
            values = best[self.start[edges]] + edge_score[edges]  # (e,)
            top = np.maximum.reduceat(values, runs)  # (t,)
            best[targets] = top
            is_top = values == np.repeat(top, lengths)  # (e,)
            first_top = np.minimum.reduceat(np.where(is_top, np.arange(len(values)), len(values)), runs)  # (t,)
            back[targets] = edges[first_top]  # runs are sorted by start: the earliest start wins
        uses = np.zeros(len(self.pieces))  # (P,)
        gaps = self.last_gap[self.last_gap > self.first_gap]  # (C',) walk back from every chunk's end
        freq = self.freq[self.last_gap > self.first_gap]  # (C',)
        while len(gaps):
            edges = back[gaps]  # (C',)
            np.add.at(uses, self.piece[edges], freq)
            gaps = self.start[edges]
            more = gaps != self.first_gap[self.chunk_of_gap[gaps]]
            gaps, freq = gaps[more], freq[more]
        return {self.pieces[i]: float(uses[i]) for i in np.flatnonzero(uses)}


def _group_logsumexp(values: np.ndarray, runs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """log(sum(exp)) of each run of ``values`` (runs start at ``runs`` and have ``lengths``)."""
    top = np.maximum.reduceat(values, runs)  # (t,)
    safe = np.where(np.isfinite(top), top, 0.0)  # (t,)
    sums = np.add.reduceat(np.exp(values - np.repeat(safe, lengths)), runs)  # (t,)
    with np.errstate(divide="ignore"):
        return np.log(sums) + safe

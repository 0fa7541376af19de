"""Unigram language-model tokenizer (chapter 7), after Kudo (2018) and SentencePiece.

Where BPE *builds* tokens by merging, unigram *chooses* a segmentation: every piece in the
vocabulary has a log-probability, and a chunk is split into the pieces whose log-probabilities
add up to the most (Viterbi). Training starts from many frequent substrings and prunes:

    1. seed: every substring of up to ``max_piece_len`` characters, scored by frequency;
    2. EM: the E-step computes, for every chunk, the expected number of times each piece is
       used over *all* segmentations (forward-backward); the M-step sets each piece's
       probability to its share of the expected counts;
    3. prune: drop the pieces whose removal costs the least likelihood, keep ``shrink`` of
       them, and repeat from 2 until the vocabulary has the size asked for.

Single characters of the training text are kept while they fit. A character with no piece
is spelled as its UTF-8 bytes with the byte-fallback tokens ``<0x00>``..``<0xFF>`` (ids
0..255), so every string round-trips, as with byte-level BPE.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from tqdm.auto import tqdm

from lib.tokenizer import GPT4_SPLIT_PATTERN, Tokenizer, utf8

_BYTE_PENALTY = 10.0  # a byte-fallback token scores this much below the rarest piece


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    high, low = max(a, b), min(a, b)
    return high + math.log1p(math.exp(low - high))


class UnigramTokenizer(Tokenizer):
    """Unigram segmentation with byte fallback. Ids: 0..255 bytes, then pieces, then specials."""

    def __init__(self) -> None:
        super().__init__()
        self.scores: dict[str, float] = {}  # piece -> log-probability
        self.piece_ids: dict[str, int] = {}  # piece -> id
        self.max_piece_len = 1
        self._byte_score = self.byte_score(self.scores)

    # --- segmentation ---
    @staticmethod
    def byte_score(scores: dict[str, float]) -> float:
        """The score of one byte-fallback token: well below the rarest piece."""
        return min(scores.values(), default=0.0) - _BYTE_PENALTY

    def segment(self, chunk: str, scores: dict[str, float] | None = None, byte_score: float | None = None) -> list[str]:
        """The most probable split of ``chunk`` into pieces (Viterbi). A character with no
        piece comes back as itself, to be spelled in bytes."""
        if scores is None:
            scores, byte_score = self.scores, self._byte_score
        if byte_score is None:
            byte_score = self.byte_score(scores)
        best = [0.0] + [-math.inf] * len(chunk)  # best[i]: score of the best split of chunk[:i]
        back = [0] * (len(chunk) + 1)  # where the last piece of that split starts
        for end in range(1, len(chunk) + 1):
            for start in range(max(0, end - self.max_piece_len), end):
                score = scores.get(chunk[start:end])
                if score is None:
                    if end - start > 1:
                        continue
                    score = byte_score * len(utf8(chunk[start:end]))  # byte fallback, one token per byte
                if best[start] + score > best[end]:
                    best[end], back[end] = best[start] + score, start
        pieces, end = [], len(chunk)
        while end > 0:
            pieces.append(chunk[back[end] : end])
            end = back[end]
        return pieces[::-1]

    def token_name(self, token_id: int) -> str:
        """The piece, or <0xNN> for a byte-fallback token (SentencePiece's spelling)."""
        if 0 <= token_id < 256:
            return f"<0x{token_id:02X}>"
        return super().token_name(token_id)

    def _encode_chunk(self, chunk: str) -> list[int]:
        ids: list[int] = []
        for piece in self.segment(chunk):
            if piece in self.piece_ids:
                ids.append(self.piece_ids[piece])
            else:
                ids.extend(utf8(piece))  # byte fallback: ids 0..255 are the bytes themselves
        return ids

    # --- training ---
    def train(
        self,
        text: str,
        vocab_size: int,
        *,
        pattern: str | None = GPT4_SPLIT_PATTERN,
        special_tokens: Iterable[str] | None = None,
        normalization: str | None = None,
        verbose: bool = False,
        max_piece_len: int = 12,
        seed_size: int = 20_000,
        shrink: float = 0.75,
        em_iterations: int = 2,
    ) -> None:
        special_tokens = list(special_tokens or ())
        n_pieces = vocab_size - 256 - len(special_tokens)
        if n_pieces < 1:
            raise ValueError(f"vocab_size must exceed 256 + {len(special_tokens)} special tokens, got {vocab_size}")
        self.__init__()  # forget any earlier training
        self.pattern, self.normalization, self.max_piece_len = pattern, normalization, max_piece_len
        chunks = self.training_chunks(text, special_tokens)

        # 1. Seed: characters (as many as fit, most frequent first) and frequent substrings.
        char_counts: dict[str, int] = defaultdict(int)
        substring_counts: dict[str, int] = defaultdict(int)
        for chunk, freq in chunks.items():
            for start in range(len(chunk)):
                char_counts[chunk[start]] += freq
                for end in range(start + 2, min(len(chunk), start + max_piece_len) + 1):
                    substring_counts[chunk[start:end]] += freq
        chars = sorted(char_counts, key=lambda c: (-char_counts[c], c))[:n_pieces]
        frequent = [s for s in substring_counts if substring_counts[s] >= 2]
        frequent.sort(key=lambda s: (-substring_counts[s] * len(s), s))  # SentencePiece scores seeds by freq × length
        seeds = {c: float(char_counts[c]) for c in chars}
        seeds.update({s: float(substring_counts[s]) for s in frequent[: max(0, seed_size - len(chars))]})
        total = sum(seeds.values())
        scores = {piece: math.log(count / total) for piece, count in seeds.items()}
        required = set(chars)

        # 2-3. EM, then prune, until the vocabulary fits.
        with tqdm(desc="unigram pieces", disable=not verbose) as progress:
            while True:
                for _ in range(em_iterations):
                    scores = self._em_step(chunks, scores, required)
                progress.set_postfix(pieces=len(scores))
                progress.update()
                if len(scores) <= n_pieces:
                    break
                scores = self._prune(chunks, scores, required, max(n_pieces, int(len(scores) * shrink)))

        self.scores, self._byte_score = scores, self.byte_score(scores)
        ordered = sorted(scores, key=lambda piece: (-scores[piece], piece))
        for index, piece in enumerate(ordered):
            self.piece_ids[piece] = 256 + index
            self.vocab[256 + index] = utf8(piece)
        self._register_special_tokens(special_tokens)

    def _em_step(self, chunks: dict[str, int], scores: dict[str, float], required: set[str]) -> dict[str, float]:
        """One E-step (expected piece counts by forward-backward) and M-step (renormalize)."""
        expected: dict[str, float] = defaultdict(float)
        for chunk, freq in chunks.items():
            n = len(chunk)
            edges = [  # (start, end, piece, score) for every piece that fits somewhere in the chunk
                (start, end, chunk[start:end], scores[chunk[start:end]])
                for end in range(1, n + 1)
                for start in range(max(0, end - self.max_piece_len), end)
                if chunk[start:end] in scores
            ]
            forward = [0.0] + [-math.inf] * n  # log-sum over all splits of chunk[:i]
            for start, end, _, score in edges:  # edges are sorted by end: forward[start] is final
                forward[end] = _logaddexp(forward[end], forward[start] + score)
            backward = [-math.inf] * n + [0.0]  # log-sum over all splits of chunk[i:]
            for start, end, _, score in reversed(edges):
                backward[start] = _logaddexp(backward[start], score + backward[end])
            if forward[n] == -math.inf:
                continue  # a character without a piece: byte fallback, no piece is used
            for start, end, piece, score in edges:
                posterior = math.exp(forward[start] + score + backward[end] - forward[n])
                expected[piece] += freq * posterior
        for char in required:  # keep characters alive even when longer pieces cover them
            expected[char] = max(expected[char], 0.5)
        total = sum(expected.values())
        return {piece: math.log(count / total) for piece, count in expected.items() if count > 1e-3}

    def _prune(
        self, chunks: dict[str, int], scores: dict[str, float], required: set[str], keep: int
    ) -> dict[str, float]:
        """Keep the ``keep`` pieces whose removal would cost the most log-likelihood.

        The cost of removing piece p (as in SentencePiece): every Viterbi use of p must be
        replaced by p's own best split without p, which lowers the score by
        uses(p) × (score(p) - score(best split of p without p)).
        """
        byte_score = self.byte_score(scores)
        uses: dict[str, int] = defaultdict(int)
        for chunk, freq in chunks.items():
            for piece in self.segment(chunk, scores, byte_score):
                uses[piece] += freq
        cost: dict[str, float] = {}
        for piece, score in list(scores.items()):
            if piece in required:
                continue
            if uses[piece] == 0:
                cost[piece] = 0.0
                continue
            del scores[piece]  # score the piece's best split without it, then put it back
            split = self.segment(piece, scores, byte_score)
            alternative = sum(scores.get(p, byte_score * len(utf8(p))) for p in split)
            scores[piece] = score
            cost[piece] = uses[piece] * (score - alternative)
        removable = sorted(cost, key=lambda p: (-cost[p], p))
        kept = set(required) | set(removable[: max(0, keep - len(required))])
        return {piece: scores[piece] for piece in kept}

    # --- save / load ---
    def _state(self) -> dict:
        ordered = sorted(self.piece_ids, key=self.piece_ids.get)
        return {"max_piece_len": self.max_piece_len, "pieces": [[piece, self.scores[piece]] for piece in ordered]}

    def _set_state(self, state: dict) -> None:
        self.max_piece_len = state["max_piece_len"]
        for index, (piece, score) in enumerate(state["pieces"]):
            self.scores[piece] = score
            self.piece_ids[piece] = 256 + index
            self.vocab[256 + index] = utf8(piece)
        self._byte_score = self.byte_score(self.scores)

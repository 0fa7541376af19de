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

Characters covering ``character_coverage`` of the training text (99.95% by default, as in
SentencePiece) are pieces of their own and never pruned. A character with no piece is
spelled as its UTF-8 bytes with the byte-fallback tokens ``<0x00>``..``<0xFF>`` (ids
0..255), so every string round-trips, as with byte-level BPE, and rare characters leave
room for longer pieces.

Training runs forward-backward and Viterbi over all chunks at once (``lib.tokenizer.lattice``: flat
numpy arrays, one step per character offset); ``segment`` and ``expected_counts_plain``
are the plain per-chunk twins the tests hold them equal to. Chunks longer than
``_TRAIN_WINDOW`` characters are cut into windows for training, so a one-line megabyte
trains in time linear in its length.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import accumulate

from tqdm.auto import tqdm

from lib.tokenizer.base import GPT4_SPLIT_PATTERN, Tokenizer, _field, check_text, check_vocab_size, utf8
from lib.tokenizer.lattice import Lattice
from lib.validation import is_integer

_BYTE_PENALTY = 10.0  # a byte-fallback token scores this much below the rarest piece
_TRAIN_WINDOW = 256  # training cuts longer chunks into windows of this many characters


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

    def lattice(self, chunk: str) -> list[tuple[int, int, str, float]]:
        """Every (start, end, piece, score) of the vocabulary that fits in ``chunk``: the
        arcs among which ``segment`` picks its best path (for drawing the lattice)."""
        return [
            (start, end, chunk[start:end], self.scores[chunk[start:end]])
            for end in range(1, len(chunk) + 1)
            for start in range(max(0, end - self.max_piece_len), end)
            if chunk[start:end] in self.scores
        ]

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
        seed_size: int | None = None,
        shrink: float = 0.75,
        em_iterations: int = 2,
        character_coverage: float = 0.9995,
    ) -> None:
        """Learn ``vocab_size - 256 - len(special_tokens)`` pieces.

        ``seed_size``: how many substrings training starts from (default: 4 per piece, at
        least 5,000). ``character_coverage``: the share of the text's characters (counted with repeats)
        that must be pieces of their own, as in SentencePiece; the rarest characters beyond
        it get no piece and are spelled in bytes, which leaves room for longer pieces.
        """
        check_text(text)
        check_vocab_size(vocab_size)
        for name, value, low, high in (
            ("character_coverage", character_coverage, 0.0, 1.0),
            ("shrink", shrink, 0.0, 1.0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not low < value <= high:
                raise ValueError(f"{name} must be a number in ({low}, {high}], got {value!r}")
        for name, value in (
            ("max_piece_len", max_piece_len),
            ("em_iterations", em_iterations),
        ):
            if not is_integer(value) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        special_tokens = list(special_tokens or ())
        n_pieces = vocab_size - 256 - len(special_tokens)
        if seed_size is None:
            seed_size = max(5_000, 4 * n_pieces)  # seeds to prune from; more costs time and gains little
        if not is_integer(seed_size) or seed_size < 1:
            raise ValueError(f"seed_size must be a positive int, got {seed_size!r}")
        if n_pieces < 1:
            raise ValueError(f"vocab_size must exceed 256 + {len(special_tokens)} special tokens, got {vocab_size}")
        self.__init__()  # forget any earlier training
        self.pattern, self.normalization, self.max_piece_len = pattern, normalization, max_piece_len
        chunks = self.training_chunks(text, special_tokens)
        # A chunk of a megabyte (a line with no spaces, pattern=None) would make every step
        # of training walk one giant lattice; windows keep the work linear in the text and
        # let repeated windows be counted once. SentencePiece skips such lines altogether.
        for chunk in [chunk for chunk in chunks if len(chunk) > _TRAIN_WINDOW]:
            freq = chunks.pop(chunk)
            for start in range(0, len(chunk), _TRAIN_WINDOW):
                chunks[chunk[start : start + _TRAIN_WINDOW]] += freq

        # 1. Seed: characters (as many as fit, most frequent first) and frequent substrings.
        counts: Counter[str] = Counter()  # every substring of up to max_piece_len characters
        once = [chunk for chunk, freq in chunks.items() if freq == 1]  # windows, rare words: count in C
        for length in range(1, max_piece_len + 1):
            counts.update(chunk[start : start + length] for chunk in once for start in range(len(chunk) - length + 1))
        for chunk, freq in chunks.items():
            if freq > 1:
                for start in range(len(chunk)):
                    for end in range(start + 1, min(len(chunk), start + max_piece_len) + 1):
                        counts[chunk[start:end]] += freq
        char_counts = {piece: count for piece, count in counts.items() if len(piece) == 1}
        chars = sorted(char_counts, key=lambda c: (-char_counts[c], c))
        # the most frequent characters that together make up ``character_coverage`` of the text
        cumulative = list(accumulate(char_counts[char] for char in chars))
        n_chars = bisect_left(cumulative, character_coverage * cumulative[-1]) + 1 if chars else 0
        chars = chars[: min(n_chars, n_pieces)]
        frequent = [s for s, count in counts.items() if count >= 2 and len(s) > 1]
        # SentencePiece scores seeds by frequency × length; ties go to the smaller string
        frequent = heapq.nsmallest(max(0, seed_size - len(chars)), frequent, key=lambda s: (-counts[s] * len(s), s))
        seeds = {c: float(char_counts[c]) for c in chars}
        seeds.update({s: float(counts[s]) for s in frequent})
        total = sum(seeds.values())
        scores = {piece: math.log(count / total) for piece, count in seeds.items()}
        required = set(chars)

        # 2-3. EM, then prune, until the vocabulary fits.
        lattice = Lattice(chunks, scores, max_piece_len)
        with tqdm(desc="unigram pieces", disable=not verbose) as progress:
            while True:
                for _ in range(em_iterations):
                    scores = self._em_step(chunks, scores, required, lattice)
                progress.set_postfix(pieces=len(scores))
                progress.update()
                if len(scores) <= n_pieces:
                    break
                scores = self._prune(lattice, scores, required, max(n_pieces, int(len(scores) * shrink)))

        self.scores, self._byte_score = scores, self.byte_score(scores)
        ordered = sorted(scores, key=lambda piece: (-scores[piece], piece))
        for index, piece in enumerate(ordered):
            self.piece_ids[piece] = 256 + index
            self.vocab[256 + index] = utf8(piece)
        self._register_special_tokens(special_tokens)

    def _em_step(
        self, chunks: dict[str, int], scores: dict[str, float], required: set[str], lattice: Lattice | None = None
    ) -> dict[str, float]:
        """One E-step (expected piece counts by forward-backward) and M-step (renormalize)."""
        lattice = Lattice(chunks, scores, self.max_piece_len) if lattice is None else lattice
        expected: dict[str, float] = defaultdict(float, lattice.expected_counts(scores))
        for char in required:  # keep characters alive even when longer pieces cover them
            expected[char] = max(expected[char], 0.5)
        total = sum(expected.values())
        return {piece: math.log(count / total) for piece, count in expected.items() if count > 1e-3}

    def _prune(self, lattice: Lattice, scores: dict[str, float], required: set[str], keep: int) -> dict[str, float]:
        """Keep the ``keep`` pieces whose removal would cost the most log-likelihood.

        The cost of removing piece p (as in SentencePiece): every Viterbi use of p must be
        replaced by p's own best split without p, which lowers the score by
        uses(p) × (score(p) - score(best split of p without p)).
        """
        byte_score = self.byte_score(scores)
        uses: dict[str, float] = defaultdict(float, lattice.viterbi_uses(scores, byte_score))
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
        lattice.keep(kept)
        return {piece: scores[piece] for piece in kept}

    # --- save / load ---
    def _state(self) -> dict:
        ordered = sorted(self.piece_ids, key=self.piece_ids.get)
        return {"max_piece_len": self.max_piece_len, "pieces": [[piece, self.scores[piece]] for piece in ordered]}

    def _set_state(self, state: dict, path) -> None:
        max_piece_len = _field(state, "max_piece_len", int, path)
        if max_piece_len < 1:
            raise ValueError(f"{path}: field 'max_piece_len' must be at least 1, got {max_piece_len}")
        self.max_piece_len = max_piece_len
        for index, entry in enumerate(_field(state, "pieces", list, path)):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]):
                raise ValueError(f"{path}: field 'pieces' entry {index} is {entry!r}; it must be [piece, score]")
            piece, score = entry
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                raise ValueError(
                    f"{path}: field 'pieces' entry {index} ({piece!r}) has score {score!r}, not a finite number"
                )
            if piece in self.scores:
                raise ValueError(f"{path}: field 'pieces' holds the piece {piece!r} twice")
            if len(piece) > max_piece_len:
                raise ValueError(f"{path}: field 'pieces' entry {index} ({piece!r}) is longer than max_piece_len")
            self.scores[piece] = float(score)
            self.piece_ids[piece] = 256 + index
            self.vocab[256 + index] = utf8(piece)
        self._byte_score = self.byte_score(self.scores)


# --- Subword regularization: sampling a segmentation from the lattice (Kudo, 2018) ---------
def segmentation_probabilities(
    tokenizer: UnigramTokenizer, chunk: str, alpha: float = 1.0
) -> list[tuple[tuple[str, ...], float]]:
    """Every segmentation of ``chunk`` into the tokenizer's pieces, with P(split) ∝ P(pieces)^alpha.

    The plain enumeration (fine for a word): the reference that ``sample_segmentation``'s
    draws follow. Splits that need byte fallback are left out.
    """
    splits: list[tuple[tuple[str, ...], float]] = []

    def walk(start: int, pieces: tuple[str, ...], score: float) -> None:
        if start == len(chunk):
            splits.append((pieces, score))
            return
        for end in range(start + 1, min(len(chunk), start + tokenizer.max_piece_len) + 1):
            piece = chunk[start:end]
            if piece in tokenizer.scores:
                walk(end, pieces + (piece,), score + alpha * tokenizer.scores[piece])

    walk(0, (), 0.0)
    if not splits:
        raise ValueError(f"no split of {chunk!r} uses pieces only")
    top = max(score for _, score in splits)
    weights = [math.exp(score - top) for _, score in splits]
    total = sum(weights)
    return sorted(((pieces, w / total) for (pieces, _), w in zip(splits, weights, strict=True)), key=lambda s: -s[1])


def sample_segmentation(tokenizer: UnigramTokenizer, chunk: str, rng: random.Random, alpha: float = 1.0) -> list[str]:  # noqa: F821
    """One segmentation of ``chunk`` drawn with probability ∝ P(pieces)^alpha (forward filtering, backward sampling).

    forward[i] is the log-sum over every split of chunk[:i]; walking back from the end,
    the last piece is drawn among the pieces that end there, each weighted by
    forward[its start] + alpha · its score. ``alpha`` sharpens (large) or flattens (small)
    the distribution; Viterbi's best split is the limit of large alpha. Kudo (2018) trains
    on such samples so that a model sees many splits of the same word.
    """
    from lib.tokenizer.lattice import _logaddexp

    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    n = len(chunk)
    forward = [0.0] + [-math.inf] * n
    for end in range(1, n + 1):
        for start in range(max(0, end - tokenizer.max_piece_len), end):
            score = tokenizer.scores.get(chunk[start:end])
            if score is not None and forward[start] > -math.inf:
                forward[end] = _logaddexp(forward[end], forward[start] + alpha * score)
    if forward[n] == -math.inf:
        raise ValueError(f"no split of {chunk!r} uses pieces only")
    pieces, end = [], n
    while end > 0:
        options = [
            (start, forward[start] + alpha * tokenizer.scores[chunk[start:end]])
            for start in range(max(0, end - tokenizer.max_piece_len), end)
            if chunk[start:end] in tokenizer.scores and forward[start] > -math.inf
        ]
        top = max(score for _, score in options)
        weights = [math.exp(score - top) for _, score in options]
        start = rng.choices([s for s, _ in options], weights=weights)[0]
        pieces.append(chunk[start:end])
        end = start
    return pieces[::-1]

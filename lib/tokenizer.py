"""Byte-level BPE, and what every tokenizer in the book shares (chapter 7).

A tokenizer maps a string to a list of integer ids and back. Ours all work on UTF-8 bytes
underneath, so every string a reader can type has an encoding and nothing is "unknown":

    text -> NFKC (optional) -> split out special tokens -> split into chunks by a regex
         -> each chunk's bytes -> ids (BPE merges here; Viterbi in lib/unigram.py)

``BPETokenizer`` learns merges (Sennrich et al., 2016): start from the 256 byte values,
repeatedly find the most frequent adjacent pair of ids and give it a new id. Two trainers
give identical merges: ``train_naive`` recounts every pair after every merge (easy to
follow, slow), ``train`` keeps the counts and updates them only in the chunks that
contain the merged pair, picking the best pair from a heap.

Tie-breaking, in both: the highest count wins, then the smallest pair (compared as a tuple
of ids). That makes training deterministic.

Subtle: the chunks are what keeps both fast. Merges never cross a chunk boundary, training
touches only the chunks that hold the merged pair, and encoding caches each distinct chunk.
With ``pattern=None`` the whole text is one chunk: fine for the paragraph a reader trains
on to watch the merges, far too slow for a megabyte.
"""

from __future__ import annotations

import heapq
import json
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

import regex
from tqdm.auto import tqdm

# The split patterns of GPT-2 and of GPT-4 (cl100k). GPT-4's keeps runs of digits to
# at most three, attaches one leading non-letter to a word, and keeps newlines apart.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT4_SPLIT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""
)
_CACHE_LIMIT = 200_000  # chunk encodings kept by encode(); cleared when full


def utf8(text: str) -> bytes:
    """text.encode('utf-8'), with a clear error for lone surrogates (which UTF-8 cannot hold)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        char = text[error.start]
        raise ValueError(
            f"text contains a lone surrogate U+{ord(char):04X} at index {error.start}, "
            "which UTF-8 cannot encode; it is not valid Unicode text"
        ) from None


def normalize(text: str, normalization: str | None) -> str:
    if normalization is None:
        return text
    if normalization == "nfkc":
        return unicodedata.normalize("NFKC", text)
    raise ValueError(f"normalization must be None or 'nfkc', got {normalization!r}")


def nfkc_changes(text: str) -> list[tuple[int, str, str]]:
    """(index, character, what NFKC makes of it) for every character NFKC rewrites.

    Each entry is a place where normalizing breaks exact reversibility: decode(encode(text))
    gives back the normalized form, not the text. Ligatures (ﬁ -> fi), full-width forms
    (Ａ -> A), superscripts (² -> 2), compatibility characters (™ -> TM, ① -> 1).
    Characters are judged one at a time; a few sequences change only in context.
    """
    return [(i, ch, folded) for i, ch in enumerate(text) if (folded := unicodedata.normalize("NFKC", ch)) != ch]


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


class Tokenizer:
    """What BPE and unigram share: special tokens, pre-tokenization, decode, save/load.

    A subclass fills ``vocab`` (id -> bytes) and implements ``_encode_chunk``.
    """

    def __init__(self) -> None:
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
        self.special_tokens: dict[str, int] = {}
        self.pattern: str | None = GPT4_SPLIT_PATTERN
        self.normalization: str | None = None
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self.vocab) + len(self.special_tokens)

    # --- pre-tokenization ---
    def split_special(self, text: str, special_tokens: Iterable[str] | None = None) -> list[tuple[str, bool]]:
        """[(piece, is_special), ...] covering ``text``; special tokens are never merged into.

        ``special_tokens`` defaults to this tokenizer's own; training passes the ones it is
        about to register. The longest special token wins where two could match.
        """
        special_tokens = list(self.special_tokens if special_tokens is None else special_tokens)
        if not special_tokens:
            return [(text, False)]
        alternatives = "|".join(regex.escape(s) for s in sorted(special_tokens, key=len, reverse=True))
        parts = regex.split(f"({alternatives})", text)
        return [(part, i % 2 == 1) for i, part in enumerate(parts) if part]

    def chunks(self, text: str) -> list[str]:
        """Split ordinary text by the pattern. Gaps the pattern does not match become chunks
        too, so no character is ever dropped, whatever pattern a reader tries."""
        if self.pattern is None:
            return [text] if text else []
        compiled = regex.compile(self.pattern)  # regex keeps its own cache of compiled patterns
        if compiled.groups == 0:
            pieces = compiled.findall(text)
            if sum(map(len, pieces)) == len(text):
                return pieces  # the fast path: the pattern matched every character (GPT-2/4's do)
        pieces, end = [], 0
        for match in compiled.finditer(text):
            if match.start() > end:
                pieces.append(text[end : match.start()])
            if match.end() > match.start():
                pieces.append(match.group())
            end = match.end()
        if end < len(text):
            pieces.append(text[end:])
        return pieces

    def training_chunks(self, text: str, special_tokens: Iterable[str]) -> Counter[str]:
        """How often each chunk occurs in the text, the special tokens left out."""
        text = normalize(text, self.normalization)
        utf8(text)  # fail early on lone surrogates
        counts: Counter[str] = Counter()
        for part, is_special in self.split_special(text, special_tokens):
            if not is_special:
                counts.update(self.chunks(part))
        return counts

    # --- encode / decode ---
    def encode(self, text: str) -> list[int]:
        text = normalize(text, self.normalization)
        utf8(text)
        ids: list[int] = []
        for part, is_special in self.split_special(text):
            if is_special:
                ids.append(self.special_tokens[part])
                continue
            for chunk in self.chunks(part):
                cached = self._cache.get(chunk)
                if cached is None:
                    if len(self._cache) >= _CACHE_LIMIT:
                        self._cache.clear()
                    cached = self._cache[chunk] = self._encode_chunk(chunk)
                ids.extend(cached)
        return ids

    def _encode_chunk(self, chunk: str) -> list[int]:
        raise NotImplementedError

    def token_bytes(self, token_id: int) -> bytes:
        if token_id in self.vocab:
            return self.vocab[token_id]
        for text, special_id in self.special_tokens.items():
            if special_id == token_id:
                return text.encode("utf-8")
        raise ValueError(f"unknown token id {token_id!r}: ids run from 0 to {len(self) - 1}")

    def token_name(self, token_id: int) -> str:
        """A readable name for one token: its text, with bytes that are not UTF-8 escaped."""
        return self.token_bytes(token_id).decode("utf-8", errors="backslashreplace")

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``. Ids that cut a multi-byte character in half decode to U+FFFD."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    # --- save / load ---
    def _state(self) -> dict:
        raise NotImplementedError

    def _set_state(self, state: dict) -> None:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        state = {
            "type": type(self).__name__,
            "version": 1,
            "pattern": self.pattern,
            "normalization": self.normalization,
            "special_tokens": self.special_tokens,
            **self._state(),
        }
        Path(path).write_text(json.dumps(state, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path):
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        if state.get("type") != cls.__name__:
            raise ValueError(f"{path} holds a {state.get('type')!r}, not a {cls.__name__}")
        tokenizer = cls()
        tokenizer.pattern = state["pattern"]
        tokenizer.normalization = state["normalization"]
        tokenizer._set_state(state)
        tokenizer.special_tokens = dict(state["special_tokens"])
        return tokenizer

    def _register_special_tokens(self, special_tokens: Iterable[str] | None) -> None:
        """Give the special tokens the ids after the learned vocabulary, in the order given."""
        self.special_tokens = {}
        for text in special_tokens or ():
            if not text or text in self.special_tokens:
                raise ValueError(f"special tokens must be distinct, non-empty strings; got {text!r}")
            self.special_tokens[text] = len(self.vocab) + len(self.special_tokens)


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
        self.merges: dict[tuple[int, int], int] = {}  # (a, b) -> new id, in merge order

    def _prepare(self, text: str, vocab_size: int, pattern: str | None, special_tokens, normalization) -> Counter:
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
        """Apply merges by rank: always the adjacent pair that was learned first."""
        ids = list(utf8(chunk))
        while len(ids) >= 2:
            # merges are numbered in the order they were learned, so the id is the rank
            pair = min(pairwise(ids), key=lambda p: self.merges.get(p, float("inf")))
            if pair not in self.merges:
                break
            ids = merge(ids, pair, self.merges[pair])
        return ids

    def _state(self) -> dict:
        return {
            "merges": [list(pair) for pair in self.merges],  # merge i makes id 256 + i
            "merged_tokens": [self.token_name(i) for i in self.merges.values()],  # for people; not read back
        }

    def _set_state(self, state: dict) -> None:
        for step, (a, b) in enumerate(state["merges"]):
            self._add_merge((a, b), 256 + step, 0, verbose=False)

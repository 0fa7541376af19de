"""A multilingual training corpus that is the same on every machine (chapters 7 and 9).

Nothing is downloaded: the text is generated from the paragraphs in
``lib.fertility.SAMPLE_TEXTS`` (written for this book, one per language, plus a few lines of
Python). For each language a bigram chain (which word may follow which, counted in that
paragraph) is walked with a seeded ``random.Random``; Chinese and Japanese, written without
spaces, are walked character by character. So the corpus holds real words of ten languages
in six scripts, in new orders, as much of it as asked for.

Only integer arithmetic on ``random.Random(seed)`` decides the text (``randrange``, whose
algorithm Python has kept since 3.2), so the same call gives the same string on every
machine and Python version.

    >>> text = multilingual_corpus(2_000)
    >>> len(text.encode("utf-8")) <= 2_000 and text == multilingual_corpus(2_000)
    True

Limits: the words are those of eleven short paragraphs, so the vocabulary is small (a few
hundred words); good for watching a tokenizer learn and for comparing scripts, not a
stand-in for a web-scale corpus.
"""

from __future__ import annotations

import random

import regex

from lib.fertility import SAMPLE_TEXTS, UNSPACED


def _units(name: str, text: str) -> list[str]:
    """The units the chain walks: characters for unspaced scripts, lines for code, else words."""
    if name in UNSPACED:
        return list(text)
    if name == "Python":
        return [line + "\n" for line in text.splitlines()]
    return regex.findall(r"\S+", text)


def _chain(units: list[str]) -> dict[str, list[str]]:
    """unit -> the units that follow it in the paragraph (repeats kept, so counts weigh)."""
    follows: dict[str, list[str]] = {}
    for here, after in zip(units, units[1:] + units[:1], strict=True):  # wraps around: no dead end
        follows.setdefault(here, []).append(after)
    return follows


def sentences(name: str, n: int, seed: int = 0) -> list[str]:
    """``n`` generated sentences (or code lines) in the language ``name`` of SAMPLE_TEXTS."""
    if name not in SAMPLE_TEXTS:
        raise ValueError(f"name must be one of {sorted(SAMPLE_TEXTS)}, got {name!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    units = _units(name, SAMPLE_TEXTS[name])
    follows = _chain(units)
    rng = random.Random(f"{seed}:{name}")
    joiner = "" if name in UNSPACED or name == "Python" else " "
    out = []
    for _ in range(n):
        unit = units[rng.randrange(len(units))]
        words = [unit]
        for _ in range(4 + rng.randrange(14)):  # 5 to 18 units
            unit = follows[unit][rng.randrange(len(follows[unit]))]
            words.append(unit)
        out.append(joiner.join(words))
    return out


def multilingual_corpus(n_bytes: int, seed: int = 0, languages: tuple[str, ...] | None = None) -> str:
    """About ``n_bytes`` of UTF-8 (never more): paragraphs of generated sentences, the
    languages taking turns, separated by blank lines."""
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < 0:
        raise ValueError(f"n_bytes must be a non-negative int, got {n_bytes!r}")
    languages = tuple(SAMPLE_TEXTS) if languages is None else tuple(languages)
    paragraphs, size, round_ = [], 0, 0
    while size < n_bytes:
        for name in languages:
            paragraph = "\n".join(sentences(name, 3, seed=seed * 1_000_003 + round_)) + "\n\n"
            paragraphs.append(paragraph)
            size += len(paragraph.encode("utf-8"))
        round_ += 1
    return "".join(paragraphs).encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")

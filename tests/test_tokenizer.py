"""Byte-level BPE: a hand-worked example, fast == naive, round trips, save/load, errors, HF."""

import doctest
import random

import pytest
from _requirements import require
from hypothesis import given, settings
from hypothesis import strategies as st

import lib.tokenizer.bpe
from lib.bench.tokenizer import english_corpus, hf_bpe
from lib.corpus import SAMPLE_TEXTS
from lib.fertility import NFKC_SAMPLE
from lib.tokenizer import GPT2_SPLIT_PATTERN, GPT4_SPLIT_PATTERN, BPETokenizer, merge, nfkc_changes

EOT = "<|endoftext|>"
TRICKY = [
    "",
    "hello world",
    "👩‍👩‍👧 family, 🇺🇦 flag, 😀",
    "日本語のテキストと中文文本",
    "مرحبا بالعالم",
    "שלום עולם",
    "e\u0301 cafe\u0301 (combining accents)",
    "nul\x00byte",
    "mixed\r\nnew\rlines\n\u2028and\u2029separators",
    "   leading and trailing spaces   ",
    "1234567890 digits 3.14159",
    "tab\tseparated\tvalues",
    f"special {EOT} inside {EOT}{EOT}",
    "\uffff\U0010ffff private and noncharacters \ue000",
]


@pytest.fixture(scope="module")
def bpe():
    tokenizer = BPETokenizer()
    corpus = english_corpus(30_000) + "\n".join(SAMPLE_TEXTS.values())
    tokenizer.train(corpus, 600, special_tokens=[EOT])
    return tokenizer


def test_hand_worked_example_merge_by_merge():
    # "aaabdaaabac", no split. Pair counts: aa 4 (overlapping, twice in each "aaab"), ab 2, ...
    tokenizer = BPETokenizer()
    tokenizer.train("aaabdaaabac", 259, pattern=None)
    # 1. (a, a) has the highest count, 4 -> 256 "aa". Text: [aa a b d aa a b a c]
    # 2. (aa, a) and (a, b) both occur twice; the smaller pair (97, 98) = "ab" wins -> 257.
    # 3. Text: [aa ab d aa ab a c]; (256, 257) occurs twice -> 258 "aaab".
    assert list(tokenizer.merges.items()) == [((97, 97), 256), ((97, 98), 257), ((256, 257), 258)]
    assert tokenizer.vocab[258] == b"aaab"
    assert tokenizer.encode("aaabdaaabac") == [258, 100, 258, 97, 99]
    assert tokenizer.decode([258, 100, 258, 97, 99]) == "aaabdaaabac"


def test_docstring_example():
    assert doctest.testmod(lib.tokenizer.bpe).failed == 0


def test_merge_left_to_right_with_overlaps():
    assert merge([1, 1, 1], (1, 1), 9) == [9, 1]
    assert merge([1, 1, 1, 1], (1, 1), 9) == [9, 9]
    assert merge([1, 2, 1, 2, 3], (1, 2), 9) == [9, 9, 3]


def _varied_texts():
    rng = random.Random(0)
    alphabet = "abcab  \n" + "абв" + "日本" + "😀" + "12"
    noise = "".join(rng.choice(alphabet) for _ in range(3000))
    return {
        "english": english_corpus(15_000),
        "samples": "\n".join(SAMPLE_TEXTS.values()),
        "repetitive": "aaaa aaa aa a " * 200 + "abababab " * 100,
        "noise": noise,
    }


@pytest.mark.parametrize("name", list(_varied_texts()))
@pytest.mark.parametrize("vocab_size", [257, 300, 450])
@pytest.mark.parametrize("pattern", [GPT4_SPLIT_PATTERN, GPT2_SPLIT_PATTERN], ids=["gpt4", "gpt2"])
def test_fast_and_naive_trainers_learn_identical_merges(name, vocab_size, pattern):
    text = _varied_texts()[name]
    fast, naive = BPETokenizer(), BPETokenizer()
    fast.train(text, vocab_size, pattern=pattern)
    naive.train_naive(text, vocab_size, pattern=pattern)
    assert list(fast.merges.items()) == list(naive.merges.items())


def test_fast_and_naive_agree_without_a_split_pattern():
    text = "low lower lowest newer newest " * 5
    fast, naive = BPETokenizer(), BPETokenizer()
    fast.train(text, 300, pattern=None)
    naive.train_naive(text, 300, pattern=None)
    assert fast.merges == naive.merges


def test_training_stops_when_nothing_is_left_to_merge():
    tokenizer = BPETokenizer()
    tokenizer.train("ab ab", 1000)
    assert [tokenizer.vocab[i] for i in tokenizer.merges.values()] == [b"ab", b" ab"]


@pytest.mark.parametrize("text", TRICKY + list(SAMPLE_TEXTS.values()) + [NFKC_SAMPLE])
def test_round_trip_on_tricky_and_sample_texts(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.one_of(st.text(), st.just(EOT), st.just("<|end")), max_size=5).map("".join))
def test_round_trip_property(text):
    tokenizer = _shared_bpe()
    assert tokenizer.decode(tokenizer.encode(text)) == text


_SHARED = {}


def _shared_bpe():  # hypothesis cannot take pytest fixtures; train once per session
    if "bpe" not in _SHARED:
        tokenizer = BPETokenizer()
        tokenizer.train(english_corpus(20_000) + "\n".join(SAMPLE_TEXTS.values()), 500, special_tokens=[EOT])
        _SHARED["bpe"] = tokenizer
    return _SHARED["bpe"]


def test_special_tokens_are_single_ids_and_never_merged_into():
    text = ("hello<|endoftext|>world " * 50) + "<|endoftext|>"
    tokenizer = BPETokenizer()
    tokenizer.train(text, 300, special_tokens=[EOT, "<|pad|>"])
    assert tokenizer.special_tokens == {EOT: len(tokenizer.vocab), "<|pad|>": len(tokenizer.vocab) + 1}
    assert not any(b"<|" in token or b"|>" in token for token in tokenizer.vocab.values())
    ids = tokenizer.encode(f"hello{EOT}world")
    assert ids.count(tokenizer.special_tokens[EOT]) == 1
    assert tokenizer.decode(ids) == f"hello{EOT}world"
    assert len(tokenizer) == len(tokenizer.vocab) + 2


def test_lone_surrogate_is_a_clear_error(bpe):
    with pytest.raises(ValueError, match=r"lone surrogate U\+D800 at index 2"):
        bpe.encode("ab\ud800cd")
    with pytest.raises(ValueError, match="lone surrogate"):
        BPETokenizer().train("x\udfff", 300)


def test_decode_of_a_cut_character_gives_replacement_and_unknown_id_raises():
    tokenizer = BPETokenizer()  # untrained: one id per byte
    ids = tokenizer.encode("é😀")
    assert ids == [0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80]
    assert tokenizer.decode(ids[:1]) == "\ufffd"
    assert tokenizer.decode(ids[:4]).startswith("é")  # a truncated emoji decodes to U+FFFD, never raises
    with pytest.raises(ValueError, match="unknown token id 99999"):
        tokenizer.decode([65, 99999])


def test_save_and_load_give_identical_encodings(bpe, tmp_path):
    path = tmp_path / "bpe.json"
    bpe.save(path)
    loaded = BPETokenizer.load(path)
    for text in TRICKY + list(SAMPLE_TEXTS.values()):
        assert loaded.encode(text) == bpe.encode(text)
    assert loaded.merges == bpe.merges and loaded.special_tokens == bpe.special_tokens
    assert '"merged_tokens"' in path.read_text(encoding="utf-8")  # readable for people


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="vocab_size must be at least 256 \\+ 1"):
        BPETokenizer().train("abc", 256, special_tokens=[EOT])
    with pytest.raises(ValueError, match="distinct"):
        BPETokenizer().train("abc", 300, special_tokens=[EOT, EOT])
    with pytest.raises(ValueError, match="normalization must be None or 'nfkc'"):
        BPETokenizer().train("abc", 300, normalization="nfc")
    path = tmp_path / "other.json"
    path.write_text('{"type": "UnigramTokenizer"}')
    with pytest.raises(ValueError, match="not a BPETokenizer"):
        BPETokenizer.load(path)


def test_a_pattern_that_skips_characters_still_round_trips():
    tokenizer = BPETokenizer()
    tokenizer.train("words, words; more words!", 270, pattern=r"\w+")
    text = "words, and ☃ more words!"
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_nfkc_normalization_breaks_exact_reversibility():
    tokenizer = BPETokenizer()
    tokenizer.train("fine flour " * 20, 270, normalization="nfkc")
    assert tokenizer.decode(tokenizer.encode("ﬁne Ｆｕｌｌ")) == "fine Full"
    assert [(i, ch) for i, ch, _ in nfkc_changes("aﬁ²")] == [(1, "ﬁ"), (2, "²")]


def test_verbose_shows_each_merge(capsys):
    BPETokenizer().train("the cat the hat", 260, verbose=True)
    printed = capsys.readouterr()
    assert "merge    1:" in printed.out + printed.err


def test_bytes_per_token_within_one_percent_of_hf():
    require("HF tokenizers", hf_bpe(300)[0] is not None, "pip install tokenizers")
    text = english_corpus(150_000)
    ours = BPETokenizer()
    ours.train(text, 512)
    hf, trainer = hf_bpe(512)
    hf.train_from_iterator([text], trainer)
    assert hf.get_vocab_size() == len(ours) == 512
    ours_bpt = len(text.encode()) / len(ours.encode(text))
    hf_bpt = len(text.encode()) / len(hf.encode(text).ids)
    assert ours_bpt == pytest.approx(hf_bpt, rel=0.01)

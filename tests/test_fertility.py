"""Fertility counts and the sample texts it is measured on."""

import unicodedata

import pytest

from lib.bench.tokenizer import english_corpus
from lib.corpus import SAMPLE_TEXTS
from lib.fertility import NFKC_SAMPLE, fertility, fertility_table, nfkc_report
from lib.tokenizer import BPETokenizer
from lib.tokenizer.unigram import UnigramTokenizer

SCRIPTS = {
    "Russian": ("CYRILLIC",),
    "Greek": ("GREEK",),
    "Arabic": ("ARABIC",),
    "Hindi": ("DEVANAGARI",),
    "Chinese": ("CJK UNIFIED IDEOGRAPH",),
    "Japanese": ("HIRAGANA", "KATAKANA", "CJK UNIFIED IDEOGRAPH"),  # written with all three
}


@pytest.mark.parametrize("name, scripts", SCRIPTS.items())
def test_samples_are_in_their_script(name, scripts):
    letters = [c for c in SAMPLE_TEXTS[name] if c.isalpha()]
    for script in scripts:
        assert any(script in unicodedata.name(c, "") for c in letters), (name, script)
    share = sum(any(s in unicodedata.name(c, "") for s in scripts) for c in letters) / len(letters)
    assert share > 0.9, (name, share)


def test_untrained_byte_tokenizer_costs_one_token_per_byte():
    for text in SAMPLE_TEXTS.values():
        f = fertility(BPETokenizer(), text)
        assert f.tokens == f.utf8_bytes == len(text.encode("utf-8")) and f.tokens_per_byte == 1.0


def test_an_english_vocabulary_serves_other_scripts_unevenly():
    tokenizer = BPETokenizer()
    tokenizer.train(english_corpus(50_000), 512)
    english = fertility(tokenizer, SAMPLE_TEXTS["English"]).tokens_per_char
    for name in ("Hindi", "Russian", "Chinese"):
        assert fertility(tokenizer, SAMPLE_TEXTS[name]).tokens_per_char > 2 * english, name
    table = fertility_table(tokenizer)
    assert all(name in table for name in SAMPLE_TEXTS)


@pytest.mark.parametrize("tokenizer_class", [BPETokenizer, UnigramTokenizer])
def test_every_sample_round_trips(tokenizer_class):
    tokenizer = tokenizer_class()
    tokenizer.train("\n".join(SAMPLE_TEXTS.values()), 400)
    for text in SAMPLE_TEXTS.values():
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_nfkc_report_names_what_normalization_changes():
    report = nfkc_report(NFKC_SAMPLE)
    assert "'ﬁ'    -> 'fi'" in report and "'™'    -> 'TM'" in report and "'²'    -> '2'" in report
    assert fertility(BPETokenizer(), "").tokens_per_char == 0.0


def test_words_are_counted_only_where_spaces_mark_them():
    from lib.fertility import SLICE_TEXTS, fertility_rows, format_rows

    rows = fertility_rows({"bytes": BPETokenizer()}, SLICE_TEXTS)
    by_text = {row["text"]: row for row in rows}
    assert by_text["Chinese (Han)"]["per_word"] is None
    english = SLICE_TEXTS["English (Latin)"]
    assert by_text["English (Latin)"]["per_word"] == pytest.approx(len(english.encode()) / len(english.split()))
    assert by_text["Hindi (Devanagari)"]["per_byte"] == 1.0  # untrained: one token per byte
    table = format_rows(rows, "per_word")
    assert "—" in table and all(name in table for name in SLICE_TEXTS)
    counts = format_rows(rows, "tokens").splitlines()  # counts print as integers
    english_line = next(line for line in counts if line.startswith("English"))
    assert english_line.split()[-1] == str(len(english.encode()))


def test_slices_cover_scripts_code_mixing_and_transliteration():
    from lib.fertility import SLICE_TEXTS

    names = " ".join(SLICE_TEXTS)
    assert "code-mixed" in names and "transliterated" in names and "code" in names
    latin = [t for n, t in SLICE_TEXTS.items() if "transliterated" in n or "Arabizi" in n]
    assert all(all(ord(c) < 0x250 for c in text) for text in latin)  # written in Latin letters

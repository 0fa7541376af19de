"""The benchmarks run end to end at toy sizes (no timing is asserted)."""

from lib.bench.__main__ import main
from lib.bench.tokenizer import english_corpus


def test_english_corpus_size():
    text = english_corpus(700_000)  # more than the help texts hold: they repeat
    assert 699_990 <= len(text.encode("utf-8")) <= 700_000
    assert "assignment" in text


def test_tokenizer_benchmark_prints_its_table_and_ratios(capsys):
    main(["tokenizer", "--mb", "0.02", "--naive-kb", "5", "--vocab", "300"])
    printed = capsys.readouterr().out
    assert "ours, fast" in printed and "ours, naive" in printed
    assert "naive / fast training time" in printed and "merges identical" in printed

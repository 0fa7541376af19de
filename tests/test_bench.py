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


def test_attention_benchmark_writes_its_csv(tmp_path, capsys):
    import csv

    out = tmp_path / "attention.csv"
    main(["attention", "--sizes", "64", "128", "--repeats", "1", "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert {row["impl"] for row in rows} == {"naive", "tiled", "sdpa"}
    assert {"device_name", "torch", "date", "median_ms", "peak_extra_mib"} <= set(rows[0])
    assert all(float(row["peak_extra_mib"]) >= 0 for row in rows)
    printed = capsys.readouterr().out
    assert "tiled / sdpa time" in printed and "tiled / naive peak memory" in printed


def test_attention_sweep_runs(capsys):
    main(["attention", "--sweep", "--sizes", "128", "--repeats", "1", "--blocks", "32x64"])
    assert "block_q=  32 block_k=  64" in capsys.readouterr().out

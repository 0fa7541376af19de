"""The benchmarks run end to end at toy sizes (no timing is asserted)."""

import pytest

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


def test_attention_benchmark_writes_its_csv(tmp_path, capsys, monkeypatch):
    import csv

    import lib.bench.attention as attention_bench

    # A real run probes each case's memory in a fresh process (python -m lib.bench.attention --probe,
    # tested below); here the probes run in this one, which saves ten starts of torch (in a warm
    # process the naive kernel reuses freed memory, so its peak reads low: the ratios are tested apart).
    monkeypatch.setattr(attention_bench, "peak_extra_bytes_cpu", attention_bench._probe_cpu_memory)
    out = tmp_path / "attention.csv"
    main(["attention", "--sizes", "64", "128", "--repeats", "1", "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert {row["impl"] for row in rows} == {"naive", "tiled", "sdpa"}
    assert {"device_name", "torch", "date", "median_ms", "peak_extra_mib"} <= set(rows[0])
    from lib.bench.attention import device_name

    assert {row["device_name"] for row in rows} == {device_name("cpu")}  # the machine, not an implementation
    assert all(float(row["peak_extra_mib"]) >= 0 for row in rows)
    printed = capsys.readouterr().out
    assert "tiled / sdpa time" in printed and "causal / full tiled time" in printed


def test_memory_ratios_are_each_peak_over_the_naive_one():
    from lib.bench.attention import ratios

    rows = [
        {"impl": impl, "n": 256, "causal": False, "head_dim": 64, "median_ms": ms, "peak_extra_mib": mib}
        for impl, ms, mib in (("naive", 4.0, 10.0), ("tiled", 2.0, 2.5), ("sdpa", 1.0, 1.0))
    ]
    times = {("tiled", False): [2.0, 2.2], ("sdpa", False): [1.0, 1.0]}
    (line,) = ratios(rows, {(64, 256): times})
    assert "tiled / sdpa time = 2.10" in line
    assert "tiled / naive peak memory = 0.2500" in line and "sdpa / naive peak memory = 0.1000" in line
    rows[0]["peak_extra_mib"] = None  # not measured (no /proc): no memory ratio
    assert "peak memory" not in ratios(rows, {(64, 256): times})[0]


def test_a_memory_probe_runs_in_a_fresh_process_and_sees_the_naive_score_matrix():
    """The naive kernel holds B·H·N·N float32 scores (and their softmax) at its peak: the probe,
    run as the benchmark runs it, sees at least that much."""
    from lib.bench.attention import N_HEADS, peak_extra_bytes_cpu

    n = 1024
    scores = N_HEADS * n * n * 4
    assert peak_extra_bytes_cpu("naive", n, 64, False) >= scores
    assert peak_extra_bytes_cpu("tiled", n, 64, False) < scores  # a tile at a time, never the whole matrix


def test_attention_sweep_runs(capsys):
    main(["attention", "--sweep", "--sizes", "128", "--repeats", "1", "--blocks", "32x64"])
    assert "block_q=  32 block_k=  64" in capsys.readouterr().out


def test_attention_window_mode_writes_its_csv_and_doubling_ratios(tmp_path, capsys):
    import csv

    out = tmp_path / "window.csv"
    main(["attention", "--window", "16", "--sizes", "64", "128", "--repeats", "1", "--out", str(out)])
    rows = list(csv.DictReader(out.open()))
    assert {row["impl"] for row in rows} == {"tiled", "tiled-causal", "tiled-window", "linear-causal"}
    assert {row["n"] for row in rows} == {"64", "128"}
    assert {row["window"] for row in rows if row["impl"] == "tiled-window"} == {"16"}
    assert all(float(row["ratio_to_half_n"]) > 0 for row in rows if row["n"] == "128")
    assert all(row["ratio_to_half_n"] == "" for row in rows if row["n"] == "64")
    printed = capsys.readouterr().out
    assert "N=128 / N=64:" in printed and "windowed tiled (w=16)" in printed and "dense tiled" in printed


def test_layer_latency_times_every_size_in_every_round():
    from lib.bench.attention import layer_latency, paired_ratio

    times = layer_latency([16, 32], d_model=16, heads=2, repeats=2)
    assert set(times) == {16, 32} and all(len(values) == 2 and min(values) > 0 for values in times.values())
    assert paired_ratio(times, 32, 16) > 0


def test_load_results_reads_the_recorded_cpu_run():
    from lib.bench.attention import load_results, series

    rows = load_results("attention_cpu.csv")
    assert {"naive", "tiled", "sdpa"} <= {row["impl"] for row in rows}
    sizes, times = series(rows, "tiled", False)
    assert sizes == sorted(sizes) and len(sizes) == len(times) and all(isinstance(t, float) for t in times)
    assert load_results("no_such_run.csv") == []


def test_novel_lines_drop_lines_with_seen_phrases_or_too_short_to_tell():
    from lib.bench.tokenizer import WHITESPACE_SPLIT, novel_lines

    train = "the cat sat on the mat. 分词器把文本变成数字"
    lines = ["a cat ran up a hill", "then the cat sat down", "把文本变成数字了", "全新的句子在这里"]
    assert novel_lines(lines, train) == ["a cat ran up a hill", "全新的句子在这里"]
    too_short = ["the cat", "the", "新句子", "the cat sat"]  # the first three cannot show they are new
    assert novel_lines(too_short + ["a dog"], train) == []
    import regex

    assert regex.findall(WHITESPACE_SPLIT, "a  b c") == ["a", " ", " b", " c"]


def test_a_run_leaves_the_books_results_alone_unless_it_records(tmp_path, monkeypatch, capsys):
    """README's benchmark command must not rewrite chapter 5's CSV (the next make test would fail
    on its checked cells): by default the CSV goes outside the repository; --record writes the book's."""
    import lib.bench.attention as attention_bench

    books = {path: path.read_bytes() for path in attention_bench.RESULTS.glob("*.csv")}
    monkeypatch.setattr(attention_bench, "SCRATCH", tmp_path / "scratch")
    main(["attention", "--sizes", "64", "--repeats", "1", "--no-memory"])
    assert (tmp_path / "scratch" / "attention_cpu.csv").exists()
    assert "written with --record" in capsys.readouterr().out
    assert {path: path.read_bytes() for path in attention_bench.RESULTS.glob("*.csv")} == books
    monkeypatch.setattr(attention_bench, "RESULTS", tmp_path / "book")
    main(["attention", "--window", "16", "--sizes", "32", "64", "--repeats", "1", "--record"])
    assert (tmp_path / "book" / "attention_window_cpu.csv").exists()
    with pytest.raises(SystemExit):
        main(["attention", "--record", "--out", str(tmp_path / "x.csv")])

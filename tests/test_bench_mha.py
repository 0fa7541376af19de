"""The mha benchmark runs end to end at a toy size (no timing is asserted)."""

import argparse

import lib.bench.mha as mha
from lib.bench.__main__ import commands, main


def test_mha_is_a_bench_command():
    assert "mha" in commands()


def test_mha_benchmark_prints_agreement_and_ratios(capsys):
    main(["mha", "--batch", "2", "--tokens", "16", "--d-model", "32", "--heads", "4", "--repeats", "2", "--causal"])
    printed = capsys.readouterr().out
    assert "B=2 N=16 d=32 h=4" in printed
    assert "ours fused / torch time:" in printed and "ours plain / torch time:" in printed
    assert "causal, ours fused / torch time:" in printed
    # each of ours agrees with torch's module before anything is timed; torch is not compared with itself
    compared = [line.strip() for line in printed.splitlines() if line.strip().startswith("max |")]
    assert [line.split(" - ")[0] for line in compared] == [
        "max |ours, fused (SDPA)",
        "max |ours, plain (attention)",
        "max |ours, fused, causal",
    ]
    assert "max |ours, fused, causal - torch, causal|" in printed
    for line in compared:
        assert float(line.rsplit("=", 1)[1]) < 1e-5, line


def test_mha_benchmark_returns_the_fused_ratio_not_the_plain_one(monkeypatch):
    ratios = {"ours, fused (SDPA)": 0.5, "ours, plain (attention)": 3.0, "ours, fused, causal": 0.7}
    monkeypatch.setattr(mha, "paired_ratio", lambda times, ours, torch_name: ratios[ours])
    parser = argparse.ArgumentParser()
    mha.add_arguments(parser)
    args = parser.parse_args(["--batch", "1", "--tokens", "8", "--d-model", "16", "--heads", "2", "--repeats", "1"])
    assert mha.main(args)["fused_ratio"] == 0.5

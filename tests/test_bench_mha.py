"""The mha benchmark runs end to end at a toy size (no timing is asserted)."""

from lib.bench.__main__ import commands, main


def test_mha_is_a_bench_command():
    assert "mha" in commands()


def test_mha_benchmark_prints_agreement_and_ratios(capsys):
    main(["mha", "--batch", "2", "--tokens", "16", "--d-model", "32", "--heads", "4", "--repeats", "2", "--causal"])
    printed = capsys.readouterr().out
    assert "B=2 N=16 d=32 h=4" in printed
    assert "ours fused / torch time:" in printed and "ours plain / torch time:" in printed
    assert "causal, ours fused / torch time:" in printed
    # the copies agree with torch's module before anything is timed
    for line in printed.splitlines():
        if line.strip().startswith("max |"):
            assert float(line.rsplit("=", 1)[1]) < 1e-5, line

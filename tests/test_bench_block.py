"""The block benchmark runs end to end at toy sizes (no timing is asserted)."""

import torch

from lib.bench.__main__ import commands, main
from lib.bench.block import forward_backward_cases, norm_cases


def test_block_is_a_bench_command():
    assert "block" in commands()


def test_block_benchmark_prints_the_side_by_side_ratio(capsys):
    main(["block", "--batch", "2", "--tokens", "8", "--d-model", "16", "--heads", "2", "--repeats", "2", "--norms"])
    printed = capsys.readouterr().out
    assert "ours / torch time = " in printed
    assert "forward+backward" in printed and "RMSNorm (F.rms_norm)" in printed and "LayerNorm (plain)" in printed


def test_both_cases_run_forward_and_backward_on_the_same_function():
    for causal in (False, True):
        cases = forward_backward_cases(2, 5, 8, 2, causal)  # raises if the two layers disagree
        assert set(cases) == {"ours", "torch"}
        for run in cases.values():
            run()


def test_norm_cases_agree_in_pairs():
    outputs = {name: fn() for name, fn in norm_cases(6, 10).items()}
    torch.testing.assert_close(outputs["LayerNorm (plain)"], outputs["LayerNorm (F.layer_norm)"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(outputs["RMSNorm (plain)"], outputs["RMSNorm (F.rms_norm)"], atol=1e-5, rtol=1e-5)

"""lib.bench.step: a causal nanoGPT-style reference of the capstone's sizes; the benchmark prints its ratio."""

import argparse

import torch

from lib.bench.step import NanoGPTStyle, add_arguments, main, make_models
from lib.capstone import CAPSTONE_MODEL


def test_reference_has_the_capstones_sizes_and_is_causal():
    capstone, reference = make_models()
    assert len(reference.layers) == CAPSTONE_MODEL["n_layers"] and reference.n_kv_heads == CAPSTONE_MODEL["n_kv_heads"]
    qkv = reference.layers[0]["c_attn"].weight.shape[0]
    head_dim = CAPSTONE_MODEL["d_model"] // CAPSTONE_MODEL["n_heads"]
    assert qkv == CAPSTONE_MODEL["d_model"] + 2 * CAPSTONE_MODEL["n_kv_heads"] * head_dim  # grouped-query k and v
    assert isinstance(reference, NanoGPTStyle) and capstone.config.n_kv_heads == reference.n_kv_heads
    idx = torch.randint(0, 512, (2, 10), generator=torch.Generator().manual_seed(0))
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 512
    with torch.no_grad():
        torch.testing.assert_close(reference(idx)[:, :6], reference(changed)[:, :6])
        assert not torch.allclose(reference(idx)[:, 6:], reference(changed)[:, 6:])


def test_benchmark_prints_the_step_ratio_and_the_gap(capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    main(parser.parse_args(["--batch", "2", "--context", "16", "--repeats", "2", "--profile", "--top", "3"]))
    out = capsys.readouterr().out
    assert "capstone / reference step time = " in out
    assert "profiled self CPU time per step" in out and "capstone ms  reference ms  difference" in out

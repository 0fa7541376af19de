"""Decode-step bytes and FLOPs against a real model's decode step and hand arithmetic."""

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from lib.decode_costs import decode_step, prefill_flops, quantized_weight_bytes
from lib.gpt import GPT, GPTConfig
from lib.kv_cache import kv_cache_bytes


def test_flops_match_torch_flop_counter_on_a_decode_step():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=50, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, max_len=32)
    model = GPT(config).eval()
    for block in model.blocks:
        block.attn.fused = False  # plain matmuls, which the counter sees
    caches = model.new_caches(1)
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 9)), caches=caches)  # prefill 9 tokens
        with FlopCounterMode(display=False) as counter:
            model(torch.randint(0, 50, (1, 1)), caches=caches)  # the 10th token reads 10 keys
    matmul_params = sum({id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear)}.values())
    step = decode_step(params=matmul_params, layers=2, n_heads=4, kv_heads=2, head_dim=8, context=10)
    assert counter.get_total_flops() == step.flops


def test_the_lessons_floor_and_batching():
    one = decode_step(params=70 * 10**9, layers=80, n_heads=64, kv_heads=8, head_dim=128, context=4096)
    assert one.weight_bytes == 140 * 10**9
    assert one.kv_bytes == kv_cache_bytes(layers=80, batch=1, seq_len=4096, kv_heads=8, head_dim=128)
    assert one.floor_ms(4.8e12) == pytest.approx(1e3 * (140e9 + one.kv_bytes) / 4.8e12)
    assert one.floor_ms(4.8e12) > 29  # 140 GB alone take 29.2 ms at 4.8 TB/s
    many = decode_step(params=70 * 10**9, layers=80, n_heads=64, kv_heads=8, head_dim=128, context=4096, batch=32)
    assert many.weight_bytes == one.weight_bytes and many.kv_bytes == 32 * one.kv_bytes
    assert many.flops == 32 * one.flops and many.flop_per_byte > 10 * one.flop_per_byte


def test_fewer_kv_heads_read_fewer_bytes_per_step():
    mha = decode_step(params=10**9, layers=32, n_heads=32, kv_heads=32, head_dim=128, context=4096, batch=8)
    gqa = decode_step(params=10**9, layers=32, n_heads=32, kv_heads=8, head_dim=128, context=4096, batch=8)
    assert mha.kv_bytes == 4 * gqa.kv_bytes and mha.flops == gqa.flops


def test_quantized_weight_bytes_counts_the_scales():
    assert quantized_weight_bytes(1024, bits=4, group_size=128) == 512 + 8 * 2
    assert quantized_weight_bytes(1000, bits=4, group_size=128) == 500 + 8 * 2  # a partial last group
    assert quantized_weight_bytes(256, bits=4, group_size=32, zero_point_bytes=2) == 128 + 8 * 4
    assert quantized_weight_bytes(70 * 10**9) * 8 / (70 * 10**9) == pytest.approx(4.125)


@pytest.mark.parametrize("bad", [dict(context=0), dict(kv_heads=3), dict(batch=True)])
def test_decode_step_rejects_bad_sizes(bad):
    settings = dict(params=10, layers=1, n_heads=4, kv_heads=2, head_dim=8, context=4) | bad
    with pytest.raises(ValueError, match="decode_step"):
        decode_step(**settings)


def test_quantized_weight_bytes_rejects_bad_groups():
    with pytest.raises(ValueError, match="group_size"):
        quantized_weight_bytes(100, group_size=0)


def test_decode_step_takes_numpy_sizes_and_refuses_a_float_by_name():
    sizes = dict(params=1000, layers=2, n_heads=4, kv_heads=2, head_dim=8, context=16, batch=1)
    assert decode_step(**{**sizes, "context": np.int32(16), "layers": np.int64(2)}) == decode_step(**sizes)
    with pytest.raises(ValueError, match=r"decode_step: batch must be a positive integer, got 1\.0"):
        decode_step(**{**sizes, "batch": 1.0})


def test_prefill_flops_match_the_counter_less_the_masked_future():
    """A dense kernel also scores the future keys a causal kernel skips: tokens·(tokens - 1)/2 pairs per head."""
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=50, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, max_len=32)
    model = GPT(config).eval()
    for block in model.blocks:
        block.attn.fused = False  # plain matmuls, which the counter sees
    caches = model.new_caches(1)
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 9)), caches=caches)  # a cached prefix of 9 tokens
        with FlopCounterMode(display=False) as counter:
            model(torch.randint(0, 50, (1, 5)), caches=caches)  # 5 new tokens read 10..14 keys
    matmul_params = sum({id(m.weight): m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear)}.values())
    flops = prefill_flops(params=matmul_params, layers=2, n_heads=4, head_dim=8, tokens=5, cached=9)
    masked_future = 2 * 4 * 8 * 4 * (5 * 4 // 2)  # 4·D FLOPs for each future pair, in every head and layer
    assert counter.get_total_flops() == flops + masked_future


def test_a_cached_prefix_saves_exactly_its_own_prefill():
    shape = {"params": 1000, "layers": 3, "n_heads": 4, "head_dim": 8}
    cold = prefill_flops(tokens=400 + 37, **shape)
    assert cold == prefill_flops(tokens=400, **shape) + prefill_flops(tokens=37, cached=400, **shape)
    assert prefill_flops(tokens=37, cached=400, **shape) < cold
    # one new token after C - 1 cached ones is a decode step reading C tokens
    step = decode_step(params=1000, layers=3, n_heads=4, kv_heads=2, head_dim=8, context=50)
    assert prefill_flops(tokens=1, cached=49, **shape) == step.flops


@pytest.mark.parametrize(("name", "value"), [("tokens", 0), ("cached", -1), ("params", 1.5), ("cached", True)])
def test_prefill_flops_rejects_bad_sizes(name, value):
    sizes = {"params": 1000, "layers": 3, "n_heads": 4, "head_dim": 8, "tokens": 5, "cached": 0, name: value}
    with pytest.raises(ValueError, match=f"prefill_flops: {name}"):
        prefill_flops(**sizes)

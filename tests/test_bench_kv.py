"""The KV-cache benchmark runs end to end at toy size (no timing is asserted)."""

import pytest

from lib.bench.__main__ import main
from lib.bench.kv import DecodeTiming, build_model, decode_step_bytes, decode_timings, effective_gb_per_s, format_rows


def test_kv_benchmark_prints_both_columns_and_the_ratio(capsys):
    main(["kv", "--contexts", "8", "16", "--layers", "1", "--d-model", "16", "--heads", "2", "--kv-heads", "1",
          "--vocab", "20", "--repeats", "2", "--threads", "1"])  # fmt: skip
    printed = capsys.readouterr().out
    assert "cached ms/token" in printed and "recompute ms/token" in printed
    assert "At context 16: a decode step with the KV cache is" in printed


def test_decode_timings_rows_and_limits():
    model = build_model(layers=1, d_model=16, heads=2, kv_heads=1, vocab=20, max_len=30)
    rows = decode_timings(model, [4, 8], repeats=2)
    assert [r.context for r in rows] == [4, 8]
    assert all(r.cached_ms > 0 and r.recompute_ms > 0 and r.speedup > 0 for r in rows)
    assert len(format_rows(rows)) == 3
    with pytest.raises(ValueError, match="max_len=30"):
        decode_timings(model, [20], repeats=2)  # 20 + 2 rounds x 8 steps > 30


def test_kv_benchmark_prints_effective_bandwidth(capsys):
    main(["kv", "--contexts", "8", "--layers", "1", "--d-model", "16", "--heads", "2", "--kv-heads", "1",
          "--vocab", "20", "--repeats", "2", "--threads", "1"])  # fmt: skip
    printed = capsys.readouterr().out
    assert "GB/s" in printed and "torch thread" in printed


def test_decode_step_bytes_by_hand():
    model = build_model(layers=2, d_model=16, heads=2, kv_heads=1, vocab=20, max_len=30)
    # embedding (tied head) 20·16; per layer q, o 16·16, k, v 16·8, SwiGLU 3·16·48, two norms 16; final norm 16
    params = 20 * 16 + 2 * (2 * 16 * 16 + 2 * 16 * 8 + 3 * 16 * 48 + 2 * 16) + 16
    assert sum(p.numel() for p in model.parameters()) == params
    cache = 2 * 2 * 10 * 1 * 8 * 4  # K and V, 2 layers, 10 tokens, 1 KV head of width 8, fp32
    assert decode_step_bytes(model, 10) == 4 * params + cache
    row = DecodeTiming(context=10, cached_ms=2.0, recompute_ms=4.0, speedup=2.0)
    assert effective_gb_per_s(model, row) == (4 * params + cache) / 2e-3 / 1e9
    assert format_rows([row], model)[0].endswith("GB/s") and len(format_rows([row])[0]) < len(
        format_rows([row], model)[0]
    )

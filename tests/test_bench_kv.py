"""The KV-cache benchmark runs end to end at toy size (no timing is asserted)."""

import pytest

from lib.bench.__main__ import main
from lib.bench.kv import build_model, decode_timings, format_rows


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

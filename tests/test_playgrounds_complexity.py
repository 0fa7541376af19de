"""The complexity playground's pure function: counts from lib.costs, times from the recorded CSVs."""

import csv

import matplotlib
import pytest

from lib.costs import global_local_pairs, pattern_mask, window_pairs
from lib.playgrounds.complexity import (
    SIZES,
    complexity_curves,
    complexity_playground,
    describe,
    measured_times,
    plot_complexity,
)

matplotlib.use("Agg")

FIELDS = ["impl", "n", "head_dim", "causal", "window", "median_ms"]


def write_results(tmp_path, dense_rows, window_rows):
    for name, rows in (("attention_cpu.csv", dense_rows), ("attention_window_cpu.csv", window_rows)):
        with (tmp_path / name).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            for impl, n, causal, window, ms in rows:
                writer.writerow({
                    "impl": impl, "n": n, "head_dim": 64, "causal": causal, "window": window, "median_ms": ms,
                })  # fmt: skip
    return tmp_path


@pytest.fixture
def results(tmp_path):
    dense = [("tiled", 1024, False, "", 10.0), ("tiled", 2048, False, "", 40.0), ("tiled", 1024, True, "", 6.0)]
    dense += [("sdpa", 1024, False, "", 8.0), ("naive", 1024, False, "", 50.0)]
    window = [("tiled-window", 1024, True, 256, 3.0), ("tiled-window", 2048, True, 256, 6.0)]
    window += [("linear-causal", 1024, True, "", 2.0), ("tiled", 1024, False, "", 11.0)]
    return write_results(tmp_path, dense, window)


def test_windowed_counts_are_the_brute_force_mask_counts(results):
    curves = complexity_curves("window", 1024, window=100, results=results)
    assert curves.sizes == SIZES
    assert curves.pairs_at_n == window_pairs(1024, 100)
    assert curves.pairs[0] == pattern_mask("window", 256, window=100).sum()
    assert curves.flops_at_n == 8 * 4 * 64 * window_pairs(1024, 100)  # 8 heads, 2·d for q·k and 2·d for AV
    assert curves.doubling == pytest.approx(2.0, rel=0.05)
    assert curves.dense_pairs[1] == 512**2


def test_global_tokens_and_dense_and_linear(results):
    sparse = complexity_curves("global+local", 512, window=8, n_global=4, results=results)
    assert sparse.pairs_at_n == global_local_pairs(512, 8, 4)
    assert "nothing measured" in sparse.note
    dense = complexity_curves("dense", 4096, results=results)
    assert dense.doubling == 4.0 and dense.pairs_at_n == 4096**2
    linear = complexity_curves("linear", 4096, results=results)
    assert linear.pairs is None and linear.pairs_at_n is None and linear.doubling == pytest.approx(2.0)
    assert "no query-key pairs" in describe(linear)


def test_measured_times_pick_the_matching_rows(results):
    series, note = measured_times("dense", 256, results)
    assert series == {"tiled (dense)": ((1024, 10.0), (2048, 40.0)), "torch SDPA (dense)": ((1024, 8.0),)}
    assert note == ""
    series, _ = measured_times("window", 256, results)
    assert series["windowed tiled (w=256)"] == ((1024, 3.0), (2048, 6.0))
    assert series["tiled (dense, for reference)"] == ((1024, 11.0),)  # from the windowed run itself
    series, note = measured_times("window", 64, results)  # recorded at another window only
    assert "windowed tiled (w=64)" not in series and "no windowed run recorded at w=64" in note
    series, _ = measured_times("linear", 256, results)
    assert series["linear, causal (chunked)"] == ((1024, 2.0),)


def test_without_results_nothing_is_invented(tmp_path):
    curves = complexity_curves("causal", 2048, results=tmp_path)
    assert curves.measured == {} and "no CPU results" in curves.note
    assert curves.pairs_at_n == 2048 * 2049 // 2


def test_bad_settings_are_reported():
    with pytest.raises(ValueError, match="pattern must be one of"):
        complexity_curves("strided")
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        complexity_curves("window", window=0)
    with pytest.raises(ValueError, match="n_global must be an integer >= 0"):
        complexity_curves("global+local", n_global=-1)


def test_the_recorded_results_feed_the_default_state():
    curves = complexity_curves()  # chapters/results, as the book shows it
    assert "counts are a model of arithmetic, not measured latency" in describe(curves)
    assert any(points for points in curves.measured.values())


def test_figure_and_widget_build(results):
    import matplotlib.pyplot as plt

    for pattern in ("dense", "window", "global+local", "linear"):
        fig = plot_complexity(complexity_curves(pattern, 2048, results=results))
        assert len(fig.axes) == 3 and fig.axes[0].get_xscale() == "log"
        plt.close(fig)
    assert complexity_playground() is not None


def test_flops_panel_names_the_heads_and_width_it_models(results):
    import matplotlib.pyplot as plt

    curves = complexity_curves("dense", 1024, heads=2, head_dim=32, results=results)
    assert curves.flops_at_n == 2 * 4 * 32 * 1024**2  # 2 heads, 2·d for q·k and 2·d for AV
    fig = plot_complexity(curves)
    assert fig.axes[1].get_title() == "modeled attention FLOPs (2 heads, d=32)"
    plt.close(fig)

"""The √d_k experiments measure what the lesson claims, against closed forms."""

import math

import pytest

from lib.scaling import dot_product_variance, mean_top_weight, softmax_saturation


def test_variance_grows_with_d_k_and_scaling_restores_one():
    for row in dot_product_variance(d_ks=(2, 16, 128, 512), n_pairs=20_000):
        # sampling error of a variance from 20k normal-ish samples is a few percent
        assert row.raw_variance == pytest.approx(row.d_k, rel=0.06)
        assert row.scaled_variance == pytest.approx(1.0, rel=0.06)


def test_saturation_matches_closed_form():
    n_keys = 8
    for row in softmax_saturation(gaps=(0, 3, 10), n_keys=n_keys):
        top = math.exp(row.gap) / (math.exp(row.gap) + n_keys - 1)
        assert row.top_weight == pytest.approx(top)
        assert row.other_weight == pytest.approx((1 - top) / (n_keys - 1))
    rows = softmax_saturation(gaps=(2, 8, 16))
    assert rows[0].max_gradient > rows[1].max_gradient > rows[2].max_gradient
    assert rows[-1].max_gradient < 1e-5  # a saturated softmax passes almost no gradient


def test_unscaled_scores_saturate_at_large_width():
    assert mean_top_weight(512, scaled=False, n_queries=500) > 0.9
    scaled = [mean_top_weight(d, scaled=True, n_queries=500) for d in (2, 64, 512)]
    assert max(scaled) - min(scaled) < 0.1  # scaling makes the spread independent of d_k


def test_score_spread_against_a_brute_force_loop():
    """The same random draws, scored one query and one key at a time with plain Python."""
    import statistics

    import torch

    from lib.scaling import score_spread

    d_k, n_keys, n_queries = 16, 5, 301  # odd, so that the median is one of the gaps
    row = score_spread(d_k, n_keys, n_queries, scaled=False, seed=3)
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(n_queries, 1, d_k, generator=gen, dtype=torch.float64).tolist()
    k = torch.randn(n_queries, n_keys, d_k, generator=gen, dtype=torch.float64).tolist()
    gaps, tops, all_scores = [], [], []
    for b in range(n_queries):
        scores = [sum(a * c for a, c in zip(q[b][0], key, strict=True)) for key in k[b]]
        all_scores += scores
        ranked = sorted(scores, reverse=True)
        gaps.append(ranked[0] - ranked[1])
        exps = [math.exp(s - ranked[0]) for s in scores]
        tops.append(max(exps) / sum(exps))
    assert row.score_std == pytest.approx(statistics.stdev(all_scores), rel=1e-9)
    assert row.median_top_gap == pytest.approx(statistics.median(gaps), rel=1e-9)
    assert row.mean_top_weight == pytest.approx(statistics.fmean(tops), rel=1e-9)


def test_score_spread_grows_like_sqrt_d_k_unless_scaled():
    from lib.scaling import score_spread

    for d_k in (64, 512):
        raw, scaled = score_spread(d_k, n_queries=1000), score_spread(d_k, n_queries=1000, scaled=True)
        assert raw.score_std == pytest.approx(math.sqrt(d_k), rel=0.05)
        assert scaled.score_std == pytest.approx(1.0, rel=0.05)
        assert raw.median_top_gap == pytest.approx(scaled.median_top_gap * math.sqrt(d_k), rel=1e-9)
    assert score_spread(512, n_queries=1000).median_top_gap > 8  # past gap 8 the top weight is > 0.99


def test_variance_figure_shows_its_prediction_lines_beneath_the_data():
    """The d_k reference line used to hide under the measured points: it is drawn as a wide
    band, first (beneath), and the measurements as markers on top."""
    import matplotlib

    matplotlib.use("Agg")
    from lib.scaling import plot_variance

    ax = plot_variance(dot_product_variance(d_ks=(2, 8, 32), n_pairs=500)).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    band, measured = lines["prediction: d_k"], lines["measured Var(q·k)"]
    assert list(band.get_ydata()) == [2, 8, 32]
    assert band.get_linewidth() >= 5 and band.get_zorder() < measured.get_zorder()
    assert measured.get_linestyle() == "None"  # markers only: nothing drawn over the band between them


def test_saturation_figure_labels_both_axes():
    import matplotlib

    matplotlib.use("Agg")
    from lib.scaling import plot_saturation

    ax = plot_saturation(softmax_saturation(gaps=(0, 2, 4))).axes[0]
    assert "gap" in ax.get_xlabel() and "weight" in ax.get_ylabel() and "derivative" in ax.get_ylabel()

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

"""The RoPE playground's pure function against hand-worked rotations, and its widgets' wiring."""

import math

import matplotlib
import pytest
import torch

from lib.playgrounds.rope import EXAMPLE_FREQUENCY, describe_rope_read, plot_rope_read, rope_playground, rope_read

matplotlib.use("Agg")


def rotate(vector, angle):
    x, y = vector
    return (x * math.cos(angle) - y * math.sin(angle), x * math.sin(angle) + y * math.cos(angle))


def test_default_is_the_worked_example():
    read = rope_read()
    assert (read.query_position, read.key_position, read.gap) == (1, 2, 1)
    assert read.frequency == pytest.approx(math.pi / 4)
    assert round(read.score, 4) == 0.7071 and round(read.score_from_gap, 4) == 0.7071
    assert read.rotated_query.tolist() == pytest.approx(rotate((1, 0), math.pi / 4))
    assert read.rotated_key.tolist() == pytest.approx([0.0, 1.0], abs=1e-12)  # a quarter turn at n=2
    assert "score (R_m q)·(R_n k) = 0.7071" in describe_rope_read(read)


def test_shifting_both_positions_keeps_the_score():
    assert round(rope_read(5, 6).score, 4) == 0.7071  # the worked example's second pair
    for shift in (0, 3, 17, 250):
        assert rope_read(1 + shift, 2 + shift).score == pytest.approx(math.cos(math.pi / 4), abs=1e-9)


@pytest.mark.parametrize("m, n", [(0, 0), (2, 5), (7, 3), (10, 30)])
@pytest.mark.parametrize("frequency", [0.0, 0.3, math.pi / 4, 2.5])
def test_matches_hand_rotation_for_any_vectors(m, n, frequency):
    q, k = (0.6, -1.2), (2.0, 0.5)
    read = rope_read(m, n, frequency=frequency, query=q, key=k)
    rq, rk = rotate(q, m * frequency), rotate(k, n * frequency)
    assert read.rotated_query.tolist() == pytest.approx(rq, abs=1e-12)
    assert read.rotated_key.tolist() == pytest.approx(rk, abs=1e-12)
    assert read.score == pytest.approx(rq[0] * rk[0] + rq[1] * rk[1], abs=1e-12)
    # the identity: the score depends only on the gap
    gap_k = rotate(k, (n - m) * frequency)
    assert read.score_from_gap == pytest.approx(q[0] * gap_k[0] + q[1] * gap_k[1], abs=1e-12)
    assert read.unrotated_score == pytest.approx(q[0] * k[0] + q[1] * k[1])


def test_changing_the_gap_follows_a_cosine_for_equal_vectors():
    for gap in range(-8, 9):
        assert rope_read(3, 3 + gap).score == pytest.approx(math.cos(gap * EXAMPLE_FREQUENCY), abs=1e-12)


def test_bad_settings_are_reported():
    with pytest.raises(ValueError, match="query must be a 2-D vector.*\\(3,\\)"):
        rope_read(query=(1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="frequency must be a finite"):
        rope_read(frequency=float("nan"))


def test_figure_builds():
    fig = plot_rope_read(rope_read(4, 9, frequency=0.4, query=(1.0, 1.0), key=(0.0, 2.0)))
    assert len(fig.axes) == 2
    assert fig.axes[1].get_xlabel().startswith("gap")


def test_widget_sliders_are_linked():
    widget = rope_playground()
    (m, n), (gap, frequency) = (box.children for box in widget.children[:2])
    assert (m.value, n.value, gap.value) == (1, 2, 1)
    assert frequency.value == pytest.approx(math.pi / 4)
    m.value = 5  # moving the query carries the key along: the gap stays
    assert (n.value, gap.value) == (6, 1)
    gap.value = 3  # changing the gap moves the key
    assert n.value == 8
    n.value = 4  # moving the key changes the gap
    assert gap.value == -1
    assert m.value == 5


def test_rotation_preserves_lengths():
    read = rope_read(13, 2, frequency=1.1, query=(3.0, 4.0), key=(-1.0, 2.0))
    assert read.rotated_query.norm().item() == pytest.approx(5.0)
    assert read.rotated_key.norm().item() == pytest.approx(torch.tensor([-1.0, 2.0]).norm().item())

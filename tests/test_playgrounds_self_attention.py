"""The playgrounds' pure functions: the numbers the widgets show."""

import math

import matplotlib
import pytest
import torch

from lib.playgrounds.self_attention import (
    EXAMPLE_QUERIES,
    describe,
    plot_self_attention,
    self_attention_playground,
    self_attention_read,
)

matplotlib.use("Agg")


def test_default_is_the_worked_example():
    read = self_attention_read()
    torch.testing.assert_close(read.dot_products, torch.tensor([1.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(read.scores, torch.tensor([1 / math.sqrt(2), 0.0], dtype=torch.float64))
    assert [round(w, 4) for w in read.weights.tolist()] == [0.6698, 0.3302]
    assert [round(o, 4) for o in read.output.tolist()] == [1.3395, 1.3210]
    assert "output       [1.3395, 1.3210]" in describe(read)


def test_causal_first_position_reads_only_itself():
    read = self_attention_read(causal=True)
    assert read.weights.tolist() == [1.0, 0.0] and read.output.tolist() == [2.0, 0.0]
    assert read.scores[1] == float("-inf") and "-inf" in describe(read)
    # the second token may read both, so the mask changes nothing for it
    second = self_attention_read(EXAMPLE_QUERIES[1], 1, causal=True)
    torch.testing.assert_close(second.weights, self_attention_read(EXAMPLE_QUERIES[1], 1).weights)


@pytest.mark.parametrize("scaling, temperature, scale", [("none", 1.0, 1.0), ("temperature", 0.25, 4.0)])
def test_scalings(scaling, temperature, scale):
    read = self_attention_read((1.0, 0.5), scaling=scaling, temperature=temperature)
    scores = torch.tensor([1.0, 0.5], dtype=torch.float64) * scale
    torch.testing.assert_close(read.weights, torch.softmax(scores, 0))
    torch.testing.assert_close(read.output, read.weights @ read.values)


def test_low_temperature_approaches_the_best_match_but_never_reaches_it():
    read = self_attention_read(scaling="temperature", temperature=0.1)
    assert 0.99 < read.weights[0] < 1.0


def test_bad_settings_are_reported():
    with pytest.raises(ValueError, match="temperature must be positive"):
        self_attention_read(scaling="temperature", temperature=0.0)
    with pytest.raises(ValueError, match="scaling must be one of"):
        self_attention_read(scaling="sqrt")
    with pytest.raises(ValueError, match="position must be in 0..1"):
        self_attention_read(position=2)


def test_figure_and_widget_build():
    fig = plot_self_attention(self_attention_read(causal=True))
    assert len(fig.axes) == 3
    widget = self_attention_playground()
    assert widget.children  # controls and the output area


def test_widget_controls_are_wired():
    widget = self_attention_playground()
    (token, query_x, query_y, causal), (scaling, temperature) = (box.children for box in widget.children[:2])
    token.value = 1  # choosing token 2 loads its query into the coordinate boxes
    assert (query_x.value, query_y.value) == EXAMPLE_QUERIES[1]
    assert temperature.disabled
    scaling.value = "temperature"
    assert not temperature.disabled
    assert causal.description == "causal mask"


def _printed(text: str, label: str) -> list[float]:
    line = next(line for line in text.splitlines() if line.startswith(label))
    inside = line[line.index("[") + 1 : line.index("]")]
    return [float(x) for x in inside.split(",")]


@pytest.mark.parametrize("temperature", [0.1, 0.2, 0.5, 1.0, 10.0])
def test_printed_weights_and_output_agree_at_every_temperature(temperature):
    """At temperature 0.1 the weights are [0.99995, 0.000045]; printed with 4 decimals they
    read [1.0000, 0.0000] next to an output of [1.9999, 0.0002]. The printed weights, times
    the values, must give the printed output to the printed precision."""
    read = self_attention_read(scaling="temperature", temperature=temperature)
    text = describe(read)
    weights, output = _printed(text, "weights"), _printed(text, "output")
    decimals = len(text.splitlines()[2].split("[")[1].split(",")[0].split(".")[1])
    from_printed = torch.tensor(weights, dtype=torch.float64) @ read.values
    assert torch.allclose(from_printed, torch.tensor(output, dtype=torch.float64), atol=5 * 10.0**-decimals)
    for w in weights:  # a weight that is neither 0 nor 1 is not printed as one
        assert w not in (0.0, 1.0)


def test_figure_labels_agree_with_the_printout_at_low_temperature():
    """The weights panel must not read 1.0000 / 0.0000 beside an output of 1.9999: the
    figure uses the decimals ``describe`` prints."""
    read = self_attention_read(scaling="temperature", temperature=0.1)
    fig = plot_self_attention(read)
    weight_labels = [text.get_text() for text in fig.axes[1].texts]
    printed = describe(read).splitlines()[2]
    assert weight_labels and all(label in printed for label in weight_labels)
    assert not any(label in ("1.0000", "0.0000") for label in weight_labels)

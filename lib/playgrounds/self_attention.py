"""Chapter 1's self-attention playground (ipywidgets), driven by a pure function that tests call.

A two-token sequence with the worked example's keys
[1, 0], [0, 1] and values [2, 0], [0, 4]. Pick which token's query reads (or type its two
coordinates), how the scores are scaled, and whether the causal mask is on; see the
scores, the weights and the output beside the values.

The vectors are hand-picked to show the operation. They are not learned, and say nothing
about what a trained language model attends to.

Each playground has three layers: ``self_attention_read`` computes (pure, tested),
``plot_self_attention`` draws one state (the static figure in the built book), and
``self_attention_playground`` wires widgets to the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from lib.attention import attention, causal_mask

EXAMPLE_KEYS = ((1.0, 0.0), (0.0, 1.0))
EXAMPLE_VALUES = ((2.0, 0.0), (0.0, 4.0))
# Token 1's query is the worked example's q = [1, 0]. The worked example has no query for
# token 2: its [0, 1] is added for the playground, picked to match token 2's own key.
EXAMPLE_QUERIES = ((1.0, 0.0), (0.0, 1.0))
SCALINGS = ("1/√d_k", "none", "temperature")


@dataclass(frozen=True)
class AttentionRead:
    """One query's read of a short sequence, every intermediate kept for display."""

    query: torch.Tensor  # (D,)
    keys: torch.Tensor  # (M, D)
    values: torch.Tensor  # (M, Dv)
    position: int  # the query's token position, 0-based
    scale: float  # what the dot products were multiplied by
    allowed: torch.Tensor  # (M,) bool
    dot_products: torch.Tensor  # (M,)
    scores: torch.Tensor  # (M,), -inf where not allowed
    weights: torch.Tensor  # (M,)
    output: torch.Tensor  # (Dv,)


def score_scale(scaling: str, d_k: int, temperature: float = 1.0) -> float:
    """The factor the dot products are multiplied by: 1/√d_k, 1, or 1/temperature."""
    if scaling == "1/√d_k":
        return 1.0 / math.sqrt(d_k)
    if scaling == "none":
        return 1.0
    if scaling == "temperature":
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        return 1.0 / temperature
    raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")


def self_attention_read(
    query=EXAMPLE_QUERIES[0],
    position: int = 0,
    *,
    keys=EXAMPLE_KEYS,
    values=EXAMPLE_VALUES,
    scaling: str = "1/√d_k",
    temperature: float = 1.0,
    causal: bool = False,
) -> AttentionRead:
    """The query at ``position`` reads the sequence through ``lib.attention``.

    With ``causal`` it may read keys 0..position only (self-attention, so N = M and the
    causal mask's bottom-right and top-left alignments agree).
    """
    query = torch.as_tensor(query, dtype=torch.float64)  # (D,)
    keys = torch.as_tensor(keys, dtype=torch.float64)  # (M, D)
    values = torch.as_tensor(values, dtype=torch.float64)  # (M, Dv)
    n_tokens = keys.shape[0]
    if not 0 <= position < n_tokens:
        raise ValueError(f"position must be in 0..{n_tokens - 1}, got {position}")
    scale = score_scale(scaling, d_k=keys.shape[1], temperature=temperature)
    allowed = causal_mask(n_tokens, n_tokens)[position] if causal else torch.ones(n_tokens, dtype=torch.bool)  # (M,)
    output, weights = attention(query[None], keys, values, allowed[None], scale=scale, return_weights=True)
    dot_products = keys @ query  # (M,)
    scores = (dot_products * scale).masked_fill(~allowed, float("-inf"))  # (M,)
    return AttentionRead(query, keys, values, position, scale, allowed, dot_products, scores, weights[0], output[0])


def decimals_needed(*tensors: torch.Tensor, start: int = 4, most: int = 8) -> int:
    """How many decimals show every number consistently: no entry that is not exactly 0
    or 1 rounds to 0 or 1, and each small entry keeps two significant digits.

    At a low temperature the weights are [0.99995, 0.000045]: with 4 decimals they read
    [1.0000, 0.0000] beside an output of [1.9999, 0.0002], which cannot both be right.
    """
    values = [x for t in tensors for x in t.tolist() if math.isfinite(x)]
    for digits in range(start, most + 1):
        step = 10.0**-digits
        if all(x in (0.0, 1.0) or (abs(x) >= 10 * step and abs(abs(x) - 1) >= step / 2) for x in values):
            return digits
    return most


def describe(read: AttentionRead) -> str:
    """The read as four lines of numbers, with as many decimals as they need to agree."""
    digits = decimals_needed(read.dot_products, read.scores, read.weights, read.output)

    def fmt(t: torch.Tensor) -> str:
        return "[" + ", ".join("-inf" if x == float("-inf") else f"{x:.{digits}f}" for x in t.tolist()) + "]"

    return "\n".join(
        [
            f"dot products {fmt(read.dot_products)}",
            f"scores       {fmt(read.scores)}   (dot products × {read.scale:.4f})",
            f"weights      {fmt(read.weights)}   (sum {read.weights.sum().item():.4f})",
            f"output       {fmt(read.output)}",
        ]
    )


def plot_self_attention(read: AttentionRead) -> Figure:
    """Scores, weights, and the output drawn among the value vectors."""
    # 8 in wide at 10 pt: figure text reads at 11 px or more in the book's column at 1280 px
    fig = plt.figure(figsize=(8, 5.2), layout="constrained")
    grid = fig.add_gridspec(2, 2)
    ax_scores, ax_weights, ax_values = (fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0]),
                                        fig.add_subplot(grid[:, 1]))  # fmt: skip
    labels = [f"key {j + 1}" for j in range(len(read.scores))]
    finite = torch.where(read.allowed, read.scores, torch.zeros_like(read.scores))
    ax_scores.bar(labels, finite.tolist(), color=["tab:blue" if a else "lightgray" for a in read.allowed.tolist()])
    for j, (score, allowed) in enumerate(zip(read.scores.tolist(), read.allowed.tolist(), strict=True)):
        top = max(score, 0.0) if allowed else 0.0
        ax_scores.annotate("-∞ (masked)" if not allowed else f"{score:.3f}", (j, top), ha="center", va="bottom")
    ax_scores.axhline(0, color="black", linewidth=0.6)
    ax_scores.margins(y=0.15)  # room above the tallest bar for its label
    ax_scores.set(title=f"scores (dot × {read.scale:.3f})", ylabel="score")

    # As many decimals as describe() prints, so that weights and output agree on the page.
    digits = decimals_needed(read.weights, read.output)
    ax_weights.bar(labels, read.weights.tolist(), color="tab:orange")
    for j, weight in enumerate(read.weights.tolist()):
        ax_weights.annotate(f"{weight:.{digits}f}", (j, weight), ha="center", va="bottom")
    ax_weights.set(title="weights (softmax)", ylabel="weight", ylim=(0, 1.15))

    for j, value in enumerate(read.values.tolist()):
        ax_values.annotate("", xy=value, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "tab:gray", "lw": 1.5})
        ax_values.annotate(f"v{j + 1}", value, textcoords="offset points", xytext=(4, 4), color="tab:gray")
    if len(read.values) == 2:  # every convex combination of two values lies on this segment
        ax_values.plot(*read.values.T.tolist(), linestyle=":", color="tab:gray")
    output = read.output.tolist()
    ax_values.annotate("", xy=output, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "tab:red", "lw": 2})
    ax_values.annotate(
        f"output [{output[0]:.{digits}f}, {output[1]:.{digits}f}]",
        output,
        textcoords="offset points",
        xytext=(6, -12),
        color="tab:red",
    )
    span = max(1.0, read.values.abs().max().item()) * 1.15
    ax_values.set(
        title="output among the values",
        xlim=(-0.3, span),
        ylim=(-0.3, span),
        aspect="equal",
        xlabel="value coordinate 1",
        ylabel="value coordinate 2",
    )
    fig.suptitle(
        f"query [{read.query[0]:.2f}, {read.query[1]:.2f}] at token {read.position + 1}"
        + (", causal" if read.allowed.sum() < len(read.allowed) else "")
    )
    return fig


def self_attention_playground() -> widgets.Widget:
    """Widgets for ``self_attention_read``: query token or coordinates, scaling, causal mask."""
    style = {"description_width": "initial"}
    token = widgets.Dropdown(options=[("token 1", 0), ("token 2", 1)], value=0, description="query of", style=style)
    query_x = widgets.FloatText(value=EXAMPLE_QUERIES[0][0], step=0.1, description="q[0]", layout={"width": "150px"})
    query_y = widgets.FloatText(value=EXAMPLE_QUERIES[0][1], step=0.1, description="q[1]", layout={"width": "150px"})
    scaling = widgets.ToggleButtons(options=SCALINGS, value="1/√d_k", description="scaling", style=style)
    temperature = widgets.FloatLogSlider(
        value=math.sqrt(2), base=10, min=-1, max=1, step=0.05, description="temperature", disabled=True, style=style
    )
    causal = widgets.Checkbox(value=False, description="causal mask")

    def use_token_query(change):
        query_x.value, query_y.value = EXAMPLE_QUERIES[change["new"]]

    def enable_temperature(change):
        temperature.disabled = change["new"] != "temperature"

    token.observe(use_token_query, names="value")
    scaling.observe(enable_temperature, names="value")

    def show(position, qx, qy, scaling, temperature, causal):
        read = self_attention_read((qx, qy), position, scaling=scaling, temperature=temperature, causal=causal)
        print(describe(read))
        plot_self_attention(read)
        plt.show()

    controls = {
        "position": token,
        "qx": query_x,
        "qy": query_y,
        "scaling": scaling,
        "temperature": temperature,
        "causal": causal,
    }
    output = widgets.interactive_output(show, controls)
    return widgets.VBox(
        [
            widgets.HBox([token, query_x, query_y, causal]),
            widgets.HBox([scaling, temperature]),
            output,
        ]
    )

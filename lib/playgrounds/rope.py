"""The RoPE playground (chapter 3): move both positions, change the gap, watch the score.

Two fixed two-dimensional content vectors, the worked example's q = k = [1, 0] by default, are
rotated by RoPE with one frequency (radians per position): the query at position m, the
key at position n. The score (R_m q)·(R_n k) is shown beside qᵀ R_(n-m) k, the same
number computed from the gap alone. Shifting both positions leaves it unchanged; changing
the gap moves it along a cosine (for q = k).

The content vectors are held fixed on purpose, to isolate the rotation identity. In a
trained network q and k themselves depend on the context, so nothing here says a whole
model is unchanged by shifting every position.

Three layers, as in chapter 1's playground: ``rope_read`` computes (pure, tested),
``plot_rope_read`` draws one state (the static figure in the built book), and
``rope_playground`` wires widgets to the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from lib.rope import apply_rope, rope_rotation_matrix

__all__ = ["EXAMPLE_FREQUENCY", "RopeRead", "rope_read", "describe_rope_read", "plot_rope_read", "rope_playground"]

EXAMPLE_FREQUENCY = math.pi / 4  # radians per position, chapter 3's 2-D example
EXAMPLE_VECTOR = (1.0, 0.0)  # q = k = [1, 0]


@dataclass(frozen=True)
class RopeRead:
    """One query/key score under RoPE, with every intermediate kept for display."""

    query: torch.Tensor  # (2,) content vector q
    key: torch.Tensor  # (2,) content vector k
    query_position: float  # m
    key_position: float  # n
    frequency: float  # radians per position
    rotated_query: torch.Tensor  # (2,) R_m q
    rotated_key: torch.Tensor  # (2,) R_n k
    score: float  # (R_m q)·(R_n k)
    score_from_gap: float  # qᵀ R_(n-m) k: the same number from the gap alone
    unrotated_score: float  # q·k, what the score would be with no positions at all

    @property
    def gap(self) -> float:
        return self.key_position - self.query_position


def rope_read(
    query_position: float = 1,
    key_position: float = 2,
    *,
    frequency: float = EXAMPLE_FREQUENCY,
    query=EXAMPLE_VECTOR,
    key=EXAMPLE_VECTOR,
) -> RopeRead:
    """Rotate q to position m and k to position n with ``lib.rope.apply_rope``; score them."""
    if not math.isfinite(frequency):
        raise ValueError(f"frequency must be a finite number of radians per position, got {frequency!r}")
    query = torch.as_tensor(query, dtype=torch.float64)  # (2,)
    key = torch.as_tensor(key, dtype=torch.float64)  # (2,)
    for name, vector in (("query", query), ("key", key)):
        if vector.shape != (2,):
            raise ValueError(f"{name} must be a 2-D vector (one rotating pair), got shape {tuple(vector.shape)}")
    freqs = torch.tensor([frequency], dtype=torch.float64)  # (1,): one pair, one frequency
    rotated_query = apply_rope(query[None], [query_position], freqs=freqs)[0]  # (2,)
    rotated_key = apply_rope(key[None], [key_position], freqs=freqs)[0]  # (2,)
    gap_rotation = rope_rotation_matrix(key_position - query_position, 2, freqs=freqs)  # (2, 2) R_(n-m)
    return RopeRead(
        query=query,
        key=key,
        query_position=query_position,
        key_position=key_position,
        frequency=float(frequency),
        rotated_query=rotated_query,
        rotated_key=rotated_key,
        score=float(rotated_query @ rotated_key),
        score_from_gap=float(query @ gap_rotation @ key),
        unrotated_score=float(query @ key),
    )


def _fmt(vector: torch.Tensor) -> str:
    return "[" + ", ".join(f"{x:.4f}" for x in vector.tolist()) + "]"


def describe_rope_read(read: RopeRead) -> str:
    """The read as a few rounded lines of numbers."""
    m, n = read.query_position, read.key_position
    return "\n".join(
        [
            f"positions m={m:g}, n={n:g}, gap n-m={read.gap:g}, frequency {read.frequency:.4f} rad/position",
            f"R_m q = {_fmt(read.rotated_query)}   (q turned by {m * read.frequency:.4f} rad)",
            f"R_n k = {_fmt(read.rotated_key)}   (k turned by {n * read.frequency:.4f} rad)",
            f"score (R_m q)·(R_n k) = {read.score:.4f}",
            f"q·R_(n-m) k           = {read.score_from_gap:.4f}   (from the gap alone)",
        ]
    )


def _arrow(ax, vector, color, label, width=2.0, style="-"):
    x, y = vector
    ax.annotate(
        "", xy=(x, y), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color, "lw": width, "linestyle": style}
    )
    ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 5), color=color)


def plot_rope_read(read: RopeRead, *, max_offset: int = 16) -> Figure:
    """Left: the content and rotated vectors on the plane. Right: the score against the gap,
    and against a shift of both positions, with the current state marked."""
    # 8 in wide at 10 pt: figure text reads at 11 px or more in the book's column at 1280 px
    fig, (ax_plane, ax_score) = plt.subplots(1, 2, figsize=(8, 4.6), layout="constrained")

    circle = torch.linspace(0, 2 * math.pi, 200)
    radius = max(read.query.norm().item(), read.key.norm().item(), 1e-9)
    ax_plane.plot((radius * circle.cos()).tolist(), (radius * circle.sin()).tolist(), color="lightgray", lw=0.8)
    same = torch.equal(read.query, read.key)
    _arrow(ax_plane, read.query.tolist(), "tab:blue", "q = k" if same else "q", width=1.0, style=":")
    if not same:
        _arrow(ax_plane, read.key.tolist(), "tab:orange", "k", width=1.0, style=":")
    _arrow(ax_plane, read.rotated_query.tolist(), "tab:blue", f"R_{read.query_position:g} q")
    _arrow(ax_plane, read.rotated_key.tolist(), "tab:orange", f"R_{read.key_position:g} k")
    span = 1.3 * radius
    ax_plane.set(
        xlim=(-span, span),
        ylim=(-span, span),
        aspect="equal",
        xlabel="coordinate 1 of the pair",
        ylabel="coordinate 2 of the pair",
        title=f"rotated vectors: score {read.score:.4f}",
    )
    ax_plane.axhline(0, color="black", lw=0.4)
    ax_plane.axvline(0, color="black", lw=0.4)

    offsets = torch.arange(-max_offset, max_offset + 1)  # gaps (or shifts) to draw
    by_gap = [rope_read(read.query_position, read.query_position + int(g), frequency=read.frequency,
                        query=read.query, key=read.key).score for g in offsets]  # fmt: skip
    by_shift = [rope_read(read.query_position + int(s), read.key_position + int(s), frequency=read.frequency,
                          query=read.query, key=read.key).score for s in offsets]  # fmt: skip
    ax_score.plot(offsets.tolist(), by_gap, marker=".", color="tab:purple", label="change the gap n − m (m fixed)")
    ax_score.plot(offsets.tolist(), by_shift, color="tab:green", lw=2, label="shift both m and n by s (gap fixed)")
    ax_score.scatter([read.gap], [read.score], s=80, color="tab:red", zorder=3, label="current state")
    ax_score.set(
        xlabel="gap n − m, or shift s (positions)",
        ylabel="score (R_m q)·(R_n k)",
        title=f"frequency {read.frequency:.4f} rad/position",
        ylim=(-1.15 * radius**2, 1.15 * radius**2),
    )
    ax_score.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, fontsize=10)
    return fig


def rope_playground(max_position: int = 40, max_gap: int = 12) -> widgets.Widget:
    """Sliders for m, n, the gap n - m (linked: moving m keeps the gap), and the frequency."""
    style = {"description_width": "initial"}
    query_position = widgets.IntSlider(value=1, min=0, max=max_position, description="query position m", style=style)
    key_position = widgets.IntSlider(
        value=2, min=0, max=max_position + max_gap, description="key position n", style=style
    )
    gap = widgets.IntSlider(value=1, min=-max_gap, max=max_gap, description="gap n − m", style=style)
    frequency = widgets.FloatSlider(
        value=EXAMPLE_FREQUENCY,
        min=0.0,
        max=math.pi,
        step=math.pi / 64,  # π/4 lies on the grid
        readout_format=".4f",
        description="frequency (rad/position)",
        style=style,
    )

    # Moving m carries n along (the gap stays); moving n or the gap changes the other.
    # Each handler only sets values that already agree, so the chain stops after one step.
    def on_query_position(change):
        key_position.value = change["new"] + gap.value

    def on_key_position(change):
        gap.value = change["new"] - query_position.value

    def on_gap(change):
        key_position.value = query_position.value + change["new"]

    query_position.observe(on_query_position, names="value")
    key_position.observe(on_key_position, names="value")
    gap.observe(on_gap, names="value")

    def show(m, n, frequency):
        read = rope_read(m, n, frequency=frequency)
        print(describe_rope_read(read))
        plot_rope_read(read)
        plt.show()

    output = widgets.interactive_output(show, {"m": query_position, "n": key_position, "frequency": frequency})
    return widgets.VBox(
        [widgets.HBox([query_position, key_position]), widgets.HBox([gap, frequency]), output],
    )

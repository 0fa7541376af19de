"""Why attention divides the scores by √d_k: two small experiments (chapter 1).

1. ``dot_product_variance``: for random q, k whose coordinates are independent with mean 0
   and variance 1, Var(q·k) grows like d_k, and Var(q·k / √d_k) stays near 1.
2. ``softmax_saturation``: as the gap between one score and the rest grows, softmax puts
   nearly all its weight on one key and, past a gap of about 2, its derivatives shrink
   toward zero, so the scores stop receiving gradient.
3. ``score_spread``: how far apart unscaled scores typically are (their standard
   deviation, and the gap between the top two of a few keys) at a given width.

All three rest on assumptions (independent, zero-mean, unit-variance coordinates) that learned
vectors need not satisfy: the scale is a sensible default, not a guarantee of stability.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from lib.attention import attention, softmax


@dataclass(frozen=True)
class VarianceRow:
    d_k: int
    raw_variance: float  # Var(q·k)
    scaled_variance: float  # Var(q·k / √d_k)


def dot_product_variance(d_ks=(2, 4, 8, 16, 32, 64, 128, 256, 512), n_pairs: int = 20_000, seed: int = 0):
    """Sample ``n_pairs`` standard-normal (q, k) pairs per width and measure both variances."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for d_k in d_ks:
        q = torch.randn(n_pairs, d_k, generator=gen, dtype=torch.float64)  # (pairs, D)
        k = torch.randn(n_pairs, d_k, generator=gen, dtype=torch.float64)  # (pairs, D)
        dots = (q * k).sum(dim=-1)  # (pairs,)
        rows.append(VarianceRow(d_k, dots.var().item(), (dots / d_k**0.5).var().item()))
    return rows


@dataclass(frozen=True)
class SaturationRow:
    gap: float  # top score minus every other score
    top_weight: float  # softmax weight on the top key
    other_weight: float  # weight on each of the other keys
    max_gradient: float  # largest |∂ weight_i / ∂ score_j|: how much any score can still move any weight


def softmax_saturation(gaps=(0, 1, 2, 4, 8, 16), n_keys: int = 8):
    """Softmax of scores [gap, 0, ..., 0] and the size of its Jacobian."""
    rows = []
    for gap in gaps:
        scores = torch.zeros(n_keys, dtype=torch.float64)  # (M,)
        scores[0] = gap
        weights = softmax(scores)  # (M,)
        # The softmax Jacobian is diag(w) - w wᵀ: w_i(1 - w_i) on the diagonal, -w_i w_j off
        # it. With one weight near 1 and the rest near 0, each entry has a factor near 0.
        jacobian = torch.diag(weights) - torch.outer(weights, weights)  # (M, M)
        rows.append(SaturationRow(float(gap), weights[0].item(), weights[1].item(), jacobian.abs().max().item()))
    return rows


def mean_top_weight(d_k: int, n_keys: int = 8, n_queries: int = 2_000, *, scaled: bool, seed: int = 0) -> float:
    """Average largest attention weight for random unit-variance queries and keys.

    Near 1 means the softmax has saturated onto one key; near 1/n_keys means it spreads out.
    """
    gen = torch.Generator().manual_seed(seed)
    # Each query gets its own keys: a batch of n_queries independent one-query reads.
    q = torch.randn(n_queries, 1, 1, d_k, generator=gen)  # (B, H=1, N=1, D)
    k = torch.randn(n_queries, 1, n_keys, d_k, generator=gen)  # (B, 1, M, D)
    v = torch.zeros(n_queries, 1, n_keys, 1)  # (B, 1, M, 1): only the weights matter here
    _, weights = attention(q, k, v, scale=None if scaled else 1.0, return_weights=True)  # (B, 1, 1, M)
    return weights.amax(dim=-1).mean().item()


@dataclass(frozen=True)
class ScoreSpread:
    d_k: int
    scaled: bool
    score_std: float  # standard deviation of one score q·k (or q·k/√d_k)
    median_top_gap: float  # median over queries of (largest score - second largest) among n_keys
    mean_top_weight: float  # average softmax weight on the top key


def score_spread(
    d_k: int, n_keys: int = 8, n_queries: int = 2_000, *, scaled: bool = False, seed: int = 0
) -> ScoreSpread:
    """How far apart random scores are: their spread, and the typical gap that decides the softmax.

    Queries and keys have independent standard-normal coordinates, as in
    ``dot_product_variance``; each query gets its own ``n_keys`` keys. The gap between the
    top two scores is what the softmax turns into "one key takes almost everything".
    """
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, 1, d_k, generator=gen, dtype=torch.float64)  # (B, 1, D)
    k = torch.randn(n_queries, n_keys, d_k, generator=gen, dtype=torch.float64)  # (B, M, D)
    scores = (q * k).sum(dim=-1)  # (B, M)
    if scaled:
        scores = scores / d_k**0.5
    top2 = scores.topk(2, dim=-1).values  # (B, 2)
    weights = softmax(scores)  # (B, M)
    return ScoreSpread(
        d_k,
        scaled,
        scores.std().item(),
        (top2[:, 0] - top2[:, 1]).median().item(),
        weights.amax(dim=-1).mean().item(),
    )


def plot_variance(rows: list[VarianceRow]) -> Figure:
    """Var(q·k) and Var(q·k/√d_k) against d_k, on log-log axes."""
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    d_ks = [row.d_k for row in rows]
    # The predictions first, as wide pale bands, so that the measured points on top of
    # them do not hide them: Var(q·k) = d_k, and 1 after scaling.
    band = {"color": "tab:gray", "alpha": 0.35, "linewidth": 7, "solid_capstyle": "round", "zorder": 1}
    ax.plot(d_ks, d_ks, label="prediction: d_k", **band)
    ax.plot(d_ks, [1.0] * len(d_ks), label="prediction: 1", **{**band, "color": "tab:olive"})
    ax.plot(d_ks, [row.raw_variance for row in rows], "o", color="tab:blue", label="measured Var(q·k)", zorder=3)
    scaled = [row.scaled_variance for row in rows]
    ax.plot(d_ks, scaled, "s", color="tab:orange", label="measured Var(q·k / √d_k)", zorder=3)
    ax.set(xscale="log", yscale="log", xlabel="key/query width d_k", ylabel="variance of the score")
    ax.set_xticks(d_ks, [str(d) for d in d_ks])
    ax.legend()
    return fig


def plot_saturation(rows: list[SaturationRow]) -> Figure:
    """Top weight and the largest softmax derivative against the score gap."""
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    gaps = [row.gap for row in rows]
    ax.plot(gaps, [row.top_weight for row in rows], "o-", label="weight on the top key")
    ax.plot(gaps, [row.max_gradient for row in rows], "s-", label="largest |∂ weight / ∂ score|")
    ax.set(
        xlabel="score gap: top score minus each other score (unitless)",
        ylabel="weight, or derivative (unitless)",
        ylim=(-0.02, 1.05),
    )
    ax.legend()
    return fig

"""Chapter 5's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
byte counts of real (meta) tensors, a FLOP formula written here, torch.logsumexp, brute force over
every query-key pair and every tile."""

import math

import torch
from _variant_answers import variant_answer_tests


def score_mib(b: int, h: int, n: int) -> float:
    scores = torch.empty(b, h, n, n, dtype=torch.float32, device="meta")
    return scores.numel() * scores.element_size() / 2**20


def total_doubling(d: int, n: int) -> float:
    def flops(tokens: int) -> int:  # QKᵀ, AV: 2·N·N·d each; 4 projections 2·N·d·d; FFN 2·N·d·4d twice
        return 2 * (2 * tokens * tokens * d) + 4 * (2 * tokens * d * d) + 2 * (2 * tokens * d * 4 * d)

    return flops(2 * n) / flops(n)


def raised_max(m: float, l: float, block: tuple[float, ...]) -> list[float]:
    """l is Σ exp(x − m) over what was seen, so m + log l stands for all of it: one logsumexp."""
    m_new = max(m, *block)
    everything = torch.logsumexp(torch.tensor([m + math.log(l), *block], dtype=torch.float64), 0)
    return [m_new, math.exp(everything.item() - m_new)]


def causal_tiles(n: int, tile: int) -> int:
    """Every tile with at least one key at or before one of its queries."""
    blocks = range(n // tile)
    return sum(k * tile <= q * tile + tile - 1 for q in blocks for k in blocks)


def pair_count(n: int, allowed) -> int:
    return sum(bool(allowed(i, j)) for i in range(n) for j in range(n))


def accumulator(m: float, l: float, acc: tuple[float, ...], scores: tuple[float, ...]) -> list[float]:
    values = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    s = torch.tensor(scores, dtype=torch.float64)
    m_new = max(m, s.max().item())
    return (torch.tensor(acc, dtype=torch.float64) * math.exp(m - m_new) + torch.exp(s - m_new) @ values).tolist()


ANSWERS = {
    "5.score-mib": score_mib,
    "5.total-doubling": total_doubling,
    "5.raised-max": raised_max,
    "5.causal-tiles": causal_tiles,
    "5.window-edges": lambda n, w: pair_count(n, lambda i, j: i - w < j <= i),
    "5.global-edges": lambda n, w, g: pair_count(n, lambda i, j: abs(i - j) < w or min(i, j) < g),
    "5.accumulator": accumulator,
}

test_has_answers, test_variants_agree = variant_answer_tests(5, ANSWERS)

"""Chapter 3's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
RoPE scores from explicit 2×2 rotation matrices, the pair's period from the inverse frequencies as
Hugging Face's LLaMA builds them, the passes by counting a toy model's calls."""

import math

import numpy as np
import torch
from _variant_answers import variant_answer_tests


def rotation(angle):
    return np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])


def rope_score(q, k, m, n, theta):
    return float((rotation(m * theta) @ np.array(q, float)) @ (rotation(n * theta) @ np.array(k, float)))


def pair_period(pair, d_k, base=500000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k))  # one per pair
    return (2 * math.pi / inv_freq[pair]).item()


def passes(positions, tokens):
    """Count the calls of a causal 'model' that returns one prediction per input position."""
    calls = 0

    def model(sequence):
        nonlocal calls
        calls += 1
        return [f"after {t}" for t in sequence]

    known = [f"t{i}" for i in range(positions)]
    assert len(model(known)) == positions  # (a) every prediction of the known sequence from one call
    training = calls
    calls, sequence = 0, ["prompt"]
    while len(sequence) - 1 < tokens:  # (b) each call's last prediction is the next input
        sequence.append(model(sequence)[-1])
    return [training, calls]


ANSWERS = {
    "3.passes": passes,
    "3.shifted-score": lambda m, n: rope_score([1, 0], [1, 0], m, n, math.pi / 10),
    "3.gap-score": lambda n: rope_score([1, 0], [0, 1], 3, n, math.pi / 12),
    "3.pair-period": pair_period,
}

test_has_answers, test_variants_agree = variant_answer_tests(3, ANSWERS)

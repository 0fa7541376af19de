"""Chapter 3's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
RoPE scores from explicit 2×2 rotation matrices, the pair's period from the inverse frequencies as
Hugging Face's LLaMA builds them, the passes by counting a toy model's calls; the rows a query reads
from the attention weights of torch's nn.MultiheadAttention, and the permuted outputs by running one."""

import math

import numpy as np
import torch
from _variant_answers import variant_answer_tests
from torch import nn


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


def weights_of(n_queries, n_keys, **masks):
    """The attention weights (n_queries, n_keys) of a torch nn.MultiheadAttention with random weights."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    q, kv = torch.randn(1, n_queries, 8, dtype=torch.float64), torch.randn(1, n_keys, 8, dtype=torch.float64)
    with torch.no_grad():
        return mha(q, kv, kv, need_weights=True, **masks)[1][0]


def causal_reads(length, target):
    inputs, targets = list(range(length)), list(range(1, length + 1))  # shifted: position i predicts token i + 1
    position = targets.index(target)
    future = torch.ones(length, length, dtype=torch.bool).triu(1)  # True = may not read, as torch's masks say
    return (weights_of(length, length, attn_mask=future)[inputs[position]] > 0).int().tolist()


def permuted_outputs(order):
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    with torch.no_grad():
        y = mha(x, x, x)[0][0]
        fed = x[:, list(order)]
        rows = mha(fed, fed, fed)[0][0]
    return [min(range(4), key=lambda j: (row - y[j]).abs().max().item()) for row in rows]  # which y each row is


def cross_attention_row(source, padding, targets, query):
    pad = torch.arange(source)[None] >= source - padding  # True = padding, as key_padding_mask says
    return (weights_of(targets, source, key_padding_mask=pad)[query] > 0).int().tolist()


ANSWERS = {
    "3.causal-reads": causal_reads,
    "3.permuted-outputs": permuted_outputs,
    "3.cross-attention-row": cross_attention_row,
    "3.passes": passes,
    "3.shifted-score": lambda m, n: rope_score([1, 0], [1, 0], m, n, math.pi / 10),
    "3.gap-score": lambda n: rope_score([1, 0], [0, 1], 3, n, math.pi / 12),
    "3.pair-period": pair_period,
}

test_has_answers, test_variants_agree = variant_answer_tests(3, ANSWERS)

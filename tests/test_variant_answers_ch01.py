"""Chapter 1's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
each attention read through torch's softmax and a matrix product, the variance by sampling's formula."""

import math

import torch
from _variant_answers import variant_answer_tests

KEYS = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)  # the worked example's
VALUES = torch.tensor([[2.0, 0.0], [0.0, 4.0]], dtype=torch.float64)


def read(q, keys, values, allowed=None, d_k=2):
    """softmax(q Kᵀ / √d_k) V, forbidden keys at -inf, in float64."""
    scores = torch.as_tensor(q, dtype=torch.float64) @ keys.T / math.sqrt(d_k)
    if allowed is not None:
        scores = scores.masked_fill(~torch.tensor(allowed), float("-inf"))
    return torch.softmax(scores, -1) @ values


def masked_read(s1, s2, x):
    scores = torch.tensor([s1, s2, 0.0], dtype=torch.float64)  # already scaled: keys = I, d_k = 1
    values = torch.tensor([[2.0, 0.0], [0.0, 4.0], [x, 2.0]], dtype=torch.float64)
    return read(scores, torch.eye(3, dtype=torch.float64), values, [True, False, True], d_k=1)


ANSWERS = {
    "1.longer-query": lambda c: read([c, 0.0], KEYS, VALUES),
    "1.equal-scores": lambda a, b: read([0.0, 0.0], KEYS, torch.tensor([[a, 0.0], [0.0, b]], dtype=torch.float64)),
    "1.masked-read": masked_read,
    "1.new-values": lambda a, b: read([1.0, 0.0], KEYS, torch.tensor([[a, 0.0], [0.0, b]], dtype=torch.float64)),
    # Var(Σ qᵢkᵢ) = d_k · E[qᵢ²]E[kᵢ²] = d_k σ⁴; the factor brings it back to 1: σ⁻² / √d_k
    "1.wider-variance": lambda variance, d_k: [d_k * variance * variance, 1 / (variance * math.sqrt(d_k))],
}

test_has_answers, test_variants_agree = variant_answer_tests(1, ANSWERS)

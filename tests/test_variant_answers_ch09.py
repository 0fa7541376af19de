"""Chapter 9's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py)."""

import torch
import torch.nn.functional as F
from _variant_answers import variant_answer_tests
from torch import nn


def gpt_parameters(vocab_size: int, n_layers: int, n_kv_heads: int, hidden: int) -> int:
    """Build the model's pieces from torch's own modules and count what they hold: d_model 64, 8 heads of 8."""
    d, kv_width = 64, n_kv_heads * 64 // 8
    parts = [nn.Embedding(vocab_size, d), nn.RMSNorm(d)]  # the tied head adds nothing; the final norm
    for _ in range(n_layers):
        parts += [nn.Linear(d, d, bias=False), nn.Linear(d, kv_width, bias=False), nn.Linear(d, kv_width, bias=False)]
        parts += [nn.Linear(d, d, bias=False)]  # out projection
        parts += [nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False), nn.Linear(hidden, d, bias=False)]
        parts += [nn.RMSNorm(d), nn.RMSNorm(d)]
    return sum(p.numel() for part in parts for p in part.parameters())


def one_layer_cache(layers: int, query_heads: int, seq_len: int, head_dim: int) -> int:
    """Keys and values of one layer, (2 KV heads, seq_len, head_dim) each, in bfloat16."""
    return torch.zeros(2, 1, 2, seq_len, head_dim, dtype=torch.bfloat16).nbytes


def top_two(logit1: float, logit2: float, temperature: float) -> float:
    """torch's top-k, then softmax over the kept logits; token 1's share."""
    scaled = torch.tensor([2.0, logit1, logit2, 0.0], dtype=torch.float64) / temperature
    kept = torch.topk(scaled, 2)
    probs = torch.softmax(kept.values, 0)
    return probs[kept.indices.tolist().index(1)].item()


ANSWERS = {
    "9.parameters": gpt_parameters,
    "9.uniform-loss": lambda vocab: F.cross_entropy(
        torch.zeros(1, vocab, dtype=torch.float64), torch.tensor([0])
    ).item(),
    "9.cache-bytes": one_layer_cache,
    "9.top-k-two": top_two,
}

test_has_answers, test_variants_agree = variant_answer_tests(9, ANSWERS)

"""Chapter 2's varied exercises, every variant's answer computed without lib (tests/_variant_answers.py):
shapes and parameter counts from torch's own modules, reads through torch's softmax; which keys a causal
query reads from what torch's scaled_dot_product_attention mixes into its output."""

import torch
from _variant_answers import variant_answer_tests
from torch import nn
from torch.nn import functional as F
from torch.nn.attention.bias import causal_lower_right


def score_shape(b, n, m):
    q = torch.zeros(b, 12, n, 96 // 12)  # (B, h, N, d_k) with d = 96, h = 12
    k = torch.zeros(b, 12, m, 96 // 12)
    return list((q @ k.transpose(-2, -1)).shape)


def mask_after_softmax(v1, v2, v3):
    scores = torch.tensor([2.0, 1.0, 2.5], dtype=torch.float64).masked_fill(
        torch.tensor([False, False, True]), -torch.inf
    )
    return (torch.softmax(scores, 0) @ torch.tensor([v1, v2, v3], dtype=torch.float64)).item()


def gqa_kv_params(d, h, h_kv):
    with torch.device("meta"):  # shapes only, no memory
        k_proj, v_proj = (nn.Linear(d, h_kv * (d // h), bias=False) for _ in range(2))
    return sum(p.numel() for p in (*k_proj.parameters(), *v_proj.parameters()))


def concat_width(h, d_k, d_v):
    heads = [torch.zeros(2, 5, d_v) for _ in range(h)]  # each head's output: weighted values, width d_v
    return torch.cat(heads, dim=-1).shape[-1]


def keys_read(n, m, query, **sdpa):
    """Which of m keys query ``query`` of n reads: SDPA with equal scores and one-hot values mixes in
    exactly the keys its mask allows."""
    q, k, v = torch.zeros(n, 4, dtype=torch.float64), torch.zeros(m, 4, dtype=torch.float64), torch.eye(m).double()
    out = F.scaled_dot_product_attention(q[None], k[None], v[None], **sdpa)[0]  # (n, m)
    return (out[query] > 0).int().tolist()


def cache_causal_row(m, n, query):
    i = {"second": 1, "next-to-last": n - 2}[query]  # new queries counted from 0
    return keys_read(n, m, i, attn_mask=causal_lower_right(n, m))


def causal_alignment(n, m, query):
    i = {"first": 0, "last": n - 1}[query]
    return [keys_read(n, m, i, attn_mask=causal_lower_right(n, m)), keys_read(n, m, i, is_causal=True)]


ANSWERS = {
    "2.cache-causal-row": cache_causal_row,
    "2.causal-alignment": causal_alignment,
    "2.score-shape": score_shape,
    "2.mask-after-softmax": mask_after_softmax,
    "2.gqa-kv-params": gqa_kv_params,
    "2.concat-width": concat_width,
}

test_has_answers, test_variants_agree = variant_answer_tests(2, ANSWERS)

"""What chapter 2 shows about multi-head attention: shapes, heads, their cost (chapter 2).

The machinery is ``lib.attention.MultiHeadAttention``; this module holds the chapter's
demonstrations, so that the notebook's cells stay a few lines long:

* ``shape_table`` and ``reshape_steps`` record the shapes of a real forward pass;
  ``projection_shape_table`` does the same for hand-built projections, where
  d_k, d_v and d/h may all differ (``MultiHeadAttention`` keeps d_k = d_v = d/h);
* ``two_relationships`` shows why several heads: one softmax split between two keys
  reads their average, two heads each read one key sharply;
* ``head_cost_table`` counts parameters and FLOPs (measured by torch's FlopCounterMode)
  for h heads of width d/h;
* ``toy_sentence_heads`` builds four heads by hand, each reading a different pattern, and
  ``plot_head_weights`` draws their weights;
* ``kv_parameter_table`` counts the k/v projections of MHA, GQA and MQA.

How the plain path compares with torch's SDPA (which kernels run, precision in fp32, fp16
and bf16, fused vs plain outputs and gradients) is ``lib.sdpa_compare``.

Shape letters: B batch, H query heads, Hkv KV heads, N queries, M keys, D = d_k head
width, Dv = d_v value width, C = d_model.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch.utils.flop_counter import FlopCounterMode

from lib.attention import MultiHeadAttention, attention


@dataclass(frozen=True)
class ShapeRow:
    name: str
    shape: tuple[int, ...]
    meaning: str


def _shape_rows(w_q, w_k, w_v, w_o, q, k, v, weights, heads, merged, out) -> list[ShapeRow]:
    """The table's rows, every matrix in the formulas' orientation (X W)."""
    named = [
        ("W_Q", w_q, "query projection, d × (h d_k)"),
        ("W_K", w_k, "key projection, d × (h_kv d_k)"),
        ("W_V", w_v, "value projection, d × (h_kv d_v)"),
        ("Q", q, "queries, B × h × N × d_k"),
        ("K", k, "keys, B × h_kv × M × d_k"),
        ("V", v, "values, B × h_kv × M × d_v"),
        ("scores / weights", weights, "one distribution per query/head, B × h × N × M"),
        ("per-head output", heads, "weighted value reads, B × h × N × d_v"),
        ("concatenated", merged, "heads side by side, B × N × (h d_v)"),
        ("W_O", w_o, "output projection, (h d_v) × d"),
        ("output", out, "back to the model width, B × N × d"),
    ]
    return [ShapeRow(name, tuple(tensor.shape), meaning) for name, tensor, meaning in named]


def shape_table(module: MultiHeadAttention, x: torch.Tensor, context: torch.Tensor | None = None) -> list[ShapeRow]:
    """Chapter 2's shape table, measured on a forward pass of ``module`` (weights as d × out,
    the orientation the chapter's table uses; ``nn.Linear`` stores them transposed)."""
    with torch.no_grad():
        q, k, v = module.project(x, context)  # (B, H, N, D), (B, Hkv, M, D), (B, Hkv, M, D)
        heads, weights = attention(q, k, v, return_weights=True)  # (B, H, N, D), (B, H, N, M)
        merged = module.merge_heads(heads)  # (B, N, H·D)
        out = module.out_proj(merged)  # (B, N, C)
    weights_qkvo = (module.q_proj.weight.T, module.k_proj.weight.T, module.v_proj.weight.T, module.out_proj.weight.T)
    return _shape_rows(*weights_qkvo, q, k, v, weights, heads, merged, out)


def projection_shape_table(
    x: torch.Tensor,
    context: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor,
    n_heads: int,
) -> list[ShapeRow]:
    """Chapter 2's shape table for projection matrices given in the formulas' orientation
    (X W): w_q (C, H·D), w_k (C, H·D), w_v (C, H·Dv), w_o (H·Dv, C). Queries come from x
    (B, N, C), keys and values from context (B, M, C)."""
    for name, w, rows in (("w_q", w_q, x.shape[-1]), ("w_k", w_k, x.shape[-1]), ("w_v", w_v, x.shape[-1])):
        if w.ndim != 2 or w.shape[0] != rows or w.shape[1] % n_heads:
            raise ValueError(
                f"{name} must be (d, h·width) with d = {rows} and h = {n_heads} dividing the width, "
                f"got {tuple(w.shape)}"
            )
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(f"queries and keys must share d_k: w_q {tuple(w_q.shape)}, w_k {tuple(w_k.shape)}")
    if w_o.shape != (w_v.shape[1], x.shape[-1]):
        raise ValueError(f"w_o must be (h·d_v, d) = {(w_v.shape[1], x.shape[-1])}, got {tuple(w_o.shape)}")

    with torch.no_grad():
        projected = (x @ w_q, context @ w_k, context @ w_v)  # (B, N, H·D), (B, M, H·D), (B, M, H·Dv)
        q, k, v = (MultiHeadAttention.split_heads(t, n_heads) for t in projected)  # (B, H, N|M, D|Dv)
        heads, weights = attention(q, k, v, return_weights=True)  # (B, H, N, Dv), (B, H, N, M)
        merged = MultiHeadAttention.merge_heads(heads)  # (B, N, H·Dv)
        out = merged @ w_o  # (B, N, C)
    return _shape_rows(w_q, w_k, w_v, w_o, q, k, v, weights, heads, merged, out)


def reshape_steps(module: MultiHeadAttention, x: torch.Tensor) -> list[tuple[str, tuple[int, ...]]]:
    """The query path, one reshape at a time, with the shape after each step."""
    batch, tokens, _ = x.shape
    heads, width = module.n_heads, module.head_dim
    steps = []
    with torch.no_grad():
        projected = module.q_proj(x)  # (B, N, H·D)
        steps.append(("q_proj(x)", tuple(projected.shape)))
        split = projected.view(batch, tokens, heads, width)  # (B, N, H, D)
        steps.append(("view(B, N, h, d_k)", tuple(split.shape)))
        q = split.transpose(1, 2)  # (B, H, N, D)
        steps.append(("transpose(1, 2)", tuple(q.shape)))
        _, k, v = module.project(x)  # (B, Hkv, N, D) each
        scores = q @ k.repeat_interleave(heads // module.n_kv_heads, 1).transpose(-2, -1)  # (B, H, N, N)
        steps.append(("Q @ Kᵀ", tuple(scores.shape)))
        read = attention(q, k, v)  # (B, H, N, D)
        steps.append(("softmax(·) @ V", tuple(read.shape)))
        back = read.transpose(1, 2)  # (B, N, H, D)
        steps.append(("transpose(1, 2)", tuple(back.shape)))
        merged = back.reshape(batch, tokens, heads * width)  # (B, N, H·D)
        steps.append(("reshape(B, N, h·d_v)", tuple(merged.shape)))
        steps.append(("out_proj(·)", tuple(module.out_proj(merged).shape)))
    return steps


SENTENCE = ("the", "cat", "sat", "on", "the", "mat")
HEAD_NAMES = ("previous token", "same word", "first token", "uniform")


def toy_sentence_heads(gain: float = 6.0) -> tuple[MultiHeadAttention, torch.Tensor, tuple[str, ...]]:
    """A 4-head module whose weights are set by hand, and the sentence it reads (1, 6, 32).

    Token features: a one-hot word id (5), a one-hot position (6) and a constant 1. Each
    head gets its own query/key recipe: head 0 matches position i with position i - 1,
    head 1 matches equal words, head 2 makes every query prefer position 0, and head 3 has
    zero queries, so its scores are all equal. Real heads are learned and are rarely this
    tidy (see the chapter).
    """
    words = sorted(set(SENTENCE))
    n_tokens, d_model, n_heads = len(SENTENCE), 32, 4
    width = d_model // n_heads  # 8 features per head
    word_at, pos_at, one = 0, len(words), len(words) + n_tokens  # feature offsets
    x = torch.zeros(1, n_tokens, d_model)  # (B, N, C)
    for i, word in enumerate(SENTENCE):
        x[0, i, word_at + words.index(word)] = 1.0
        x[0, i, pos_at + i] = 1.0
        x[0, i, one] = 1.0
    module = MultiHeadAttention(d_model, n_heads, bias=False).eval()
    w_q = torch.zeros(d_model, d_model)  # (out, in), nn.Linear's layout
    w_k = torch.zeros(d_model, d_model)
    for i in range(n_tokens - 1):  # head 0: query of position i+1 meets key of position i
        w_q[0 * width + i, pos_at + i + 1] = gain
        w_k[0 * width + i, pos_at + i] = 1.0
    for w in range(len(words)):  # head 1: a word's query meets the same word's key
        w_q[1 * width + w, word_at + w] = gain
        w_k[1 * width + w, word_at + w] = 1.0
    w_q[2 * width, one] = gain  # head 2: every query meets position 0's key
    w_k[2 * width, pos_at] = 1.0
    # head 3: rows left at zero, so every score is 0 and the weights are uniform
    with torch.no_grad():
        module.q_proj.weight.copy_(w_q * width**0.5)  # undo the 1/√d_k of the scores
        module.k_proj.weight.copy_(w_k)
        module.v_proj.weight.copy_(torch.eye(d_model))
        module.out_proj.weight.copy_(torch.eye(d_model))
    return module, x, SENTENCE


def head_weights(
    module: MultiHeadAttention,
    x: torch.Tensor,
    context: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
) -> torch.Tensor:
    """Every head's attention weights for batch item 0: (H, N, M), with the forward's arguments."""
    with torch.no_grad():
        q, k, v = module.project(x, context)  # (B, H, N, D), (B, Hkv, M, D) x2
        _, weights = attention(q, k, v, mask, is_causal=is_causal, return_weights=True)  # (B, H, N, M)
    return weights[0]  # (H, N, M)


def plot_head_weights(
    weights: torch.Tensor,
    query_tokens: tuple[str, ...],
    key_tokens: tuple[str, ...] | None = None,
    titles: tuple[str, ...] | None = None,
) -> Figure:
    """One heatmap per head: rows are queries, columns keys, colour the weight (0 to 1)."""
    key_tokens = query_tokens if key_tokens is None else key_tokens
    n_heads = weights.shape[0]
    width = min(8.0, 1.9 * n_heads + 0.8)  # page width: about 8 inches at most
    fig, axes = plt.subplots(1, n_heads, figsize=(width, 3.4), layout="constrained", squeeze=False)
    for head, ax in enumerate(axes[0]):
        image = ax.imshow(weights[head].numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
        ax.set_xticks(range(len(key_tokens)), key_tokens, rotation=90)
        ax.set_yticks(range(len(query_tokens)), query_tokens if head == 0 else [])
        ax.set_title(f"head {head}" + (f":\n{titles[head]}" if titles else ""), fontsize=10)
        ax.set_xlabel("key token")
        if head == 0:
            ax.set_ylabel("query token")
    fig.colorbar(image, ax=axes[0].tolist(), label="attention weight", shrink=0.8)
    return fig


@dataclass(frozen=True)
class KVRow:
    name: str
    n_kv_heads: int
    kv_params: int  # k_proj + v_proj weights
    k_shape: tuple[int, ...]  # K for one (B, N) input
    saving: float  # ordinary MHA's k/v parameters divided by these


def kv_parameter_table(d_model: int = 512, n_heads: int = 8, batch: int = 2, tokens: int = 16) -> list[KVRow]:
    """MHA (h KV heads), GQA (h/4) and MQA (1): k/v parameters and the shape of K."""
    rows = []
    x = torch.zeros(batch, tokens, d_model)  # (B, N, C)
    full = None
    for name, n_kv_heads in (("MHA", n_heads), ("GQA", max(1, n_heads // 4)), ("MQA", 1)):
        module = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=False)
        params = module.k_proj.weight.numel() + module.v_proj.weight.numel()
        full = params if full is None else full
        with torch.no_grad():
            _, k, _ = module.project(x)  # (B, Hkv, N, D)
        rows.append(KVRow(name, n_kv_heads, params, tuple(k.shape), full / params))
    return rows


# --- why several heads, and why each is d/h wide ------------------------------------------


@dataclass(frozen=True)
class TwoRelationships:
    keys: torch.Tensor  # (M, D): one-hot positions, the same keys for both readings
    values: torch.Tensor  # (M, Dv): each token's content, written twice ([c, c])
    query: torch.Tensor  # (D,): asks for position 0 ("first token") and position 2 ("previous")
    one_head_weights: torch.Tensor  # (M,): one softmax over the whole width
    one_head_output: torch.Tensor  # (Dv,)
    two_head_weights: torch.Tensor  # (2, M): the same query and keys cut into two heads of D/2
    two_head_output: torch.Tensor  # (Dv,): the two heads' outputs, concatenated


def two_relationships(gain: float = 8.0) -> TwoRelationships:
    """One query that needs two tokens: position 0 and position 2 of four.

    The query is ``gain·√2`` at features 0 and 2 of a width-4 query; the keys are one-hot
    positions. Read as one head of width 4, one softmax must share its weight between
    the two keys, and the output is (nearly) the average of their contents. Cut into two
    heads of width 2 (features 0-1 and 2-3, the split ``MultiHeadAttention`` makes), each
    head sees one of the two keys and reads it sharply; the concatenation keeps both.
    """
    keys = torch.eye(4, dtype=torch.float64)  # (M=4, D=4): key j is position j
    content = torch.tensor([[2.0, 0.0], [1.0, 1.0], [0.0, 2.0], [1.0, -1.0]], dtype=torch.float64)  # (M, 2)
    values = torch.cat([content, content], dim=-1)  # (M, Dv=4): head 0 and head 1 each get a copy
    query = torch.zeros(4, dtype=torch.float64)  # (D,)
    query[0] = query[2] = gain * 2**0.5  # first token and previous token
    one_out, one_w = attention(query[None], keys, values, return_weights=True)  # (1, Dv), (1, M)

    def heads(t: torch.Tensor) -> torch.Tensor:  # (T, 4) -> (2, T, 2): features 0-1, then 2-3
        return t.view(t.shape[0], 2, 2).transpose(0, 1)

    two_out, two_w = attention(heads(query[None]), heads(keys), heads(values), return_weights=True)  # (2, 1, 2)
    return TwoRelationships(
        keys,
        values,
        query,
        one_w[0],
        one_out[0],
        two_w[:, 0],
        two_out[:, 0].reshape(-1),  # (Dv,): head 0's 2 features, then head 1's
    )


@dataclass(frozen=True)
class HeadCost:
    n_heads: int
    head_dim: int  # d / h
    parameters: int  # all four projections, biases included
    flops: int  # one forward pass, counted by torch.utils.flop_counter (matrix products)
    projection_flops: int  # the part of ``flops`` spent in the four projections
    weight_elements: int  # entries of the attention weights, B · h · N · M: grows with h


def head_cost_table(
    d_model: int = 48, heads: tuple[int, ...] = (1, 2, 4, 8), batch: int = 2, tokens: int = 5
) -> list[HeadCost]:
    """Parameters and matrix-product FLOPs of ``MultiHeadAttention(d_model, h)`` for each h:
    the same for all. The size of the attention weights is not: it grows h times.

    The projections are d × d whatever h is (h heads of width d/h); the scores cost
    h · N · M · (d/h) multiply-adds, again independent of h. The FLOPs are measured on the
    plain path (``fused=False``), whose matrix products torch's counter sees one by one; the
    counter counts matrix products only, so the softmax over the B · h · N · M weights (and
    their memory) is not in ``flops``: ``weight_elements`` counts those weights.
    """
    x = torch.zeros(batch, tokens, d_model)  # (B, N, C)
    rows = []
    for n_heads in heads:
        module = MultiHeadAttention(d_model, n_heads, fused=False).eval()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            module(x)
        with torch.no_grad():
            q, k, v = module.project(x)  # (B, h, N, d/h) each
            _, weights = attention(q, k, v, return_weights=True)  # (B, h, N, M)
            merged = module.merge_heads(weights @ v)  # (B, N, d)
            with FlopCounterMode(display=False) as projections:
                module.project(x)
                module.out_proj(merged)
        params = sum(p.numel() for p in module.parameters())
        rows.append(
            HeadCost(
                n_heads,
                module.head_dim,
                params,
                counter.get_total_flops(),
                projections.get_total_flops(),
                weights.numel(),
            )
        )
    return rows

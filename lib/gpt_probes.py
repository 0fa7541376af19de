"""Looking inside a trained ``lib.gpt.GPT``: its heads' attention weights and layer ablation (chapter 9).

Nothing here changes the model or hooks into it. Each function re-runs the model's own
public pieces (``embed``, each block's ``norm1``/``attn.project``/``ffn``, RoPE from
``lib.rope``) the way ``GPT.forward`` does, so it reads what the model computes without
touching ``lib.gpt``; the tests hold every re-run equal to the model's own forward pass.

    attention_maps(model, idx)        (L, H, T, T) weights of every layer and query head
    ablated_logits(model, idx, skip)  logits with the attention branch of some layers zeroed
    run_heads(model, idx, replace)    logits and every head's output, some heads replaced
    mean_head_outputs(model, ids)     each head's mean output over a text (for mean ablation)
    repeated_tokens_losses(model)     Olsson et al.'s induction test: loss on a repeated random sequence
    prefix_matching_scores(model)     how much each head attends to the token after an earlier copy

Mean ablation, as in the interpretability literature (e.g. TransformerLens, ARENA): a
head is removed by replacing its output with its mean over held-out text, not by zero,
so the rest of the network still sees an output of the size it was trained with.

Shape letters: B batch, T tokens, L layers, H query heads, Hkv key/value heads, D head width,
C d_model, V vocabulary.
"""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from lib.gpt import GPT
from lib.rope import rotate_pairs

__all__ = [
    "attention_maps",
    "ablated_logits",
    "run_heads",
    "mean_head_outputs",
    "repeated_tokens_losses",
    "prefix_matching_scores",
    "kv_bytes_per_token",
    "decode_seconds",
]


def _check(model: object, idx: object) -> None:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a lib.gpt.GPT, got {type(model).__name__}")
    if not isinstance(idx, torch.Tensor) or idx.ndim != 2 or idx.dtype.is_floating_point:
        shape = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx).__name__
        raise ValueError(f"idx must be a (B, T) tensor of token ids, got {shape}")


def _rotation(model: GPT, n_tokens: int, dtype: torch.dtype):
    return model.rotation(0, n_tokens, model.embed.weight.device, dtype)  # (T, D/2) cos and sin


@torch.no_grad()
def attention_maps(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """(L, B, H, T, T): the causal attention weights of every layer and query head.

    Row i of a map is how query i reads keys 0..i (each row sums to 1). Each query head
    reads the key/value head of its group (grouped-query attention).
    """
    _check(model, idx)
    x = model.embed(idx)  # (B, T, C)
    rotation = _rotation(model, idx.shape[1], x.dtype)
    maps = []
    for block in model.blocks:
        q, k, _ = block.attn.project(block.norm1(x))  # (B, H, T, D), (B, Hkv, T, D)
        q, k = rotate_pairs(q, *rotation), rotate_pairs(k, *rotation)
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, T, D): each query head's KV head
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
        future = torch.ones(idx.shape[1], idx.shape[1], dtype=torch.bool, device=idx.device).triu(1)  # (T, T)
        maps.append(torch.softmax(scores.masked_fill(future, -math.inf), dim=-1))  # (B, H, T, T)
        x = block(x, is_causal=True, rotation=rotation)  # (B, T, C)
    return torch.stack(maps)  # (L, B, H, T, T)


@torch.no_grad()
def ablated_logits(model: GPT, idx: torch.Tensor, skip_attention: tuple[int, ...] = ()) -> torch.Tensor:
    """(B, T, V) logits with the attention branch of the layers in ``skip_attention`` (0-based) zeroed.

    A zeroed branch adds nothing to the residual stream; the layer's FFN still runs. With
    ``skip_attention=()`` this is ``model(idx)``.
    """
    _check(model, idx)
    n_layers = len(model.blocks)
    bad = [i for i in skip_attention if not 0 <= i < n_layers]
    if bad:
        raise ValueError(f"skip_attention holds layers {bad} outside 0..{n_layers - 1}")
    x = model.embed(idx)  # (B, T, C)
    rotation = _rotation(model, idx.shape[1], x.dtype)
    for i, block in enumerate(model.blocks):
        if i in skip_attention:
            x = x + block.ffn(block.norm2(x))  # (B, T, C): the FFN alone
        else:
            x = block(x, is_causal=True, rotation=rotation)  # (B, T, C)
    return model.head(model.norm(x))  # (B, T, V)


@torch.no_grad()
def run_heads(
    model: GPT, idx: torch.Tensor, replace: dict[tuple[int, int], torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, V) logits and (L, B, H, T, D) every head's output before the output projection.

    ``replace`` maps (layer, head), both 0-based, to a (D,) vector that stands in for that
    head's output at every position (``mean_head_outputs`` gives the usual one). With no
    replacement the logits are ``model(idx)``. The GPT is pre-norm, as ``GPT`` builds it.
    """
    _check(model, idx)
    replace = replace or {}
    n_layers, n_heads = len(model.blocks), model.config.n_heads
    bad = [key for key in replace if not (0 <= key[0] < n_layers and 0 <= key[1] < n_heads)]
    if bad:
        raise ValueError(f"replace names heads {bad} outside layers 0..{n_layers - 1}, heads 0..{n_heads - 1}")
    x = model.embed(idx)  # (B, T, C)
    rotation = _rotation(model, idx.shape[1], x.dtype)
    outputs = []
    for layer, block in enumerate(model.blocks):
        q, k, v = block.attn.project(block.norm1(x))  # (B, H, T, D), (B, Hkv, T, D) x2
        q, k = rotate_pairs(q, *rotation), rotate_pairs(k, *rotation)
        heads = block.attn.attend(q, k, v, is_causal=True)  # (B, H, T, D)
        for (where, head), value in replace.items():
            if where == layer:
                heads[:, head] = value.to(heads.dtype)  # (D,) broadcast over (B, T, D)
        outputs.append(heads)
        x = x + block.attn.out_proj(block.attn.merge_heads(heads))  # (B, T, C)
        x = x + block.ffn(block.norm2(x))  # (B, T, C)
    return model.head(model.norm(x)), torch.stack(outputs)  # (B, T, V), (L, B, H, T, D)


@torch.no_grad()
def mean_head_outputs(model: GPT, windows: torch.Tensor) -> torch.Tensor:
    """(L, H, D): each head's output averaged over every position of ``windows`` (B, T) token ids."""
    _, outputs = run_heads(model, windows)  # (L, B, H, T, D)
    return outputs.mean(dim=(1, 3))  # (L, H, D)


def _random_repeats(model: GPT, length: int, batch: int, seed: int, tokens: torch.Tensor | None) -> torch.Tensor:
    if not 2 <= length <= model.config.max_len // 2:
        raise ValueError(f"length={length} must lie in 2..max_len/2={model.config.max_len // 2}")
    if tokens is None:
        tokens = torch.arange(model.config.vocab_size)
    tokens = torch.as_tensor(tokens)
    if tokens.ndim != 1 or tokens.numel() < 2 or not bool(((tokens >= 0) & (tokens < model.config.vocab_size)).all()):
        raise ValueError(
            f"tokens must be a 1-D set of at least 2 ids in 0..{model.config.vocab_size - 1}, "
            f"got shape {tuple(tokens.shape)}"
        )
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, tokens.numel(), (batch, length), generator=generator)  # (B, length)
    first = tokens[picks]  # (B, length): drawn uniformly from ``tokens``
    return torch.cat([first, first], dim=1)  # (B, 2 length): the same random tokens twice


@torch.no_grad()
def repeated_tokens_losses(
    model: GPT, *, length: int = 50, batch: int = 32, seed: int = 0, tokens: torch.Tensor | None = None
) -> tuple[float, float]:
    """Mean loss (nats) on the first and on the second copy of random tokens repeated once.

    Olsson et al. (2022): random tokens cannot be predicted the first time (about ln V),
    but a model that has induction heads predicts the second copy from the first, and its
    loss there falls far below ln V. The first token of each copy is not scored. ``tokens``
    (default: the whole vocabulary) are the ids to draw from: pass those the model was
    trained on, or the test is mostly of embeddings it never learned.
    """
    _check(model, torch.zeros(1, 1, dtype=torch.long))
    idx = _random_repeats(model, length, batch, seed, tokens)  # (B, 2 length)
    logits = model(idx[:, :-1])  # (B, 2 length - 1, V)
    nats = F.cross_entropy(logits.transpose(1, 2), idx[:, 1:], reduction="none")  # (B, 2 length - 1)
    return float(nats[:, : length - 1].mean()), float(nats[:, length:].mean())


@torch.no_grad()
def prefix_matching_scores(
    model: GPT, *, length: int = 50, batch: int = 32, seed: int = 0, tokens: torch.Tensor | None = None
) -> torch.Tensor:
    """(L, H): each head's mean attention, on a repeated random sequence, to the token after an earlier copy.

    At position ``length + j`` (the second copy of token j) an induction head looks at
    position ``j + 1``, the token that followed the same token last time: its weight
    there, averaged over j and the batch, is the head's prefix-matching score (Olsson et
    al., 2022). A head that ignores the repeat scores about 1 / (number of keys).
    """
    _check(model, torch.zeros(1, 1, dtype=torch.long))
    idx = _random_repeats(model, length, batch, seed, tokens)  # (B, 2 length)
    maps = attention_maps(model, idx)  # (L, B, H, 2 length, 2 length)
    j = torch.arange(length - 1)  # second-copy queries length + j read key j + 1
    return maps[:, :, :, length + j, j + 1].mean(dim=(1, 3))  # (L, H)


def kv_bytes_per_token(model: GPT) -> int:
    """Bytes the KV cache grows by per token: keys and values of every layer's Hkv heads."""
    config = model.config
    element = model.embed.weight.element_size()
    return 2 * config.n_layers * config.n_kv_heads * config.head_dim * element


@torch.no_grad()
def decode_seconds(model: GPT, context: int, *, steps: int = 16, repeats: int = 3) -> float:
    """Seconds per cached decode step after a prompt of ``context`` tokens (best of ``repeats``)."""
    if context < 1 or context + steps > model.config.max_len:
        raise ValueError(f"context={context} + steps={steps} must fit in max_len={model.config.max_len}")
    prompt = torch.zeros(1, context, dtype=torch.long)  # (1, context)
    best = math.inf
    for _ in range(repeats):
        caches = model.new_caches(1, context + steps)
        model(prompt, caches=caches, last_only=True)  # prefill, not timed
        token = torch.zeros(1, 1, dtype=torch.long)  # (1, 1)
        start = time.perf_counter()
        for _ in range(steps):
            model(token, caches=caches, last_only=True)  # (1, 1, V)
        best = min(best, (time.perf_counter() - start) / steps)
    return best

"""Looking inside a trained ``lib.gpt.GPT``: its heads' attention weights and layer ablation (chapter 9).

Nothing here changes the model or hooks into it. Each function re-runs the model's own
public pieces (``embed``, each block's ``norm1``/``attn.project``/``ffn``, RoPE from
``lib.rope``) the way ``GPT.forward`` does, so it reads what the model computes without
touching ``lib.gpt``; the tests hold every re-run equal to the model's own forward pass.

    attention_maps(model, idx)        (L, H, T, T) weights of every layer and query head
    ablated_logits(model, idx, skip)  logits with the attention branch of some layers zeroed

Shape letters: B batch, T tokens, L layers, H query heads, Hkv key/value heads, D head width,
C d_model, V vocabulary.
"""

from __future__ import annotations

import math
import time

import torch

from lib.gpt import GPT
from lib.rope import rope_cos_sin, rotate_pairs

__all__ = ["attention_maps", "ablated_logits", "kv_bytes_per_token", "decode_seconds"]


def _check(model: object, idx: object) -> None:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a lib.gpt.GPT, got {type(model).__name__}")
    if not isinstance(idx, torch.Tensor) or idx.ndim != 2 or idx.dtype.is_floating_point:
        shape = tuple(idx.shape) if isinstance(idx, torch.Tensor) else type(idx).__name__
        raise ValueError(f"idx must be a (B, T) tensor of token ids, got {shape}")


def _rotation(model: GPT, n_tokens: int, dtype: torch.dtype):
    positions = torch.arange(n_tokens, device=model.freqs.device)  # (T,)
    return rope_cos_sin(positions, model.freqs, dtype)  # (T, D/2) cos and sin


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

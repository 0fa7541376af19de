"""A small decoder-only GPT from the book's parts, and its KV-cached generation (chapters 6 and 9).

    tokens -> embedding -> n_layers x Block -> RMSNorm -> linear head -> logits

Each layer is chapter 4's pre-norm ``Block`` (RMSNorm, SwiGLU, grouped-query attention),
called with the two things its attention branch takes: RoPE's rotation (chapter 3) of the
queries and keys at their absolute positions, and an optional ``KVCache`` (this chapter).

Generation runs in two phases (``GPT.generate``):
    prefill  the whole prompt in one pass; every layer caches its keys and values;
    decode   one new token per pass; its query reads the cache, its key and value join it.
Two details make the cached pass equal to recomputing everything:
    * positions: a new token is at position ``len(cache)``, not 0, and RoPE must turn it
      by that angle (keys are rotated before they are cached, so they are never rotated
      again);
    * the causal mask is aligned bottom-right: query i of the T new ones sits at position
      ``len(cache) + i`` and may read every cached key (``lib.attention``'s convention).

Shape letters used in the comments:
    B  batch     T  new tokens in this pass     L  tokens already cached
    C  d_model   H  query heads   Hkv  key/value heads   D  head width C / H   V  vocabulary
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch
import torch.nn as nn

from lib.blocks import Block, make_norm, swiglu_hidden
from lib.kv_cache import KVCache
from lib.rope import rope_cos_sin, rope_frequencies
from lib.validation import check_heads, non_negative_int, optional_positive_int, positive_int

__all__ = [
    "GPTConfig",
    "GPT",
    "sample_next",
    "count_parameters",
]


@dataclass
class GPTConfig:
    vocab_size: int = 256
    n_layers: int = 4
    d_model: int = 256
    n_heads: int = 8
    n_kv_heads: int = 2  # grouped-query attention: 4 query heads share each KV head
    max_len: int = 512  # longest sequence (prompt + generated) the model accepts
    # block options (chapter 4)
    hidden: int | None = None  # FFN width; None gives SwiGLU's ≈ 8d/3 (or 4d for an MLP)
    ffn: str = "swiglu"  # or "mlp"
    norm: str = "rms"  # or "layer"
    dropout: float = 0.0
    bias: bool = False  # biases in the projections (LLaMA-style models have none)
    rope_base: float = 10000.0
    tie_embeddings: bool = True  # the output head reuses the token embedding matrix

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layers", "d_model", "n_heads", "n_kv_heads", "max_len"):
            setattr(self, name, positive_int(f"GPTConfig.{name}", getattr(self, name)))
        check_heads(self.n_heads, self.n_kv_heads, self.d_model, where="GPTConfig")
        if self.head_dim % 2:
            raise ValueError(f"GPTConfig: RoPE rotates pairs, so the head width must be even, got {self.head_dim}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def ffn_hidden(self) -> int:
        if self.hidden is not None:
            return self.hidden
        return swiglu_hidden(self.d_model) if self.ffn == "swiglu" else 4 * self.d_model


def count_parameters(config: GPTConfig) -> int:
    """The parameter count of ``GPT(config)``, from the configuration alone.

    Per layer: q and out projections C·C each, k and v C·(Hkv·D) each (GQA shrinks them),
    the FFN (3·C·F for SwiGLU, 2·C·F for an MLP), and one or two norm vectors of C.
    """
    c, kv_width, f = config.d_model, config.n_kv_heads * config.head_dim, config.ffn_hidden
    norm_params = c if config.norm == "rms" else (2 * c if config.bias else c)
    attn = 2 * c * c + 2 * c * kv_width + (2 * c + 2 * kv_width if config.bias else 0)
    if config.ffn == "swiglu":
        ffn = 3 * c * f + (2 * f + c if config.bias else 0)
    else:
        ffn = 2 * c * f + (f + c if config.bias else 0)
    per_layer = attn + ffn + 2 * norm_params
    embedding = config.vocab_size * c
    head = 0 if config.tie_embeddings else config.vocab_size * c
    return config.n_layers * per_layer + embedding + norm_params + head


class GPT(nn.Module):
    """Decoder-only transformer: ``forward(idx)`` maps (B, T) token ids to (B, T, V) logits."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT expects a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(
            Block(config.d_model, config.n_heads, n_kv_heads=config.n_kv_heads, ffn=config.ffn,
                  hidden=config.ffn_hidden, norm=config.norm, norm_first=True, dropout=config.dropout,
                  bias=config.bias)
            for _ in range(config.n_layers)
        )  # fmt: skip
        self.norm = make_norm(config.norm, config.d_model, bias=config.bias)  # the final norm of a pre-norm stack
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight
        # RoPE's frequencies, in float32 whatever the module's dtype: a plain attribute, not a buffer,
        # so that model.to(torch.bfloat16) cannot round them (a bfloat16 frequency is off by up to
        # 0.4%, and the angle at position 4095 by up to 0.7 rad). The cos and sin tables are
        # computed from them in float64 once per device, dtype and length (``rotation``).
        self.freqs = rope_frequencies(config.head_dim, config.rope_base, dtype=torch.float32)  # (D/2,)
        self._rotations: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.apply(self._init_weights)
        # GPT-2's scaled init: each residual branch adds to the stream, so shrink its output layer.
        for block in self.blocks:
            for layer in (block.attn.out_proj, block.ffn.down_proj):
                nn.init.normal_(layer.weight, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def new_caches(self, batch: int, max_len: int | None = None) -> list[KVCache]:
        """One empty ``KVCache`` per layer, storing Hkv heads, in the model's dtype and device."""
        config, weight = self.config, self.embed.weight
        return [
            KVCache(batch, config.n_kv_heads, max_len or config.max_len, config.head_dim, dtype=weight.dtype,
                    device=weight.device)
            for _ in range(config.n_layers)
        ]  # fmt: skip

    def forward(
        self, idx: torch.Tensor, *, caches: list[KVCache] | None = None, last_only: bool = False
    ) -> torch.Tensor:
        """(B, T) token ids -> (B, T, V) logits (or (B, 1, V) with ``last_only``).

        With ``caches`` (from ``new_caches``), the T tokens continue the L already cached:
        they take positions L .. L + T - 1 and read the cache; their keys and values join it.
        """
        self._validate(idx, caches)
        start = len(caches[0]) if caches is not None else 0
        x = self.embed(idx)  # (B, T, C)
        rotation = self.rotation(start, idx.shape[1], x.device, x.dtype)  # (T, D/2) cos and sin, for every layer
        for i, block in enumerate(self.blocks):
            x = block(x, is_causal=True, rotation=rotation, cache=None if caches is None else caches[i])  # (B, T, C)
        if last_only:
            x = x[:, -1:]  # (B, 1, C): generation needs only the last position's logits
        return self.head(self.norm(x))  # (B, T, V)

    def rotation(
        self, start: int, n_tokens: int, device: torch.device | str, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE's (cos, sin) at positions start .. start + n_tokens - 1, (n_tokens, D/2) each, in ``dtype``.

        The tables for every position up to ``max_len`` are computed once per device, dtype and
        length, in float64 on the CPU from the float32 frequencies (float64 is slow on a GPU and
        missing on MPS), then moved and cast; each forward pass slices them (as gpt-fast and HF do).
        """
        start, n_tokens = non_negative_int("start", start), non_negative_int("n_tokens", n_tokens)
        length = self.config.max_len
        if start + n_tokens > length:
            raise ValueError(f"positions {start}..{start + n_tokens - 1} exceed max_len={length}")
        key = (torch.device(device), dtype, length)
        if key not in self._rotations:
            cos, sin = rope_cos_sin(torch.arange(length), self.freqs, torch.float64)  # (max_len, D/2) each
            self._rotations[key] = cos.to(device=device, dtype=dtype), sin.to(device=device, dtype=dtype)
        cos, sin = self._rotations[key]
        return cos[start : start + n_tokens], sin[start : start + n_tokens]

    def _validate(self, idx: object, caches: list[KVCache] | None) -> None:
        config = self.config
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"idx must be a torch.Tensor of token ids, got {type(idx).__name__}")
        if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.is_complex():
            raise TypeError(f"idx must hold integer token ids, got {idx.dtype}")
        if idx.ndim != 2 or idx.shape[1] == 0:
            raise ValueError(f"idx must have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= config.vocab_size):
            raise ValueError(
                f"token ids must lie in 0..{config.vocab_size - 1} (vocab_size), got {int(idx.min())}..{int(idx.max())}"
            )
        start = 0
        if caches is not None:
            if len(caches) != config.n_layers:
                raise ValueError(f"caches must hold one KVCache per layer ({config.n_layers}), got {len(caches)}")
            if caches[0].batch != idx.shape[0]:
                raise ValueError(f"the caches hold batch {caches[0].batch} but idx has shape {tuple(idx.shape)}")
            start = len(caches[0])
        if start + idx.shape[1] > config.max_len:
            raise ValueError(
                f"{start} cached + {idx.shape[1]} new tokens exceed max_len={config.max_len} (idx: {tuple(idx.shape)})"
            )

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        *,
        use_cache: bool = True,
        temperature: float = 0.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue each prompt of idx (B, T) by ``max_new_tokens``: returns (B, T + max_new_tokens).

        With the cache: one prefill pass over the prompt, then one single-token pass per new
        token. Without it: every step recomputes the whole sequence so far (the plain twin;
        greedy output is identical). Temperature 0 is greedy; otherwise sample from
        softmax(logits / temperature), restricted to the ``top_k`` likeliest tokens if given.
        Runs in eval mode (no dropout) and restores the training flag afterwards. Every
        argument is checked, even when ``max_new_tokens`` is 0 and nothing is sampled.
        """
        max_new_tokens = non_negative_int("max_new_tokens", max_new_tokens)
        temperature, top_k = _check_sampling(temperature, top_k)
        self._validate(idx, None)
        total = idx.shape[1] + max_new_tokens
        if total > self.config.max_len:
            raise ValueError(
                f"prompt of {idx.shape[1]} + {max_new_tokens} new tokens exceeds max_len={self.config.max_len}"
            )
        if max_new_tokens == 0:
            return idx.clone()
        was_training = self.training
        self.eval()
        try:
            caches = self.new_caches(idx.shape[0], total) if use_cache else None
            logits = self(idx, caches=caches, last_only=True)  # (B, 1, V): prefill
            tokens = idx  # (B, T)
            for step in range(max_new_tokens):
                next_token = sample_next(logits[:, -1], temperature=temperature, top_k=top_k, generator=generator)
                tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, T + step + 1)
                if step + 1 == max_new_tokens:
                    break
                if use_cache:
                    logits = self(next_token[:, None], caches=caches, last_only=True)  # (B, 1, V): decode
                else:
                    logits = self(tokens, last_only=True)  # (B, 1, V): the whole prefix again
        finally:
            self.train(was_training)
        return tokens


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(B, V) logits -> (B,) next token ids: greedy at temperature 0, else a (top-k) sample.

    ``top_k=1`` is greedy too, whatever the temperature: the argmax, which among tied logits
    is the first (lowest id), as at temperature 0.
    """
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
        raise ValueError(f"logits must be a tensor of shape (B, V), got {getattr(logits, 'shape', logits)!r}")
    temperature, top_k = _check_sampling(temperature, top_k)
    if temperature == 0 or top_k == 1:
        return logits.argmax(dim=-1)  # (B,)
    scaled = logits.float() / temperature  # (B, V)
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))  # (B, V): only the top k survive
    probs = torch.softmax(scaled, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]  # (B,)


def _check_sampling(temperature: object, top_k: object) -> tuple[float, int | None]:
    """temperature a finite number >= 0 (NaN or inf would sample uniformly), top_k a positive integer or None."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    return float(temperature), optional_positive_int("top_k", top_k)

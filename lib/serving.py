"""Serving memory: how many requests fit in a fixed KV budget, contiguous vs paged (chapter 6).

A server that reserves a contiguous cache per request must reserve the longest the
request could grow (``max_len``), because it cannot move a cache once decoding has
started. Most requests stop far short of that, so most of the reservation holds nothing.
A paged cache hands out blocks of ``block_size`` tokens as a sequence grows, so the only
waste is the unfilled tail of each sequence's last block (at most S - 1 slots).

This module fills one memory budget with a seeded mix of requests both ways, through the
real caches of ``lib.kv_cache`` (at a width of one number per token, since only the token
counts matter here), and measures:
    * how many requests fit at once;
    * what fraction of the reserved KV memory holds real tokens.

It is a snapshot, each request at its final length, admitted in arrival order until the
next one does not fit. A real server grows each sequence token by token and must preempt
or swap a sequence when blocks run out (Kwon et al., 2023); the snapshot shows the memory
side of that story without the scheduler.

Shape letters: T tokens of one request (prompt + output).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lib.kv_cache import CacheFullError, KVCache, PagedKVCache, blocks_needed, kv_cache_bytes

__all__ = [
    "Request",
    "sample_requests",
    "Occupancy",
    "fill_contiguous",
    "fill_paged",
    "prefix_sharing",
    "plot_occupancy",
    "plot_kv_memory",
]


@dataclass(frozen=True)
class Request:
    prompt_len: int
    output_len: int

    @property
    def total(self) -> int:
        return self.prompt_len + self.output_len


def sample_requests(
    n: int, *, max_len: int = 2048, prompt_median: int = 300, output_median: int = 200, seed: int = 0
) -> list[Request]:
    """``n`` requests with log-normal prompt and output lengths, each at most ``max_len`` in all.

    Log-normal because real traffic is skewed: most requests are short, a few are long.
    Seeded through ``torch.Generator``, so every machine gets the same mix.
    """
    if n < 1 or max_len < 2:
        raise ValueError(f"need n >= 1 and max_len >= 2, got n={n}, max_len={max_len}")
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(2, n, generator=generator, dtype=torch.float64)  # (2, n)
    prompts = (math.log(prompt_median) + 0.8 * noise[0]).exp().round().clamp(1, max_len - 1)  # (n,)
    outputs = (math.log(output_median) + 0.8 * noise[1]).exp().round().clamp(1, None)  # (n,)
    outputs = torch.minimum(outputs, max_len - prompts)  # a request stops at max_len
    return [Request(int(p), int(o)) for p, o in zip(prompts.tolist(), outputs.tolist(), strict=True)]


@dataclass(frozen=True)
class Occupancy:
    """One way of filling the budget: what fits, and how well the reserved memory is used."""

    policy: str
    budget_tokens: int  # KV slots the budget pays for (bytes / bytes per token)
    admitted: int  # requests that fit at once
    tokens: int  # slots that hold a real token
    reserved_tokens: int  # slots set aside for the admitted requests

    @property
    def used_fraction(self) -> float:
        return self.tokens / self.reserved_tokens if self.reserved_tokens else 0.0

    @property
    def wasted_fraction(self) -> float:
        return 1.0 - self.used_fraction


def fill_contiguous(requests: list[Request], *, budget_tokens: int, max_len: int) -> Occupancy:
    """Reserve a ``KVCache`` of ``max_len`` per request, in order, until the budget is spent."""
    caches, tokens = [], 0
    for request in requests:
        if (len(caches) + 1) * max_len > budget_tokens:
            break
        cache = KVCache(batch=1, kv_heads=1, max_len=max_len, head_dim=1)
        entries = torch.zeros(1, 1, request.total, 1)  # (B=1, Hkv=1, T, D=1)
        cache.append(entries, entries)
        caches.append(cache)
        tokens += len(cache)
    return Occupancy("contiguous", budget_tokens, len(caches), tokens, len(caches) * max_len)


def fill_paged(requests: list[Request], *, budget_tokens: int, block_size: int = 16) -> Occupancy:
    """Append each request to one ``PagedKVCache`` of the same budget until a block is missing."""
    cache = PagedKVCache(num_blocks=budget_tokens // block_size, block_size=block_size, kv_heads=1, head_dim=1)
    admitted = 0
    for request in requests:
        seq = cache.add_sequence()
        entries = torch.zeros(1, request.total, 1)  # (Hkv=1, T, D=1)
        try:
            cache.append(seq, entries, entries)
        except CacheFullError:
            cache.free(seq)
            break
        admitted += 1
    reserved = cache.blocks_in_use * block_size
    return Occupancy(f"paged (S={block_size})", budget_tokens, admitted, cache.tokens_stored(), reserved)


@dataclass(frozen=True)
class PrefixSharing:
    requests: int
    system_tokens: int
    blocks_without_sharing: int
    blocks_with_fork: int

    @property
    def blocks_saved(self) -> int:
        return self.blocks_without_sharing - self.blocks_with_fork


def prefix_sharing(system_tokens: int, user_lens: list[int], *, block_size: int = 16) -> PrefixSharing:
    """Blocks used by requests that share a system prompt: each prefilled alone vs forked from one.

    With ``fork`` the system prompt is prefilled once; every request shares its full blocks
    and copies only the partly filled last one when it writes its own tokens.
    """
    total = sum(blocks_needed(system_tokens + n, block_size) for n in user_lens) + 1
    cache = PagedKVCache(num_blocks=total, block_size=block_size, kv_heads=1, head_dim=1)
    system = cache.add_sequence()
    prompt = torch.zeros(1, system_tokens, 1)  # (Hkv=1, T, D=1)
    cache.append(system, prompt, prompt)
    for n in user_lens:
        request = cache.fork(system)
        own = torch.zeros(1, n, 1)  # (Hkv=1, T, D=1)
        cache.append(request, own, own)
    without = sum(blocks_needed(system_tokens + n, block_size) for n in user_lens)
    return PrefixSharing(len(user_lens), system_tokens, without, cache.blocks_in_use)


def plot_occupancy(results: list[Occupancy], ax=None):
    """Two bar charts: requests that fit at once, and the share of reserved memory holding tokens."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(1, 2, figsize=(8, 3.2))
    names = [r.policy for r in results]
    ax[0].bar(names, [r.admitted for r in results], color=["#999999", "#1f77b4", "#2ca02c", "#d62728"][: len(results)])
    ax[0].set_ylabel("requests served at once")
    ax[0].set_title(f"same KV budget ({results[0].budget_tokens:,} token slots)")
    ax[1].bar(names, [100 * r.used_fraction for r in results], color="#1f77b4")
    ax[1].set_ylabel("reserved KV memory holding tokens (%)")
    ax[1].set_ylim(0, 100)
    for axis in ax:
        axis.tick_params(axis="x", labelrotation=20)
    ax[0].figure.tight_layout()
    return ax


def plot_kv_memory(
    contexts: list[int], kv_heads: dict[str, int], *, layers: int, head_dim: int, batch: int = 1,
    bytes_per_element: int = 2, ax=None,
):  # fmt: skip
    """KV cache size (GiB) against cache length, one line per attention variant (name -> h_kv)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    for name, heads in kv_heads.items():
        sizes = [
            kv_cache_bytes(layers=layers, batch=batch, seq_len=n, kv_heads=heads, head_dim=head_dim,
                           bytes_per_element=bytes_per_element) / 2**30
            for n in contexts
        ]  # fmt: skip
        ax.plot(contexts, sizes, "o-", label=f"{name} (h_kv = {heads})")
    ax.set_xscale("log", base=2)
    ax.set_xticks(contexts, [f"{n:,}" for n in contexts])  # plain token counts, not powers of 2
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("cache length N (tokens)")
    ax.set_ylabel("KV cache (GiB)")
    ax.set_title(f"L={layers}, d_h={head_dim}, B={batch}, {bytes_per_element} bytes per element")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax

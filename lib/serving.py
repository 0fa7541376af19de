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

import dataclasses
import math
from dataclasses import dataclass

import torch

from lib.gpt import GPT
from lib.kv_cache import CacheFullError, KVCache, PagedKVCache, blocks_needed, kv_cache_bytes
from lib.validation import multiple_of, positive_int

__all__ = [
    "Request",
    "sample_requests",
    "Occupancy",
    "fill_contiguous",
    "fill_paged",
    "prefix_sharing",
    "plot_occupancy",
    "plot_kv_memory",
    "expected_paged_waste",
    "Breakdown",
    "contiguous_breakdown",
    "paged_breakdown",
    "mean_pool_kv_heads",
    "DistributionShift",
    "next_token_shift",
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


# --- where the memory goes: the derivation behind the measured fill ----------------------


def expected_paged_waste(lengths: list[int], block_size: int) -> float:
    """The share of a paged cache's reserved slots left empty, if each sequence's last block is
    on average half full: (S - 1)/2 empty slots per sequence against its mean length."""
    mean = sum(lengths) / len(lengths)
    empty = (block_size - 1) / 2
    return empty / (mean + empty)


@dataclass(frozen=True)
class Breakdown:
    """A KV budget's slots, by what they hold, mid-generation (Kwon et al. 2023, Figure 2's parts)."""

    policy: str
    token_states: int  # slots holding a token generated or read so far
    reserved: int  # slots set aside for tokens the request will still generate
    internal: int  # slots inside an allocation that no token will ever fill
    external: int  # free slots no allocation can use (too small a gap for another request)
    free: int  # slots still free for anyone
    admitted: int  # requests holding memory at this moment

    @property
    def budget(self) -> int:
        return self.token_states + self.reserved + self.internal + self.external + self.free

    def share(self, part: str) -> float:
        """``part``'s share of the memory given to requests (the free slots left out)."""
        used = self.budget - self.free
        return getattr(self, part) / used if used else 0.0


def _now(request: Request, progress: float) -> int:
    """Tokens a request holds when ``progress`` of its answer has been generated."""
    return request.prompt_len + math.floor(progress * request.output_len)


def contiguous_breakdown(
    requests: list[Request], *, budget_tokens: int, max_len: int, progress: float = 0.5
) -> Breakdown:
    """Each admitted request owns ``max_len`` contiguous slots, while ``progress`` of its answer is done.

    What it holds so far is token states; the rest of its final length is reserved (it will
    be used); beyond that, up to ``max_len``, internal fragmentation. Budget left over that
    is smaller than ``max_len`` can take no request: external fragmentation.
    """
    admitted = min(len(requests), budget_tokens // max_len)
    chosen = requests[:admitted]
    now = sum(_now(r, progress) for r in chosen)
    final = sum(r.total for r in chosen)
    left = budget_tokens - admitted * max_len
    external = left if admitted < len(requests) else 0
    free = left - external
    return Breakdown("contiguous", now, final - now, admitted * max_len - final, external, free, admitted)


def paged_breakdown(
    requests: list[Request], *, budget_tokens: int, block_size: int, progress: float = 0.5
) -> Breakdown:
    """The same moment in a paged cache: blocks are taken as tokens arrive, and any free block
    serves any sequence (no external fragmentation). The empty tail of a sequence's last block
    is reserved as far as the sequence's later tokens will fill it, and internal fragmentation
    beyond its final length. Requests are admitted in order while their current blocks fit, so
    a different, larger set than the contiguous layout's."""
    blocks_free = budget_tokens // block_size
    now = reserved = internal = admitted = 0
    for request in requests:
        tokens = _now(request, progress)
        blocks = blocks_needed(tokens, block_size)
        if blocks > blocks_free:
            break
        blocks_free -= blocks
        admitted += 1
        now += tokens
        tail = blocks * block_size - tokens
        later = min(tail, request.total - tokens)  # slots this sequence's own later tokens fill
        reserved += later
        internal += tail - later
    free = budget_tokens - now - reserved - internal
    return Breakdown(f"paged (S={block_size})", now, reserved, internal, 0, free, admitted)


# --- fewer KV heads without retraining ---------------------------------------------------


def mean_pool_kv_heads(model: GPT, n_kv_heads: int) -> GPT:
    """A copy of ``model`` with ``n_kv_heads`` KV heads, each the mean of the group it replaces.

    The conversion GQA's authors start from (Ainslie et al. 2023), before they "uptrain":
    the k and v projections of each run of consecutive KV heads are averaged, and every query
    head then reads the pooled head of its group. Nothing else changes, and nothing is trained.
    """
    config = model.config
    n_kv_heads = positive_int("n_kv_heads", n_kv_heads)
    why = "each pooled KV head is the mean of a whole group"
    multiple_of("the model's n_kv_heads", config.n_kv_heads, "n_kv_heads", n_kv_heads, why)
    pooled_config = dataclasses.replace(config, n_kv_heads=n_kv_heads)
    with torch.random.fork_rng(devices=[]):  # the fresh init is overwritten: leave the caller's RNG alone
        pooled = GPT(pooled_config)
    group = config.n_kv_heads // n_kv_heads
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith(("attn.k_proj.weight", "attn.v_proj.weight", "attn.k_proj.bias", "attn.v_proj.bias")):
            heads = tensor.unflatten(0, (n_kv_heads, group, config.head_dim))  # (Hkv', G, D, ...)
            tensor = heads.mean(dim=1).flatten(0, 1)  # (Hkv'·D, ...)
        state[name] = tensor
    pooled.load_state_dict(state)
    return pooled.train(model.training)


@dataclass(frozen=True)
class DistributionShift:
    loss_before: float  # held-out next-token cross-entropy (nats) of the first model
    loss_after: float  # the same for the second
    mean_kl: float  # mean over positions of KL(first || second), nats
    top1_agreement: float  # share of positions where both give the same likeliest token


@torch.no_grad()
def next_token_shift(before: GPT, after: GPT, ids: torch.Tensor, *, context: int, windows: int) -> DistributionShift:
    """How far ``after``'s next-token distributions move from ``before``'s on held-out text.

    Both read the same ``windows`` consecutive windows of ``context + 1`` tokens from the start
    of ``ids`` (as ``lib.training.evaluate`` does), scored on every position.
    """
    if ids.ndim != 1 or ids.numel() < windows * context + 1:
        raise ValueError(f"ids must be 1-D with at least windows·context + 1 = {windows * context + 1} tokens")
    starts = torch.arange(windows)[:, None] * context  # (W, 1)
    batch = ids[starts + torch.arange(context + 1)[None, :]]  # (W, context + 1)
    inputs, targets = batch[:, :-1], batch[:, 1:].flatten()  # (W, context), (W·context,)
    log_p = torch.log_softmax(before.eval()(inputs).flatten(0, 1).double(), dim=-1)  # (W·context, V)
    log_q = torch.log_softmax(after.eval()(inputs).flatten(0, 1).double(), dim=-1)  # (W·context, V)
    kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1)  # (W·context,)
    return DistributionShift(
        loss_before=float(-log_p.gather(1, targets[:, None]).mean()),
        loss_after=float(-log_q.gather(1, targets[:, None]).mean()),
        mean_kl=float(kl.mean()),
        top1_agreement=float((log_p.argmax(-1) == log_q.argmax(-1)).double().mean()),
    )

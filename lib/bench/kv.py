"""KV cache: time per generated token with the cache vs recomputing the whole prefix.

A small GPT (``lib.gpt``; 4 layers, d_model 256 by default) is prefilled with C random
tokens. Then, in turns, a few consecutive decode steps through the cache (each new token
reads the C or so cached keys and values; per token: their mean) and one step without it (a
full forward pass over the C tokens, which is what generation without a cache does for
every new token). Times are medians over
``--repeats`` rounds, and the speed-up is the median of the per-round ratios, so a
machine that slows down between rounds moves both sides together.

As gpt-fast does, it also prints the memory bandwidth a cached step reaches: the bytes the
step must read (every weight, and the cached keys and values of every layer) over its time.
A large model on a GPU runs close to the hardware's bandwidth; this small one on a CPU
mostly pays fixed costs per layer, and the figure shows how far it is from that bound.

    python -m lib.bench kv                        # contexts 256 .. 2048
    python -m lib.bench kv --contexts 2048 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch

from lib.gpt import GPT, GPTConfig
from lib.kv_cache import kv_cache_bytes
from lib.machine import machine


@dataclass(frozen=True)
class DecodeTiming:
    context: int  # tokens already in the sequence when one more is generated
    cached_ms: float  # median time of one decode step through the KV cache
    recompute_ms: float  # median time of one full forward pass over the context
    speedup: float  # median over rounds of recompute / cached


def build_model(
    *, layers: int = 4, d_model: int = 256, heads: int = 8, kv_heads: int = 2, vocab: int = 512, max_len: int = 2048,
    seed: int = 0,
) -> GPT:  # fmt: skip
    torch.manual_seed(seed)
    config = GPTConfig(
        vocab_size=vocab, n_layers=layers, d_model=d_model, n_heads=heads, n_kv_heads=kv_heads, max_len=max_len
    )
    return GPT(config).eval()


@torch.no_grad()
def decode_timings(
    model: GPT, contexts: list[int], *, repeats: int = 5, seed: int = 0, threads: int | None = None
) -> list[DecodeTiming]:
    """Per-token decode time with and without the cache at each context length, measured in turns.

    ``threads`` sets torch's intra-op threads for the measurement (and restores them after):
    on a machine shared with other jobs, one thread gives steadier times than several that
    wait on each other.
    """
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _measure(model, contexts, repeats=repeats, seed=seed)
    finally:
        torch.set_num_threads(previous)


# Generation runs decode steps back to back, so each round times a few in a row (per token:
# their mean), then one recomputation of the whole prefix. A single decode step timed right
# after a recomputation would also pay for the caches the recomputation evicted.
STEPS_PER_ROUND = 8


def _measure(model: GPT, contexts: list[int], *, repeats: int, seed: int) -> list[DecodeTiming]:
    generator = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    # Warm up both paths once, untimed: the first calls pay one-time costs (allocations,
    # kernel selection) that would otherwise inflate whichever context is measured first.
    warm = torch.zeros(1, max(1, min(8, model.config.max_len - 1)), dtype=torch.long)  # (1, W)
    model(warm, last_only=True)
    if warm.shape[1] < model.config.max_len:
        warm_caches = model.new_caches(1, warm.shape[1] + 1)
        model(warm, caches=warm_caches, last_only=True)
        model(warm[:, :1], caches=warm_caches, last_only=True)
    rows = []
    for context in contexts:
        if context + repeats * STEPS_PER_ROUND > model.config.max_len:
            raise ValueError(
                f"context {context} + {repeats * STEPS_PER_ROUND} decode steps exceed max_len={model.config.max_len}"
            )
        prompt = torch.randint(0, vocab, (1, context), generator=generator)  # (1, C)
        caches = model.new_caches(1, context + repeats * STEPS_PER_ROUND)
        model(prompt, caches=caches, last_only=True)  # prefill, not timed (it also warms up this length)
        cached, recomputed = [], []
        for _ in range(repeats):
            tokens = torch.randint(0, vocab, (STEPS_PER_ROUND, 1, 1), generator=generator)  # (S, 1, 1)
            start = time.perf_counter()
            for token in tokens:  # consecutive decode steps, as generation runs them
                model(token, caches=caches, last_only=True)  # one token reads the cached context
            cached.append((time.perf_counter() - start) / STEPS_PER_ROUND)
            start = time.perf_counter()
            model(prompt, last_only=True)  # no cache: the whole prefix again
            recomputed.append(time.perf_counter() - start)
        rows.append(
            DecodeTiming(
                context=context,
                cached_ms=1e3 * statistics.median(cached),
                recompute_ms=1e3 * statistics.median(recomputed),
                speedup=statistics.median(r / c for r, c in zip(recomputed, cached, strict=True)),
            )
        )
    return rows


def decode_step_bytes(model: GPT, context: int) -> int:
    """Bytes one cached decode step reads at least: every parameter once (a tied matrix once),
    and ``context`` tokens' keys and values in every layer."""
    config = model.config
    weights = sum(p.numel() * p.element_size() for p in model.parameters())  # parameters() lists a tied one once
    cache = kv_cache_bytes(
        layers=config.n_layers, batch=1, seq_len=context, kv_heads=config.n_kv_heads, head_dim=config.head_dim,
        bytes_per_element=model.embed.weight.element_size(),
    )  # fmt: skip
    return weights + cache


def effective_gb_per_s(model: GPT, row: DecodeTiming) -> float:
    """The bandwidth a cached step reached: its bytes over its median time, in GB/s (10^9 bytes)."""
    return decode_step_bytes(model, row.context) / (row.cached_ms / 1e3) / 1e9


def format_rows(rows: list[DecodeTiming], model: GPT | None = None) -> list[str]:
    """The table, one row per context; with ``model``, also the effective GB/s of the cached step."""
    header = f"{'context':>8} {'cached ms/token':>16} {'recompute ms/token':>19} {'recompute / cached':>19}"
    lines = [header + (f" {'GB/s':>6}" if model is not None else "")]
    for r in rows:
        line = f"{r.context:8d} {r.cached_ms:16.2f} {r.recompute_ms:19.2f} {r.speedup:18.1f}x"
        lines.append(line + (f" {effective_gb_per_s(model, r):6.2f}" if model is not None else ""))
    return lines


def plot_decode_timings(rows: list[DecodeTiming], ax=None):
    """Time per generated token vs context length, with and without the cache (log-log)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    contexts = [r.context for r in rows]
    ax.plot(contexts, [r.recompute_ms for r in rows], "o-", label="no cache: recompute the prefix")
    ax.plot(contexts, [r.cached_ms for r in rows], "s-", label="KV cache: one token reads the cache")
    ax.set_xscale("log", base=2)
    ax.set_xticks(contexts, [f"{c:,}" for c in contexts])  # plain token counts, not powers of 2
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_yscale("log")
    ax.set_xlabel("context length N (tokens in the sequence so far)")
    ax.set_ylabel("time per new token (ms)")
    ax.set_title("Decode time per token (measured on this machine)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return ax


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--contexts", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, help="torch threads while timing (default: torch's own choice)")


def main(args: argparse.Namespace) -> list[DecodeTiming]:
    threads = args.threads or torch.get_num_threads()
    model = build_model(
        layers=args.layers, d_model=args.d_model, heads=args.heads, kv_heads=args.kv_heads, vocab=args.vocab,
        max_len=max(args.contexts) + args.repeats * STEPS_PER_ROUND,
    )  # fmt: skip
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"GPT: {args.layers} layers, d_model={args.d_model}, {args.heads} heads / {args.kv_heads} KV heads, "
        f"{n_params / 1e6:.2f}M parameters, torch {torch.__version__}, {threads} threads"
    )
    print(machine())
    rows = decode_timings(model, args.contexts, repeats=args.repeats, threads=args.threads)
    print("\n".join(format_rows(rows, model)))
    print(
        "GB/s: the bytes a cached step must read (weights + the context's keys and values) over its time; "
        "compare with the memory bandwidth of this machine."
    )
    last = rows[-1]
    print(
        f"\nAt context {last.context}: a decode step with the KV cache is {last.speedup:.0f}x faster per token "
        "than recomputing the prefix (median of side-by-side ratios)."
    )
    return rows

"""The capstone GPT's training step vs a nanoGPT-style model of the same size, side by side.

    python -m lib.bench step                  # the capstone's sizes, batch 16 x 128 tokens, 1 thread
    python -m lib.bench step --profile        # also where the time goes, op by op, in both models

The reference (``NanoGPTStyle``, below) is nanoGPT's ``model.py`` at the capstone's own sizes,
grouped-query heads included: learned absolute positions, LayerNorm without bias, one fused
qkv projection, SDPA, a 4d GELU MLP, a tied head. The capstone (``lib.gpt.GPT``) differs in
the elementwise parts: RoPE, RMSNorm and SwiGLU (with 8d/3 hidden, so the matmuls match).

A step is what ``lib.training.train`` does: forward, cross-entropy, backward, gradient
clipping, AdamW. One round runs each model's step once; the printed ratio is the median
over rounds of time(capstone) / time(reference), measured side by side, so a busy machine
slows both alike. ``--profile`` sums torch.profiler's self CPU time by op for each model
and prints the ops whose totals differ most: the make-up of the gap.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.bench.attention import device_name, paired_ratio, time_round_robin
from lib.capstone import CAPSTONE_MODEL, CAPSTONE_TRAINING
from lib.gpt import GPT, GPTConfig

VOCAB = 512  # about the capstone tokenizer's vocabulary; the step time hardly depends on it


class NanoGPTStyle(nn.Module):
    """nanoGPT's GPT (Karpathy), with grouped-query heads: (B, T) ids -> (B, T, V) logits."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        c, heads, kv_heads = config.d_model, config.n_heads, config.n_kv_heads
        self.n_heads, self.n_kv_heads, self.head_dim = heads, kv_heads, config.head_dim
        self.wte = nn.Embedding(config.vocab_size, c)
        self.wpe = nn.Embedding(config.max_len, c)  # learned absolute positions
        self.layers = nn.ModuleList(
            nn.ModuleDict({
                "ln_1": nn.LayerNorm(c, bias=False),
                "c_attn": nn.Linear(c, c + 2 * kv_heads * self.head_dim, bias=False),  # q, k, v in one matmul
                "c_proj": nn.Linear(c, c, bias=False),
                "ln_2": nn.LayerNorm(c, bias=False),
                "c_fc": nn.Linear(c, 4 * c, bias=False),
                "mlp_proj": nn.Linear(4 * c, c, bias=False),
            })
            for _ in range(config.n_layers)
        )  # fmt: skip
        self.ln_f = nn.LayerNorm(c, bias=False)
        self.lm_head = nn.Linear(c, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as nanoGPT
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        batch, tokens = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(tokens, device=idx.device))  # (B, T, C)
        kv_width = self.n_kv_heads * self.head_dim
        for layer in self.layers:
            h = layer["ln_1"](x)
            q, k, v = layer["c_attn"](h).split([x.shape[-1], kv_width, kv_width], dim=-1)
            q = q.view(batch, tokens, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
            k = k.view(batch, tokens, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
            v = v.view(batch, tokens, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, H, T, D)
            x = x + layer["c_proj"](y.transpose(1, 2).reshape(batch, tokens, -1))
            x = x + layer["mlp_proj"](F.gelu(layer["c_fc"](layer["ln_2"](x))))
        return self.lm_head(self.ln_f(x))  # (B, T, V)


def training_step(model: nn.Module, batch: torch.Tensor) -> Callable[[], None]:
    """One step as lib.training.train takes it (AdamW at the capstone's learning rate, clipping at 1)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=CAPSTONE_TRAINING.lr, betas=(0.9, 0.95))
    inputs, targets = batch[:, :-1], batch[:, 1:]

    def step() -> None:
        logits = model(inputs)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CAPSTONE_TRAINING.grad_clip)
        optimizer.step()

    return step


def make_models(seed: int = 0) -> tuple[GPT, NanoGPTStyle]:
    config = GPTConfig(vocab_size=VOCAB, **CAPSTONE_MODEL)
    torch.manual_seed(seed)
    return GPT(config).train(), NanoGPTStyle(config).train()


def op_totals(step: Callable[[], None], steps: int) -> dict[str, float]:
    """Self CPU milliseconds per op name over ``steps`` steps (after one warm-up step)."""
    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            step()
    totals: dict[str, float] = defaultdict(float)
    for event in profiler.key_averages():
        totals[event.key] += event.self_cpu_time_total / 1e3 / steps
    return totals


def print_gap(ours: dict[str, float], theirs: dict[str, float], top: int) -> None:
    """The ops whose per-step self time differs most between the two models, largest first."""
    total_ours, total_theirs = sum(ours.values()), sum(theirs.values())
    print(f"\nprofiled self CPU time per step: capstone {total_ours:.1f} ms, reference {total_theirs:.1f} ms, "
          f"gap {total_ours - total_theirs:+.1f} ms")  # fmt: skip
    difference = {name: ours.get(name, 0.0) - theirs.get(name, 0.0) for name in set(ours) | set(theirs)}
    print(f"  {'op':42} {'capstone ms':>12} {'reference ms':>13} {'difference':>11}")
    for name in sorted(difference, key=lambda name: -abs(difference[name]))[:top]:
        print(f"  {name[:42]:42} {ours.get(name, 0.0):12.2f} {theirs.get(name, 0.0):13.2f} {difference[name]:+11.2f}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=CAPSTONE_TRAINING.batch_size)
    parser.add_argument("--context", type=int, default=CAPSTONE_TRAINING.context)
    parser.add_argument("--repeats", type=int, default=30, help="rounds (one step of each model per round)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the capstone trains on 1)")
    parser.add_argument("--profile", action="store_true", help="also print the per-op make-up of the gap")
    parser.add_argument("--top", type=int, default=15, help="ops shown by --profile")


def main(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    ours, theirs = make_models()
    n_ours = sum(p.numel() for p in ours.parameters())
    n_theirs = sum(p.numel() for p in theirs.parameters())
    batch = torch.randint(0, VOCAB, (args.batch, args.context + 1), generator=torch.Generator().manual_seed(1))
    cases = {"capstone": training_step(ours, batch), "reference": training_step(theirs, batch)}
    print(f"{device_name('cpu')}, torch {torch.__version__}; B={args.batch}, T={args.context}, "
          f"{CAPSTONE_MODEL}; parameters: capstone {n_ours:,}, reference {n_theirs:,}")  # fmt: skip
    times = time_round_robin(cases, args.repeats, "cpu")
    for name, seconds in times.items():
        print(f"  {name:9} median {statistics.median(seconds) * 1e3:8.2f} ms per step")
    ratio = paired_ratio(times, "capstone", "reference")
    spread = statistics.quantiles([a / b for a, b in zip(times["capstone"], times["reference"], strict=True)], n=4)
    print(f"capstone / reference step time = {ratio:.3f} (quartiles over rounds {spread[0]:.3f} .. {spread[2]:.3f})")
    if args.profile or ratio > 1.1:
        print_gap(op_totals(cases["capstone"], 5), op_totals(cases["reference"], 5), args.top)
    if not math.isfinite(ratio):
        raise SystemExit("no ratio: a step failed to time")

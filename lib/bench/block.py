"""Our pre-norm Block vs nn.TransformerEncoderLayer, forward + backward, side by side.

    python -m lib.bench block                       # B=8, N=256, d=512, 8 heads, CPU, fp32
    python -m lib.bench block --norms               # also LayerNorm vs RMSNorm on (B·N, d)

Both layers hold the same weights (``Block.from_torch``), train mode, dropout 0, and a
causal mask unless ``--full``. One round runs each case once; the printed ratio is the
median over rounds of time(ours) / time(torch), measured side by side, so a busy machine
slows both alike. Absolute milliseconds are printed for orientation only.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.bench.attention import device_name, paired_ratio, time_round_robin
from lib.blocks import Block, layer_norm, rms_norm


def make_layers(d_model: int, n_heads: int, seed: int = 0) -> tuple[nn.TransformerEncoderLayer, Block]:
    """torch's pre-norm layer with GELU and a 4d FFN, and our Block holding the same weights."""
    torch.manual_seed(seed)
    theirs = nn.TransformerEncoderLayer(
        d_model, n_heads, 4 * d_model, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    ours = Block.from_torch(theirs)
    assert ours.attn.fused, "the benchmark times the fused (SDPA) attention path"
    return theirs, ours


def forward_backward_cases(batch: int, tokens: int, d_model: int, n_heads: int, causal: bool) -> dict[str, Callable]:
    """name -> a zero-argument callable running one forward and backward pass of that layer."""
    theirs, ours = make_layers(d_model, n_heads)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, tokens, d_model, generator=gen).requires_grad_()  # (B, N, d)
    upstream = torch.randn(batch, tokens, d_model, generator=gen)  # (B, N, d): dLoss/dY
    src_mask = nn.Transformer.generate_square_subsequent_mask(tokens) if causal else None  # (N, N)

    def run_theirs() -> None:
        x.grad = None
        theirs.zero_grad(set_to_none=True)
        theirs(x, src_mask=src_mask, is_causal=causal).backward(upstream)

    def run_ours() -> None:
        x.grad = None
        ours.zero_grad(set_to_none=True)
        ours(x, is_causal=causal).backward(upstream)

    with torch.no_grad():  # the same function, or the timing compares different work
        difference = (ours(x, is_causal=causal) - theirs(x, src_mask=src_mask, is_causal=causal)).abs().max()
    if difference > 1e-4:
        raise AssertionError(f"our Block and torch's layer disagree by {difference:.2e}")
    return {"ours": run_ours, "torch": run_theirs}


def norm_cases(rows: int, d: int, *, backward: bool = False) -> dict[str, Callable]:
    """LayerNorm and RMSNorm on one (rows, d) input: torch's kernels and our plain twins."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(rows, d, generator=gen).requires_grad_(backward)  # (rows, d)
    weight, bias = torch.ones(d), torch.zeros(d)  # (d,), (d,)
    functions = {
        "LayerNorm (F.layer_norm)": lambda: F.layer_norm(x, (d,), weight, bias, 1e-5),
        "RMSNorm (F.rms_norm)": lambda: F.rms_norm(x, (d,), weight, 1e-6),
        "LayerNorm (plain)": lambda: layer_norm(x, weight, bias, 1e-5),
        "RMSNorm (plain)": lambda: rms_norm(x, weight, 1e-6),
    }
    if not backward:
        return functions

    def with_backward(fn: Callable) -> Callable:
        def run() -> None:
            x.grad = None
            fn().sum().backward()

        return run

    return {name: with_backward(fn) for name, fn in functions.items()}


def time_norms(rows: int, d: int, repeats: int, *, backward: bool = False) -> dict[str, float]:
    """Median milliseconds per call of each norm, the four taking turns in every round."""
    cases = norm_cases(rows, d, backward=backward)
    inner = 20  # calls per timed sample: one norm call is far below the timer's resolution

    def batched(fn: Callable) -> Callable:
        def run() -> None:
            for _ in range(inner):
                fn()

        return run

    times = time_round_robin({name: batched(fn) for name, fn in cases.items()}, repeats, "cpu")
    return {name: statistics.median(samples) * 1e3 / inner for name, samples in times.items()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--full", action="store_true", help="no causal mask")
    parser.add_argument("--norms", action="store_true", help="also time LayerNorm vs RMSNorm on (B·N, d)")


def main(args: argparse.Namespace) -> None:
    causal = not args.full
    print(
        f"{device_name('cpu')}, torch {torch.__version__}, fp32, B={args.batch}, N={args.tokens}, "
        f"d={args.d_model}, heads={args.heads}, FFN 4d GELU, pre-norm, {'causal' if causal else 'full'}"
    )
    cases = forward_backward_cases(args.batch, args.tokens, args.d_model, args.heads, causal)
    times = time_round_robin(cases, args.repeats, "cpu")
    for name, samples in times.items():
        print(f"  {name:6} forward+backward  {statistics.median(samples) * 1e3:9.2f} ms (median of {len(samples)})")
    print(f"ours / torch time = {paired_ratio(times, 'ours', 'torch'):.2f}  (median of per-round ratios)")
    if args.norms:
        rows = args.batch * args.tokens
        for backward in (False, True):
            medians = time_norms(rows, args.d_model, args.repeats, backward=backward)
            label = "forward+backward" if backward else "forward"
            print(f"norms on ({rows}, {args.d_model}), {label}:")
            for name, ms in medians.items():
                print(f"  {name:26} {ms:8.3f} ms")

"""MultiHeadAttention (fused and plain) against nn.MultiheadAttention, side by side in one run.

    python -m lib.bench mha                      # B=8, N=512, d=512, h=8, CPU, fp32, eval mode
    python -m lib.bench mha --tokens 128 --repeats 5

Both modules share the same weights (``MultiHeadAttention.from_torch``) and run in eval mode
under ``torch.inference_mode``; torch's module is called with ``need_weights=False`` on one
tensor as query, key and value, so that its fast path may use fused SDPA rather than
materialise the weights. The modules take
turns in every round; the printed ratio is the median over rounds of time(ours) / time(torch),
measured side by side, which a noisy machine moves much less than each median. The chapter's
bar for the fused path is a ratio of at most 1.2.
"""

from __future__ import annotations

import argparse
import datetime
import statistics

import torch
from torch import nn

from lib.attention import MultiHeadAttention
from lib.bench.attention import device_name, paired_ratio, time_round_robin

BAR = 1.2  # the fused path may take at most this multiple of nn.MultiheadAttention's time
BAR_SIZE = (8, 512, 512, 8)  # (B, N, d, h) at which the bar applies


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=8, help="batch size B (default 8)")
    parser.add_argument("--tokens", type=int, default=512, help="sequence length N (default 512)")
    parser.add_argument("--d-model", type=int, default=512, help="model width d (default 512)")
    parser.add_argument("--heads", type=int, default=8, help="heads h (default 8)")
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds (default 20)")
    parser.add_argument("--causal", action="store_true", help="also time a causal self-attention")
    parser.add_argument("--no-plain", action="store_true", help="leave out the plain (reference) path")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--seed", type=int, default=0)


def build(args: argparse.Namespace) -> tuple[nn.MultiheadAttention, MultiHeadAttention, torch.Tensor]:
    """torch's module, our copy of it, and the input (B, N, d), all on ``args.device``."""
    torch.manual_seed(args.seed)
    theirs = nn.MultiheadAttention(args.d_model, args.heads, batch_first=True).to(args.device).eval()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    gen = torch.Generator(device=args.device).manual_seed(args.seed)
    x = torch.randn(args.batch, args.tokens, args.d_model, generator=gen, device=args.device)  # (B, N, d)
    return theirs, ours, x


def cases(args: argparse.Namespace, theirs, ours, x) -> dict[str, object]:
    """name -> zero-argument callable. Ours switches paths through its ``fused`` flag."""

    def torch_module(attn_mask=None, is_causal=False):
        return theirs(x, x, x, need_weights=False, attn_mask=attn_mask, is_causal=is_causal)[0]

    def ours_with(fused: bool, is_causal: bool = False):
        def run():
            ours.fused = fused
            return ours(x, is_causal=is_causal)

        return run

    table = {"torch nn.MultiheadAttention": torch_module, "ours, fused (SDPA)": ours_with(True)}
    if not args.no_plain:
        table["ours, plain (attention)"] = ours_with(False)
    if args.causal:
        blocked = torch.ones(args.tokens, args.tokens, dtype=torch.bool, device=args.device).triu(1)
        table["torch, causal"] = lambda: torch_module(blocked, True)
        table["ours, fused, causal"] = ours_with(True, True)
    return table


def main(args: argparse.Namespace) -> dict[str, float]:
    """Print the table and the ratios; return {name: median seconds} and the fused ratio."""
    theirs, ours, x = build(args)
    table = cases(args, theirs, ours, x)
    print(
        f"{device_name(args.device)}, torch {torch.__version__}, {datetime.date.today().isoformat()}\n"
        f"B={args.batch} N={args.tokens} d={args.d_model} h={args.heads}, fp32, eval, "
        f"inference_mode, {args.repeats} interleaved rounds"
    )
    with torch.inference_mode():  # each of ours against torch's module on the same input and mask
        references = {False: "torch nn.MultiheadAttention", True: "torch, causal"}
        outputs = {name: run() for name, run in table.items()}
        for name, output in outputs.items():
            reference = references["causal" in name]
            if name.startswith("ours"):
                difference = (output - outputs[reference]).abs().max().item()
                print(f"  max |{name} - {reference}| = {difference:.2e}")
        times = time_round_robin(table, args.repeats, args.device)
    results = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in results.items():
        print(f"  {name:30} {seconds * 1e3:9.2f} ms (median)")
    ratio = paired_ratio(times, "ours, fused (SDPA)", "torch nn.MultiheadAttention")
    if (args.batch, args.tokens, args.d_model, args.heads) == BAR_SIZE:
        verdict = f"{'within' if ratio <= BAR else 'OVER'} the {BAR}x bar"
    else:
        verdict = f"the {BAR}x bar is set at B, N, d, h = {BAR_SIZE}"
    print(f"ours fused / torch time: {ratio:.2f}x ({verdict})")
    results["fused_ratio"] = ratio
    if "ours, plain (attention)" in times:
        plain = paired_ratio(times, "ours, plain (attention)", "torch nn.MultiheadAttention")
        print(f"ours plain / torch time: {plain:.2f}x")
    if args.causal:
        print(f"causal, ours fused / torch time: {paired_ratio(times, 'ours, fused, causal', 'torch, causal'):.2f}x")
    return results

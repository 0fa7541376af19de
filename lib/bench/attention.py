"""Attention implementations side by side: time and peak memory against sequence length.

    python -m lib.bench attention                  # CPU, fp32, N = 512 .. 8192
    python -m lib.bench attention --device cuda    # GPU, bf16, N = 512 .. 32768, d = 64 and 128
    python -m lib.bench attention --sweep          # tiled block sizes at N = 4096 (CPU)
    python -m lib.bench attention --window 256     # dense vs windowed tiled vs linear, N = 1024 .. 8192

B = 1, 8 heads. Time is the median of ``--repeats`` calls, the implementations taking turns
in every round so that a noisy neighbour slows them all alike. Peak memory is the rise above
the inputs: ``torch.cuda.max_memory_allocated`` on a GPU; on a CPU, the rise of the peak
resident set (VmHWM, reset through /proc/self/clear_refs) in a fresh subprocess per point.
Results, with device, torch version and date, go to a CSV outside the repository by default
(``$TMPDIR/transformers-book-bench/``), so that a reader's run never changes what the book
shows; ``--record`` writes the book's own ``chapters/results/attention_<device>.csv`` (or
``attention_window_<device>.csv``), which chapter 5 reads; ``--out`` names any other path.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import functools
import gc
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from lib.attention import attention
from lib.linear_attention import linear_attention
from lib.tiled_softmax import tiled_attention

RESULTS = Path(__file__).resolve().parents[2] / "chapters" / "results"
SCRATCH = Path(tempfile.gettempdir()) / "transformers-book-bench"  # a run's CSV, unless --record or --out


def output_path(args: argparse.Namespace, name: str) -> Path:
    """Where a run writes its CSV ``name``: --out, else the book's results with --record, else SCRATCH."""
    if args.out:
        return Path(args.out)
    if args.record:
        return RESULTS / name
    SCRATCH.mkdir(parents=True, exist_ok=True)
    return SCRATCH / name


N_HEADS = 8
NAIVE_MAX_N = {"cpu": 8192, "cuda": 16384}  # beyond this the naive score matrix is tens of GB


def implementations(device: str) -> dict[str, Callable]:
    """name -> f(q, k, v, is_causal). On CUDA each SDPA backend is pinned, and left out if it
    cannot run (the benchmark records what ran, not what was asked for)."""
    impls: dict[str, Callable] = {
        "naive": lambda q, k, v, c: attention(q, k, v, is_causal=c),
        "tiled": lambda q, k, v, c: tiled_attention(q, k, v, is_causal=c),
        "sdpa": lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c),
    }
    if device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        from lib.triton_attention import TRITON_MISSING, triton_attention

        if not TRITON_MISSING:
            impls["triton"] = lambda q, k, v, c: triton_attention(q, k, v, is_causal=c, block_q=128, block_k=64)
        for backend in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
            impls[f"sdpa-{backend.split('_')[0].lower()}"] = functools.partial(
                _pinned_sdpa, sdpa_kernel, getattr(SDPBackend, backend)
            )
        del impls["sdpa"]  # the pinned backends replace the dispatcher's choice
    return impls


def _pinned_sdpa(sdpa_kernel, backend, q, k, v, is_causal):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def make_inputs(n: int, head_dim: int, dtype: torch.dtype, device: str, seed: int = 0):
    gen = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(1, N_HEADS, n, head_dim, generator=gen, device=device, dtype=dtype) for _ in range(3)]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_round_robin(cases: dict, repeats: int, device: str) -> dict[object, list[float]]:
    """Seconds per case (a zero-argument callable) in each round: every case runs once per
    round, after one warm-up call, so two cases' times in a round come from the same moment."""
    times: dict = {}
    for key, run_case in cases.items():
        try:
            run_case()
            _sync(device)
            times[key] = []
        except RuntimeError as error:  # e.g. an SDPA backend that does not support these inputs
            print(f"  {key}: skipped ({str(error).splitlines()[0][:80]})")
    for _ in range(repeats):
        for key in times:
            start = time.perf_counter()
            cases[key]()
            _sync(device)
            times[key].append(time.perf_counter() - start)
    return times


def paired_ratio(times: dict, a, b) -> float:
    """Median over rounds of time(a) / time(b): a ratio measured side by side, which a machine
    that speeds up and slows down between rounds does not move the way it moves each median."""
    return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))


def peak_extra_bytes_cuda(fn: Callable, inputs, is_causal: bool) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn(*inputs, is_causal)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def _status_kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))


def _probe_cpu_memory(name: str, n: int, head_dim: int, is_causal: bool) -> int:
    """In this (fresh) process: the rise of peak RSS over the inputs while ``name`` runs once."""
    fn = implementations("cpu")[name]
    fn(*make_inputs(64, head_dim, torch.float32, "cpu"), is_causal)  # load code paths first
    inputs = make_inputs(n, head_dim, torch.float32, "cpu")
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _status_kib("VmRSS")
    fn(*inputs, is_causal)
    return (_status_kib("VmHWM") - before) * 1024


def peak_extra_bytes_cpu(name: str, n: int, head_dim: int, is_causal: bool) -> int | None:
    if not Path("/proc/self/clear_refs").exists():
        return None  # not Linux: no way to reset the peak RSS
    command = [sys.executable, "-m", "lib.bench.attention", "--probe", name, str(n), str(head_dim), str(int(is_causal))]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return int(result.stdout.strip().splitlines()[-1])


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    cpuinfo = Path("/proc/cpuinfo")
    model = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text()) if cpuinfo.exists() else None
    name = model.group(1).strip() if model else (platform.processor() or platform.machine())
    return f"{name}, {torch.get_num_threads()} threads"


def run(args: argparse.Namespace) -> list[dict]:
    device = args.device
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    sizes = args.sizes or (
        [512, 1024, 2048, 4096, 8192] if device == "cpu" else [512, 1024, 2048, 4096, 8192, 16384, 32768]
    )
    head_dims = args.head_dims or ([64] if device == "cpu" else [64, 128])
    impls = implementations(device)
    today = datetime.date.today().isoformat()
    machine = device_name(device)  # not `name`: the loops below name implementations
    print(f"{machine}, torch {torch.__version__}, {dtype}, B=1, heads={N_HEADS}, {today}")
    rows: list[dict] = []
    round_times: dict[tuple[int, int], dict] = {}  # (head_dim, n) -> the fast cases' times per round
    for head_dim in head_dims:
        for n in sizes:
            inputs = make_inputs(n, head_dim, dtype, device)
            # Full and causal, every implementation, in the same rounds. The naive kernels allocate
            # gigabytes per call, which disturbs the caches and page tables of whatever runs next:
            # they take their turns among themselves.
            slow_names = ("naive", "sdpa-math")
            cases = {
                (name, is_causal): functools.partial(fn, *inputs, is_causal)
                for is_causal in (False, True)
                for name, fn in impls.items()
                if not (name in slow_names and (n > NAIVE_MAX_N[device] or is_causal))
            }
            fast = {key: case for key, case in cases.items() if key[0] not in slow_names}
            slow = {key: case for key, case in cases.items() if key[0] in slow_names}
            times = time_round_robin(fast, args.repeats, device)
            round_times[head_dim, n] = times
            times = times | time_round_robin(slow, args.repeats, device)
            medians = {key: statistics.median(values) for key, values in times.items()}
            for (name, is_causal), seconds in sorted(medians.items(), key=lambda item: item[0][1]):
                memory = None
                if not args.no_memory:
                    memory = (
                        peak_extra_bytes_cuda(impls[name], inputs, is_causal)
                        if device == "cuda"
                        else peak_extra_bytes_cpu(name, n, head_dim, is_causal)
                    )
                rows.append({
                    "device": device, "device_name": machine, "torch": torch.__version__,
                    "date": today, "impl": name, "n": n, "heads": N_HEADS, "head_dim": head_dim,
                    "dtype": str(dtype).removeprefix("torch."), "causal": is_causal,
                    "median_ms": round(seconds * 1e3, 3),
                    "peak_extra_mib": None if memory is None else round(memory / 2**20, 2),
                })  # fmt: skip
                print(
                    f"  d={head_dim:3d} N={n:6d} {'causal' if is_causal else 'full  '} {name:15} "
                    f"{seconds * 1e3:10.2f} ms  " + ("" if memory is None else f"{memory / 2**20:9.1f} MiB")
                )
            del inputs
    out = output_path(args, f"attention_{device}.csv")
    write_csv(rows, out)
    print("\nTime ratios are medians over rounds of side-by-side ratios; memory ratios are from single runs.")
    print("\n".join(ratios(rows, round_times)))
    return rows


def ratios(rows: list[dict], round_times: dict) -> list[str]:
    """The comparisons the chapter (and the issue's bars) care about, from one run."""

    def pick(impl, n, causal, head_dim, key="median_ms"):
        for row in rows:
            if (row["impl"], row["n"], row["causal"], row["head_dim"]) == (impl, n, causal, head_dim):
                return row[key]
        return None

    lines = []
    for head_dim in sorted({row["head_dim"] for row in rows}):
        for n in sorted({row["n"] for row in rows}):
            sdpa_names = [r["impl"] for r in rows if r["impl"].startswith("sdpa") and r["n"] == n and not r["causal"]]
            fastest = min(sdpa_names, key=lambda name: pick(name, n, False, head_dim) or float("inf"), default=None)
            times = round_times.get((head_dim, n), {})
            parts = [f"d={head_dim} N={n}:"]
            if ("tiled", False) in times and fastest:
                parts.append(f"tiled / {fastest} time = {paired_ratio(times, ('tiled', False), (fastest, False)):.2f}")
            if ("tiled", True) in times:
                parts.append(f"causal / full tiled time = {paired_ratio(times, ('tiled', True), ('tiled', False)):.2f}")
            if ("triton", False) in times and fastest:
                throughput = paired_ratio(times, (fastest, False), ("triton", False))
                parts.append(f"triton throughput / {fastest} = {throughput:.2f}")
            naive_mem = pick("naive", n, False, head_dim, "peak_extra_mib")
            if naive_mem:
                for name in ["tiled", fastest]:
                    mem = pick(name, n, False, head_dim, "peak_extra_mib")
                    if mem is not None:
                        parts.append(f"{name} / naive peak memory = {mem / naive_mem:.4f}")
            lines.append("  ".join(parts))
    return lines


def sweep(args: argparse.Namespace) -> None:
    """Tiled block sizes at one N on the CPU, each timed against SDPA in the same rounds."""
    n = args.sizes[0] if args.sizes else 4096
    inputs = make_inputs(n, 64, torch.float32, "cpu")
    print(f"N={n}, d=64, fp32, heads={N_HEADS}: time relative to SDPA (full) and causal / full")
    for block_q, block_k in args.blocks or [(128, 512), (256, 256), (256, 512), (256, 1024), (512, 512), (512, 1024)]:
        impls = {
            "sdpa": lambda q, k, v, c: F.scaled_dot_product_attention(q, k, v, is_causal=c),
            "tiled": lambda q, k, v, c, bq=block_q, bk=block_k: tiled_attention(
                q, k, v, is_causal=c, block_q=bq, block_k=bk
            ),
        }  # fmt: skip
        cases = {(name, c): functools.partial(fn, *inputs, c) for name, fn in impls.items() for c in (False, True)}
        t = time_round_robin(cases, args.repeats, "cpu")
        print(f"  block_q={block_q:4d} block_k={block_k:4d}: "
              f"tiled / sdpa = {paired_ratio(t, ('tiled', False), ('sdpa', False)):.2f}   "
              f"causal / full = {paired_ratio(t, ('tiled', True), ('tiled', False)):.2f}")  # fmt: skip


def pattern_implementations(window: int) -> dict[str, tuple[Callable, bool]]:
    """name -> (f(q, k, v), causal) for the patterns of ``--window``: the same tiled loop
    reading every key, the causal half, or only a band of ``window`` keys; and linear attention."""
    return {
        "tiled": (lambda q, k, v: tiled_attention(q, k, v), False),
        "tiled-causal": (lambda q, k, v: tiled_attention(q, k, v, is_causal=True), True),
        "tiled-window": (lambda q, k, v: tiled_attention(q, k, v, window=window), True),
        "linear-causal": (lambda q, k, v: linear_attention(q, k, v, is_causal=True), True),
    }


def windowed(args: argparse.Namespace) -> list[dict]:
    """Time against N at a fixed window, every implementation and every N in the same rounds,
    so that time(2N) / time(N) is a ratio measured side by side."""
    device = args.device
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    window = args.window
    sizes = sorted(args.sizes or [1024, 2048, 4096, 8192])
    head_dim = (args.head_dims or [64])[0]
    impls = pattern_implementations(window)
    today = datetime.date.today().isoformat()
    machine = device_name(device)
    print(
        f"{machine}, torch {torch.__version__}, {dtype}, B=1, heads={N_HEADS}, d={head_dim}, window={window}, {today}"
    )
    inputs = {n: make_inputs(n, head_dim, dtype, device) for n in sizes}
    cases = {(impl, n): functools.partial(fn, *inputs[n]) for n in sizes for impl, (fn, _) in impls.items()}
    times = time_round_robin(cases, args.repeats, device)
    rows = []
    for (impl, n), values in times.items():
        seconds = statistics.median(values)
        # time(N) / time(N/2), paired round by round: steadier on a busy machine than a ratio of medians
        half = (impl, n // 2)
        ratio = round(paired_ratio(times, (impl, n), half), 3) if n % 2 == 0 and half in times else ""
        rows.append({
            "device": device, "device_name": machine, "torch": torch.__version__, "date": today,
            "impl": impl, "n": n, "heads": N_HEADS, "head_dim": head_dim,
            "dtype": str(dtype).removeprefix("torch."), "causal": impls[impl][1],
            "window": window if impl == "tiled-window" else "", "median_ms": round(seconds * 1e3, 3),
            "ratio_to_half_n": ratio,
        })  # fmt: skip
        print(f"  N={n:6d} {impl:14} {seconds * 1e3:10.2f} ms")
    out = output_path(args, f"attention_window_{device}.csv")
    write_csv(rows, out)
    print("\nTime when N doubles (medians over rounds of side-by-side ratios):")
    print("\n".join(doubling_ratios(times, sizes, list(impls), window)))
    return rows


def doubling_ratios(times: dict, sizes: list[int], impls: list[str], window: int) -> list[str]:
    """One line per doubling of N: time(2N) / time(N) for each implementation, side by side."""
    labels = {"tiled-window": f"windowed tiled (w={window})", "tiled": "dense tiled", "tiled-causal": "causal tiled"}
    lines = []
    for small, large in zip(sizes, sizes[1:], strict=False):
        if large != 2 * small:
            continue
        parts = [
            f"{labels.get(impl, impl)} {paired_ratio(times, (impl, large), (impl, small)):.2f}x"
            for impl in impls
            if (impl, small) in times and (impl, large) in times
        ]
        lines.append(f"  N={large} / N={small}: " + "   ".join(parts))
    return lines


def load_results(name: str = "attention_cpu.csv") -> list[dict]:
    """Rows of a recorded CSV under chapters/results, numbers as numbers: [] if none recorded."""
    path = RESULTS / name
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["n"], row["causal"] = int(row["n"]), row["causal"] == "True"
        for key in ("median_ms", "peak_extra_mib", "ratio_to_half_n"):
            if row.get(key):
                row[key] = float(row[key])
    return rows


def series(rows: list[dict], impl: str, causal: bool, key: str = "median_ms") -> tuple[list[int], list[float]]:
    """(Ns, values) of one implementation in recorded rows, sorted by N."""
    points = sorted((row["n"], row[key]) for row in rows if row["impl"] == impl and row["causal"] == causal)
    return [n for n, _ in points], [value for _, value in points]


def layer_latency(sizes: list[int], *, d_model: int = 256, heads: int = 4, repeats: int = 3, seed: int = 0) -> dict:
    """Seconds per round of one transformer layer's forward pass (torch's
    ``nn.TransformerEncoderLayer``, FFN 4d, B = 1, inference) at each N, every N in the same
    rounds: {N: [seconds, ...]}. Small enough to run inside a notebook cell."""
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True).eval()
    gen = torch.Generator().manual_seed(seed)
    inputs = {n: torch.randn(1, n, d_model, generator=gen) for n in sizes}  # (1, N, d_model) each
    with torch.inference_mode():
        return time_round_robin({n: functools.partial(layer, inputs[n]) for n in sizes}, repeats, "cpu")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", help="sequence lengths N")
    parser.add_argument("--head-dims", type=int, nargs="+", help="head widths d")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurements")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", help=f"CSV path (default: {SCRATCH}/attention_<device>.csv)")
    where.add_argument(
        "--record", action="store_true", help="write the book's chapters/results/attention_<device>.csv (chapter 5)"
    )
    parser.add_argument("--sweep", action="store_true", help="time tiled block sizes against SDPA instead")
    parser.add_argument(
        "--window",
        type=int,
        help="time dense, causal and windowed tiled attention and linear attention against N at this window",
    )
    parser.add_argument(
        "--blocks",
        type=lambda text: tuple(map(int, text.split("x"))),
        nargs="+",
        help="block sizes for --sweep, as QxK (e.g. 256x512)",
    )


def write_csv(rows: list[dict], out: Path) -> None:
    """The measured rows as a CSV (one row per implementation and size), creating the folder."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {out}" + ("  (chapter 5's own CSV is written with --record)" if out.parent == SCRATCH else ""))


def main(args: argparse.Namespace) -> None:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here")
    if args.sweep:
        sweep(args)
    elif args.window is not None:
        if args.window < 1:
            raise SystemExit(f"--window must be positive, got {args.window}")
        windowed(args)
    else:
        run(args)


if __name__ == "__main__":  # the memory probe, run in a fresh process by peak_extra_bytes_cpu
    probe = argparse.ArgumentParser()
    probe.add_argument("--probe", nargs=4, required=True, metavar=("IMPL", "N", "HEAD_DIM", "CAUSAL"))
    name, n, head_dim, causal = probe.parse_args().probe
    print(_probe_cpu_memory(name, int(n), int(head_dim), bool(int(causal))))

"""The capstone across runs: every seed, on two CPU kernel families, in one table (chapter 9).

One trained run is one draw. Whether a small GPT leaves its loss plateau, and which heads
end up carrying the name, can change with the seed (initial weights and data order) and
with the CPU's kernels (AVX-512, AVX2 and plain scalar code sum a matrix product in
different orders and round differently, and training amplifies that). So the chapter
states what holds in every run of this table:

    python -m lib.capstone_seeds                  # seeds 0-4 x every kernel family this CPU has
    python -m lib.capstone_seeds --seeds 0 1 --kernels native --out /tmp/seeds.json

Kernel families: ``native`` (what PyTorch picks on this CPU), ``avx2``
(``ATEN_CPU_CAPABILITY=avx2``, ``MKL_ENABLE_INSTRUCTIONS=AVX2``: what an AVX2 laptop
computes) and ``no-avx`` (``ATEN_CPU_CAPABILITY=default``, ATen's plain kernels, with MKL
held to SSE4.2: no AVX at all). A family that gives the same capability as one before it
is left out (on an AVX2 CPU, ``avx2`` is ``native``), so each row is a distinct family.

Each (seed, kernel) trains the two-layer and the one-layer capstone (``lib.capstone``,
cached by configuration and kernel) in a process of its own, one thread each, as many at
once as ``--jobs`` (default: the cores). Each reports its losses, the step of its largest
late fall, the probes of ``lib.capstone_probes``, each head's mean-ablation effect, Olsson
et al.'s induction measures, and chapter 6's KV-head pooling; the table is written as JSON
(everything) and CSV (one row per run), with the machine, torch version and date it was
made with.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "chapters" / "results" / "capstone_seeds.json"
KERNELS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "no-avx": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
}
# The late fall is looked for from here on. By step 150 every two-layer run of the table
# rests on its plateau (one still fell 0.1 nat between steps 100 and 150, onto it); some
# one-layer runs fall past the 6-gram without a pause, and for them the "late fall" is the
# steepest step of one descent.
FIRST_DROP_STEP = 150

__all__ = [
    "KERNELS",
    "RESULTS",
    "drop_step",
    "capability",
    "distinct_kernels",
    "measure_run",
    "run_table",
    "load_table",
    "main",
]


def drop_step(steps: list[int], losses: list[float]) -> tuple[int, float]:
    """The evaluation step that ends the largest fall of the held-out loss (from step 150 on), and that fall.

    >>> drop_step([0, 100, 150, 200, 250], [6.2, 0.70, 0.58, 0.40, 0.39])
    (200, 0.18)
    """
    pairs = [(s, loss) for s, loss in zip(steps, losses, strict=True) if s >= FIRST_DROP_STEP]
    if len(pairs) < 2:
        raise ValueError(f"need two evaluations from step {FIRST_DROP_STEP} on, got steps {steps}")
    falls = [(before[1] - after[1], after[0]) for before, after in zip(pairs[:-1], pairs[1:], strict=True)]
    fall, step = max(falls)
    return step, round(fall, 4)


def measure_run(seed: int, *, cache_dir: str | None = None) -> dict:
    """Train (or load) both capstone models for ``seed`` with this process's kernels, and measure them."""
    import torch

    from lib import capstone, capstone_probes, gpt_probes, serving

    torch.set_num_threads(1)
    data = capstone.prepare_data(capstone.CorpusConfig())
    training = dataclasses.replace(capstone.CAPSTONE_TRAINING, seed=seed)
    probes = capstone_probes.held_out_probes(data.val_text, data.tokenizer)
    context = training.context
    n_windows = min(64, (data.val_ids.numel() - 1) // context)
    windows = data.val_ids[: n_windows * context].view(n_windows, context)  # (64, context): for head means
    seen = torch.unique(data.train_ids)  # induction tests draw from tokens the model was trained on
    row = {"seed": seed, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "models": {}}
    for label, options in (("two_layers", capstone.CAPSTONE_MODEL), ("one_layer", capstone.ONE_LAYER_MODEL)):
        result = capstone.train_capstone(
            data=data, model_options=options, train_config=training, progress=False, cache_dir=cache_dir
        )
        history, model = result.history, result.model
        step, fall = drop_step(history["val_steps"], history["val_loss"])
        first, second = gpt_probes.repeated_tokens_losses(model, tokens=seen)
        ablations = capstone_probes.head_ablations(model, probes, windows)
        row["models"][label] = {
            "loss": round(history["val_loss_full"], 4),
            "curve": [round(v, 4) for v in history["val_loss"]],
            "curve_steps": history["val_steps"],
            "drop_step": step,
            "drop": fall,
            "train_cpu_seconds": round(history["train_cpu_seconds"], 1),
            "kinds": _train_and_held_out_losses(model, data, context),
            "probes": capstone_probes.probe_scores(model, probes),
            "name_attention": _rounded(capstone_probes.name_attention(model, probes["name"])),
            "ablation": {name: _rounded(table) for name, table in ablations.items()},
            "repeated_first_copy": round(first, 4),
            "repeated_second_copy": round(second, 4),
            "prefix_matching": _rounded(gpt_probes.prefix_matching_scores(model, tokens=seen)),
        }
        if label == "two_layers":
            pooled = serving.mean_pool_kv_heads(model, 1)
            shift = serving.next_token_shift(model, pooled, data.val_ids, context=context, windows=32)
            row["kv_pooling"] = {
                "loss_before": round(shift.loss_before, 4),
                "loss_after": round(shift.loss_after, 4),
                "mean_kl": round(shift.mean_kl, 4),
                "top1_agreement": round(shift.top1_agreement, 4),
            }
    return row


def _rounded(table) -> list[list[float]]:
    """An (L, H) tensor as nested lists, to 4 decimals (JSON)."""
    return [[round(v, 4) for v in row] for row in table.tolist()]


def _train_and_held_out_losses(model, data, context: int) -> dict:
    """``capstone.losses_by_kind`` flattened for the table: {"training_story": loss, ..., "held_out_all": loss}."""
    from lib import capstone

    by_part = capstone.losses_by_kind(model, data, context)
    return {
        f"{part.replace('-', '_')}_{kind}": round(loss, 4)
        for part, kinds in by_part.items()
        for kind, (loss, _) in kinds.items()
    }


def capability(kernel: str) -> str:
    """The CPU capability PyTorch reports under ``kernel``'s environment (asked of a fresh process)."""
    env = {**os.environ, **KERNELS[kernel]}
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:  # e.g. an instruction set this CPU lacks
        raise RuntimeError(f"kernel {kernel} does not run here:\n{done.stderr[-500:]}")
    return done.stdout.strip()


def distinct_kernels(kernels: list[str]) -> dict[str, str]:
    """Each kernel family with its capability, leaving out one that repeats an earlier family's."""
    chosen: dict[str, str] = {}
    for kernel in kernels:
        found = capability(kernel)
        if found not in chosen.values():
            chosen[kernel] = found
    return chosen


def _one(seed: int, kernel: str, cache_dir: str | None) -> dict:
    """Run ``measure_run`` in a fresh process with the kernel's environment (kernels are chosen at startup)."""
    env = {**os.environ, **KERNELS[kernel], "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "lib.capstone_seeds", "--one", str(seed)]
    if cache_dir:
        command += ["--cache-dir", cache_dir]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"seed {seed}, kernel {kernel} failed:\n{done.stderr[-2000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["kernel"] = kernel
    print(f"seed {seed} {kernel:>7} ({row['cpu_capability']}): two layers {row['models']['two_layers']['loss']:.3f}, "
          f"one layer {row['models']['one_layer']['loss']:.3f}", flush=True)  # fmt: skip
    return row


def run_table(seeds: list[int], kernels: list[str], *, jobs: int | None = None, cache_dir: str | None = None) -> dict:
    """Every (seed, kernel) run, ``jobs`` processes at a time, with the machine it ran on."""
    import torch

    from lib import capstone
    from lib.machine import device_name

    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise ValueError(f"kernels must be among {sorted(KERNELS)}, got {unknown}")
    families = distinct_kernels(kernels)
    runs = [(seed, kernel) for kernel in families for seed in seeds]
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        rows = list(pool.map(lambda run: _one(*run, cache_dir), runs))
    return {
        "machine": device_name(),
        "kernels": families,
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "training": dataclasses.asdict(capstone.CAPSTONE_TRAINING),
        "model": capstone.CAPSTONE_MODEL,
        "runs": rows,
    }


def _csv_rows(table: dict) -> list[dict]:
    rows = []
    for run in table["runs"]:
        row = {"seed": run["seed"], "kernel": run["kernel"], "cpu_capability": run["cpu_capability"]}
        for label, model in run["models"].items():
            row |= {f"{label}_loss": model["loss"], f"{label}_drop_step": model["drop_step"]}
            row |= {f"{label}_{probe}_p": s["mean_p"] for probe, s in model["probes"].items()}
            row[f"{label}_repeated_second_copy"] = model["repeated_second_copy"]
        rows.append(row)
    return rows


def load_table(path: Path | str = RESULTS) -> dict:
    """The committed table (``chapters/results/capstone_seeds.json``)."""
    return json.loads(Path(path).read_text())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lib.capstone_seeds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--jobs", type=int, default=None, help="runs at once (default: one per core)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON table; a CSV is written beside it")
    parser.add_argument("--cache-dir", default=None, help="where trained weights are cached (default .cache/trained)")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a child: one seed, print JSON
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure_run(args.one, cache_dir=args.cache_dir)))
        return
    table = run_table(args.seeds, args.kernels, jobs=args.jobs, cache_dir=args.cache_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    rows = _csv_rows(table)
    with open(args.out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out} and {args.out.with_suffix('.csv')}")


if __name__ == "__main__":
    main()

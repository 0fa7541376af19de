"""Grading a class: wall time of `--jobs 2` against `--jobs 1` on the same notebooks, side by side.

The same hand-ins (``--copies`` copies of one solved notebook, each in a student's folder)
are graded by ``lib.batch_grading.grade_notebooks`` one at a time and ``--jobs`` at a time, in
turns for ``--repeats`` rounds (the order flips each round, so a machine that slows down
weighs on both), each kernel with its share of the cores in threads. Printed per round: both
wall times and their ratio; then the median ratio, and whether both ways gave the same grades.
Starting a kernel and importing torch is most of a small notebook's time, and it is serial
work a second core can do at the same time.

    python -m lib.bench grading                      # 4 copies of chapter 1, --jobs 2 vs 1
    python -m lib.bench grading --copies 8 --repeats 3 --notebook chapters/02_batches_and_heads.ipynb
    python -m lib.bench grading --no-sandbox         # the same without bubblewrap: the sandbox's cost

Each notebook runs in its sandbox and its function answers in a second one (``lib.hidden_runs``),
as ``python -m lib.student grade`` runs them, with one seed for every round.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from lib.batch_grading import grade_notebooks
from lib.grading_process import DEFAULT_TIME_LIMIT_S, kernel_threads

CHAPTER_1 = Path(__file__).resolve().parents[2] / "chapters" / "01_one_attention_read.ipynb"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--notebook", type=Path, default=CHAPTER_1, help="the notebook every student hands in")
    parser.add_argument("--copies", type=int, default=4, help="how many students hand it in (default 4)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks at once, against one at a time (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of both (default 1)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, help="seconds per notebook")
    parser.add_argument("--no-sandbox", action="store_true", help="grade without bubblewrap (to see what it costs)")


def hand_ins(notebook: Path, copies: int, folder: Path) -> list[Path]:
    """``copies`` copies of ``notebook``, as students ``student01/``, ``student02/``, ... hand it in."""
    paths = []
    for n in range(1, copies + 1):
        path = folder / f"student{n:02d}" / notebook.name
        path.parent.mkdir(parents=True)
        shutil.copyfile(notebook, path)
        paths.append(path)
    return paths


def main(args: argparse.Namespace) -> None:
    for name in ("copies", "jobs", "repeats"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be at least 1, got {getattr(args, name)}")
    if not args.notebook.is_file():
        raise SystemExit(f"--notebook: no such file: {args.notebook}")
    jobs = args.jobs
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        paths = hand_ins(args.notebook, args.copies, Path(tmp))
        print(
            f"grading {args.copies} cop{'ies' if args.copies > 1 else 'y'} of {args.notebook.name}: "
            f"--jobs 1 ({kernel_threads(1)} threads a kernel) "
            f"vs --jobs {jobs} ({kernel_threads(jobs)} a kernel), {'without' if args.no_sandbox else 'in'} a sandbox"
        )
        print(f"{'round':>5}  {'jobs 1 (s)':>10}  {f'jobs {jobs} (s)':>10}  {f'jobs {jobs} / jobs 1':>15}")
        ratios, grades = [], {}
        for round_ in range(1, args.repeats + 1):
            seconds = {}
            for n in (1, jobs) if round_ % 2 else (jobs, 1):
                start = time.perf_counter()
                reports = grade_notebooks(paths, args.time_limit, jobs=n, seed=0, sandboxed=not args.no_sandbox)
                seconds[n] = time.perf_counter() - start
                grades.setdefault(n, []).append([(r.student, r.exercises, r.problems) for r in reports])
            ratios.append(seconds[jobs] / seconds[1])
            print(f"{round_:>5}  {seconds[1]:>10.1f}  {seconds[jobs]:>10.1f}  {ratios[-1]:>15.2f}")
    same = all(run == grades[1][0] for runs in grades.values() for run in runs)
    print(f"median ratio jobs {jobs} / jobs 1: {statistics.median(ratios):.2f}")
    print(f"same grades both ways: {'yes' if same else 'NO'}")

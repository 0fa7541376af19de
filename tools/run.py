"""What `make trained`, `make test` and `make test-lib` run, for any machine (Windows too).

Run it with the environment's Python, from anywhere (it works in the repository's root):

    .venv/bin/python tools/run.py trained     # the models chapters 8 and 9 read, trained once
    .venv/bin/python tools/run.py test        # trained, then the library tests and nbval
    .venv/bin/python tools/run.py test-lib    # the library tests alone

(on Windows, `.venv\\Scripts\\python tools\\run.py test`). The Makefile's targets call this
script, so the commands README gives for a machine without make are the ones make runs.
Standard library only: it starts the Python it runs under (`sys.executable`).

`test` takes the paths to test (default: tests and chapters), and anything after `--` goes to
pytest as it is: `tools/run.py test chapters -- --durations=20`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One thread per process, as the notebooks and python -m lib.capstone_seeds train: the thread
# count changes how a matrix product is summed, so the cached run is one the seeds table could
# hold. Under `test` each pytest worker, and each kernel and grader it starts, computes on one
# thread: with a worker per core, torch's own threads only wait on each other.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# The two training processes of `trained`, run at once (about 4 minutes on two cores): chapter 9's
# GPTs in one, chapter 8's ViTs and CNN and the GPT on Python's help texts in the other.
TRAINING = (
    "from lib import capstone as c; c.train_capstone(progress=True); "
    "c.train_capstone(model_options=c.ONE_LAYER_MODEL, progress=True)",
    "from lib import capstone as c, digits as d; d.train_digits(); d.train_digits(patch=4); "
    "d.train_digits(pool='mean'); d.train_digits_baseline(); c.train_capstone(data=c.help_text_data(), progress=True)",
)

# A cell may take this many seconds under `test` (nbval's default is 2000): the slowest, chapter
# 8's training with an empty cache, took 72 s on two busy cores.
NBVAL_CELL_TIMEOUT = 300


def default_workers() -> int:
    """pytest-xdist's workers for `test`: TEST_WORKERS if set, else one per core, at most 4
    (each notebook's kernel holds a few hundred MB)."""
    if os.environ.get("TEST_WORKERS"):
        return int(os.environ["TEST_WORKERS"])
    return min(4, os.cpu_count() or 1)


def default_cell_timeout() -> int:
    """NBVAL_CELL_TIMEOUT if set, else 300 s."""
    return int(os.environ.get("NBVAL_CELL_TIMEOUT") or NBVAL_CELL_TIMEOUT)


def one_thread_env() -> dict[str, str]:
    """This process's environment with one torch/OpenMP/MKL thread."""
    return {**os.environ, **ONE_THREAD}


def training_commands() -> list[list[str]]:
    """The two command lines `trained` runs at once."""
    return [[sys.executable, "-c", code] for code in TRAINING]


def test_command(
    workers: int | None = None,
    cell_timeout: int | None = None,
    paths: tuple[str, ...] | list[str] = ("tests", "chapters"),
    extra: tuple[str, ...] | list[str] = (),
) -> list[str]:
    """The pytest command line of `test` (run with ONE_THREAD in its environment).

    >>> test_command(workers=2, extra=["--durations=5"])[1:]  # doctest: +NORMALIZE_WHITESPACE
    ['-m', 'pytest', 'tests', 'chapters', '-m', 'not browser', '-n', '2', '--dist', 'loadscope',
     '--nbval-lax', '--nbval-current-env', '--nbval-cell-timeout=300', '-p', 'tests.nbval_rerun',
     '-p', 'no:cacheprovider', '--durations=5']
    """
    workers = default_workers() if workers is None else workers
    cell_timeout = default_cell_timeout() if cell_timeout is None else cell_timeout
    # Each test file and each notebook whole on one worker (--dist loadscope: a notebook's cells
    # share one kernel); a notebook in which a cell timed out is run once more (tests/nbval_rerun.py).
    return [
        sys.executable,
        *("-m", "pytest", *paths, "-m", "not browser"),
        *("-n", str(workers), "--dist", "loadscope"),
        *("--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}"),
        *("-p", "tests.nbval_rerun", "-p", "no:cacheprovider", *extra),
    ]


def test_lib_command(extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The pytest command line of `test-lib`."""
    return [sys.executable, "-m", "pytest", "tests", "-m", "not browser", *extra]


def trained() -> int:
    """Train (or load) every cached model in two processes at once; 0 if both succeeded."""
    print("Chapter 9's GPTs (two layers, one layer, Python's help texts) and chapter 8's ViTs and CNN, trained")
    print("the first time in two processes (about 4 minutes on two cores, progress bars interleaved), then loaded")
    sys.stdout.flush()
    processes = [subprocess.Popen(command, cwd=ROOT, env=one_thread_env()) for command in training_commands()]
    try:
        codes = [process.wait() for process in processes]
    except BaseException:  # Ctrl-C: neither process outlives this one
        for process in processes:
            process.kill()
        raise
    for code, what in zip(codes, ("chapter 9's GPTs", "chapter 8's models and the help-text GPT"), strict=True):
        if code != 0:
            print(f"training {what} failed (exit status {code})", file=sys.stderr)
    # The first failure's status (1 for a process ended by a signal), as make would stop
    return next((code if code > 0 else 1 for code in codes if code != 0), 0)


def test(args: argparse.Namespace, extra: list[str]) -> int:
    """`trained` (unless --no-train), then pytest over the paths, on every core."""
    if not args.no_train:
        code = trained()
        if code != 0:
            return code
    if args.paths:
        print(f"pytest over {' '.join(args.paths)}, on every core")
    else:
        print("The tests: the library's and nbval over every chapter, on every core (about 5 minutes on two)")
    sys.stdout.flush()
    command = test_command(args.workers, args.cell_timeout, args.paths or ("tests", "chapters"), extra)
    return subprocess.call(command, cwd=ROOT, env=one_thread_env())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Everything after `--` is pytest's, untouched (argparse would read its options as ours).
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(
        prog="tools/run.py",
        description="What make trained, make test and make test-lib run (the Makefile calls this script). "
        "Anything after -- goes to pytest.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "trained",
        help="train the models chapters 8 and 9 read, in two one-thread processes at once, cached in .cache/trained/",
    )
    test_parser = commands.add_parser(
        "test", help="trained, then the library tests and nbval over every chapter, on every core"
    )
    test_parser.add_argument("paths", nargs="*", help="what to test (default: tests chapters)")
    test_parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="pytest-xdist workers (default: $TEST_WORKERS, else one per core, at most 4)",
    )
    test_parser.add_argument(
        "--cell-timeout",
        type=int,
        default=None,
        help=f"seconds a notebook cell may take (default: $NBVAL_CELL_TIMEOUT, else {NBVAL_CELL_TIMEOUT})",
    )
    test_parser.add_argument("--no-train", action="store_true", help="skip the training step (trained)")
    commands.add_parser("test-lib", help="the library tests alone (no notebooks)")
    args = parser.parse_args(argv)
    if args.command == "trained":
        if extra:
            parser.error("trained takes no pytest arguments")
        return trained()
    if args.command == "test":
        return test(args, extra)
    return subprocess.call(test_lib_command(extra), cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())

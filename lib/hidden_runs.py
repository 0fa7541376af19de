"""Running a learner's function on hidden inputs, in a sandbox that never holds the answer key.

The grader (``lib.answer_grading``) has a function a notebook recorded (pickled by value with
``cloudpickle``) and the inputs of the hidden cases. It never loads the function itself:
``run_functions`` writes the function and the inputs, as ``.npy`` files and JSON, into a
folder, and starts this module's ``main`` in a fresh sandbox (``lib.sandbox``) with nothing
else in it, no notebook and no ``lib/exercises``. There each function runs in a child process of
its own, forked before anything of the learner's is loaded (``_child``): loaded by
``lib.safe_unpickle``, which calls nothing of the pickle's while loading, read by
``lib.code_policy`` as ``check()`` reads it, then the child is sealed (``lib.sealed_run``: the
forbidden callables end the process by any route; no file written, no process or thread
started) and runs the cases. What it returned comes back through a pipe as plain arrays; this
side keeps the clock (a case that runs past its time limit is killed), gives a run that ended
with ``lib.sealed_run.REFUSED`` no credit whatever it wrote before, and writes one JSON line a
case for the grader to compare with the references it computes itself::

    results.jsonl   {"function": 0, "case": 2, "problem": "", "file": "out-0-2.npy", "dtype": "float32", ...}

A function that ends its process (``os._exit``, a segfault) ends only its own run: the case it
was on says so.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib import sandbox
from lib.answer_records import read_plain

__all__ = ["FunctionRun", "run_functions", "main"]

Outcome = tuple[str, "torch.Tensor | None", bool]  # as lib.grading defines it
MAX_OUTPUT_BYTES = 20 * 1024**2


@dataclass
class FunctionRun:
    """One recorded function and the hidden inputs to run it on."""

    pickled: bytes
    cases: list[tuple]  # each case's arguments: tensors, numbers, None
    forbids: list[str]  # dotted names of what else it may neither be, use nor copy (lib.code_policy)
    stands_for: list[str]  # the dotted names of the library functions it is asked to write
    timeout_s: float


def _save_arg(value: Any, folder: Path, name: str) -> dict:
    if isinstance(value, torch.Tensor):
        np.save(folder / f"{name}.npy", value.detach().cpu().numpy(), allow_pickle=False)
        return {"tensor": f"{name}.npy", "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, (list, tuple)):
        return {"list": [_save_arg(item, folder, f"{name}-{n}") for n, item in enumerate(value)]}
    return {"value": value}


def _load_arg(spec: dict, folder: Path) -> Any:
    if "tensor" in spec:
        return torch.from_numpy(np.load(folder / spec["tensor"], allow_pickle=False)).to(getattr(torch, spec["dtype"]))
    if "list" in spec:
        return tuple(_load_arg(item, folder) for item in spec["list"])
    return spec["value"]


def _save_output(got: torch.Tensor, folder: Path, name: str) -> dict:
    dtype = str(got.dtype).removeprefix("torch.")
    if got.dtype in (torch.bfloat16, torch.float16):
        got = got.float()  # numpy has no bfloat16: widened here, narrowed again by the grader
    elif got.dtype == torch.complex32:
        got = got.to(torch.complex64)
    np.save(folder / f"{name}.npy", got.numpy(), allow_pickle=False)
    return {"file": f"{name}.npy", "dtype": dtype}


def main(folder: str) -> int:
    """The sandbox's side: run each requested function on its cases, each in a sealed child process
    (``lib.sealed_run``), writing results as they come."""
    root = Path(folder)
    request = json.loads((root / "request.json").read_text())
    torch.set_num_threads(1)  # before any fork: a child may start no thread pool

    # The results file is opened for each line, here in the parent: no child holds a handle of it.
    def emit(**entry) -> None:
        with open(root / "results.jsonl", "a", encoding="utf-8") as results:
            results.write(json.dumps(entry) + "\n")

    for index, run in enumerate(request["functions"]):
        if not run.get("skip"):
            emit(function=index, start=True)
            _report(index, run, root, emit, *_run_sealed(run, root))
            emit(function=index, done=True)
    return 0


LOAD_S = 40.0  # loading, reading and sealing a function in its child (the load and the reading have 10 s each)


def _run_sealed(run: dict, root: Path) -> tuple[list[dict], list[str], int, bool]:
    """Run one function's cases in a forked, sealed child; what its pipe said: (its JSON lines, its
    SEALED lines, its exit status, whether it was killed for time)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing of the learner's is loaded before this
        status = 1
        try:
            os.close(read_end)
            status = _child(run, root, write_end)
        finally:
            os._exit(status)
    os.close(write_end)
    lines, sealed, timed_out = [], [], False
    buffer, total, resets = b"", 0, 0
    cap = (MAX_OUTPUT_BYTES * 4 // 3 + 4096) * (len(run["cases"]) + 2)
    deadline = time.monotonic() + LOAD_S
    try:
        while True:
            left = deadline - time.monotonic()
            ready = select.select([read_end], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                timed_out = True
                break
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:  # more than any honest run writes
                break
            *complete, buffer = (buffer + chunk).split(b"\n")
            for line in complete:
                if line.startswith(b"SEALED "):
                    sealed.append(line[7:].decode("utf-8", "replace")[:300])
                with contextlib.suppress(ValueError):
                    lines.append(json.loads(line))
                # the clock starts again after the load and after each case: n + 1 times at most, whatever is forged
                if len(lines) > resets and resets <= len(run["cases"]) and isinstance(lines[-1], dict):
                    resets, deadline = len(lines), time.monotonic() + run["timeout_s"] + 1.0
            if sealed:  # refused: nothing it does after counts
                break
    finally:
        os.close(read_end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return lines, sealed, status, timed_out


def _report(index: int, run: dict, root: Path, emit, lines: list, sealed: list, status: int, timed_out: bool):
    """The results lines of one function, from what its child said and how it ended. A refusal
    (the child's REFUSED status) outweighs whatever the child wrote before it."""
    from lib.answer_records import decode_output
    from lib.grading import CALLS_LIBRARY
    from lib.sealed_run import REFUSED

    lines = [entry for entry in lines if isinstance(entry, dict)]
    first = lines[0] if lines else {}
    if not first.get("loaded") and status != REFUSED and not sealed:
        if "refused" in first:
            emit(function=index, refused=str(first["refused"])[:300])
        elif "problem" in first:
            emit(function=index, problem=str(first["problem"])[:300])
        else:
            emit(function=index, problem=f"could not load your function for grading (exit status {status})")
        return
    unsealed = [str(entry["sealing"]) for entry in lines if "sealing" in entry]
    if unsealed and status != REFUSED and not sealed:
        emit(function=index, problem=f"the grader could not seal the process for your function ({unsealed[0]})")
        return
    cases = []
    for entry in lines[1:]:
        if entry.get("case") != len(cases) or len(cases) == len(run["cases"]):
            break  # a line out of order: the rest is not the child's
        cases.append(entry)
    ended = None
    if status == REFUSED or sealed:  # a SEALED line counts even if the process went on (its exit undone)
        cases = cases[: len(run["cases"]) - 1]
        ended = f"{CALLS_LIBRARY} {sealed[0] if sealed else 'a call the sealed grader refuses'}"
    elif len(cases) < len(run["cases"]) and (timed_out or status != 0):
        ended = f"did not finish within {run['timeout_s']:g} s (an endless loop?)" if timed_out else None
        ended = ended or f"ended the process that ran it (exit status {status})"
    if ended:
        cases.append({"case": len(cases), "problem": ended, "typed": False})
    for entry in cases:
        number = entry["case"]
        line = {"function": index, "case": number, "problem": str(entry.get("problem", ""))[:300],
                "typed": bool(entry.get("typed"))}  # fmt: skip
        output = decode_output(entry, MAX_OUTPUT_BYTES)
        if output is not None and not line["problem"]:
            line |= _save_output(output, root, f"out-{index}-{number}")
        emit(**line)


def _child(run: dict, root: Path, fd: int) -> int:
    """In the forked child: load the function (nothing of it runs), read it, load the cases, seal the
    process, then run each case and write its result to ``fd``."""
    import gc

    from lib.answer_records import encode_output
    from lib.code_policy import policy, read_before_running
    from lib.grading import _call_and_read
    from lib.safe_call import GradingTimeout, call_with_timeout, describe_error, unloaded
    from lib.safe_unpickle import UnsafePickle, safe_loads
    from lib.sealed_run import seal

    pipe = io.FileIO(fd, "wb", closefd=False)

    def say(**entry) -> None:
        pipe.write((json.dumps(entry) + "\n").encode())

    try:
        data = (root / run["pickle"]).read_bytes()
        function = call_with_timeout(safe_loads, (data,), 10.0)  # nothing of theirs runs while loading
    except UnsafePickle as error:
        say(problem=f"your answer is not a plain function the grader can load: it brings {error}")
        return 0
    except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # the learner's pickle
        say(problem=f"could not load your function for grading ({describe_error(error)})")
        return 0
    forbidden, blocked = [], unloaded(run["forbids"])
    if run["stands_for"] or run["forbids"]:  # check()'s rules, read here from the names
        rules = policy(run["stands_for"], run["forbids"])
        found = read_before_running(function, rules)
        if found:
            say(refused=found)
            return 0
        forbidden = rules.guarded
    cases = [tuple(_load_arg(spec, root) for spec in case) for case in run["cases"]]
    try:
        seal(forbidden, fd, blocked)
    except Exception as error:  # the grader's fault, not the learner's: said so, and nothing runs
        say(loaded=True, sealing=f"{type(error).__name__}: {error}"[:200])
        return 3
    say(loaded=True)  # the first case's clock starts now
    for number, args in enumerate(cases):
        problem, got, typed = _call_and_read(function, args)
        gc.collect(1)  # the learner's young garbage is finalized now, in the sealed process
        entry = {"case": number, "problem": problem, "typed": typed}
        if got is not None:
            entry |= encode_output(got, MAX_OUTPUT_BYTES)
        say(**entry)
    return 0


def _read_results(folder: Path) -> list[dict]:
    try:
        data = read_plain(folder / "results.jsonl", 64 * 1024**2, whole=False)  # not a link, not a FIFO
        lines = data.decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    entries = []
    for line in lines[:100_000]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("function"), int):
            entries.append(entry)
    return entries


def _output(entry: dict, folder: Path) -> torch.Tensor | None:
    """A case's output as a tensor, read without pickle; None when there is none to read."""
    path = folder / Path(str(entry.get("file", ""))).name
    dtype = getattr(torch, str(entry.get("dtype", "")), None)
    if not isinstance(dtype, torch.dtype):
        return None
    try:  # a regular file only: not a link, a FIFO or a device the function left there
        data = read_plain(path, MAX_OUTPUT_BYTES)
        return torch.from_numpy(np.load(io.BytesIO(data), allow_pickle=False)).to(dtype)
    except (OSError, ValueError, TypeError, RuntimeError, EOFError):
        return None


def _run_once(runs: list[FunctionRun], skip: set[int], sandboxed: bool, limits: sandbox.Limits) -> tuple[list, int]:
    with tempfile.TemporaryDirectory(prefix="lib-hidden-") as tmp:
        folder = Path(tmp)
        request = []
        for index, run in enumerate(runs):
            (folder / f"function-{index}.pkl").write_bytes(run.pickled)
            cases = [
                [_save_arg(a, folder, f"in-{index}-{n}-{k}") for k, a in enumerate(c)] for n, c in enumerate(run.cases)
            ]
            request.append(
                {"pickle": f"function-{index}.pkl", "cases": cases, "forbids": run.forbids,
                 "stands_for": run.stands_for, "timeout_s": run.timeout_s, "skip": index in skip}
            )  # fmt: skip
        (folder / "request.json").write_text(json.dumps({"functions": request}))
        argv = [
            sys.executable,
            "-c",
            # os._exit: no atexit handler or finalizer a learner left runs after the last case's watch
            "import os, sys; from lib.hidden_runs import main; os._exit(main(sys.argv[1]))",
        ]
        if sandboxed:
            command = sandbox.command(
                [*argv, str(sandbox.INSIDE)], folder, env=sandbox.environment_for_threads(1), limits=limits
            )
            env = dict(sandbox.OUTSIDE_ENV)
        else:
            command, env = [*argv, str(folder)], sandbox.no_sandbox_environment()
        budget = sum(run.timeout_s * len(run.cases) for run in runs) + 60
        try:
            done = subprocess.run(command, env=env, capture_output=True, timeout=budget, start_new_session=True)
            status = done.returncode
        except subprocess.TimeoutExpired:
            status = -9
        entries = _read_results(folder)
        outputs = {(e["function"], e["case"]): _output(e, folder) for e in entries if "file" in e and "case" in e}
    return [(entry, outputs.get((entry["function"], entry.get("case")))) for entry in entries], status


def _in_order(cases: dict[int, Outcome], n_cases: int) -> list[Outcome]:
    """The outcomes of cases 0, 1, ... up to the first one missing; a case with no result,
    where no earlier case stopped the run, fails with a word that says so."""
    from lib.grading import stops_the_cases

    ordered = []
    for number in range(n_cases):
        if number not in cases:
            if not (ordered and stops_the_cases(ordered[-1][0])):
                ordered.append(("gave no result (the run stopped before it finished)", None, False))
            break
        ordered.append(cases[number])
        if stops_the_cases(ordered[-1][0]):
            break
    return ordered


def run_functions(runs: list[FunctionRun], *, sandboxed: bool = True, limits: sandbox.Limits | None = None):
    """Run each function on its cases, in a sandbox (or, with ``sandboxed=False``, a plain
    process). Returns, per run: a list of ``Outcome`` (one a case, fewer when a case stopped
    the run), or ("refused", feedback) for one the code policy refuses (the library's own function,
    one that uses or copies it), or ("problem", text)."""
    limits = limits or sandbox.Limits()
    found: dict[int, Any] = {}
    skip: set[int] = set()
    while len(skip) < len(runs):
        entries, status = _run_once(runs, skip, sandboxed, limits)
        cases: dict[int, dict[int, Outcome]] = {}
        current = None
        for entry, output in entries:
            index = entry["function"]
            if not 0 <= index < len(runs) or index in skip:
                continue
            current = index
            if "refused" in entry:
                found[index] = ("refused", str(entry["refused"])[:300])
                skip.add(index)
            elif "problem" in entry and "case" not in entry:
                found[index] = ("problem", str(entry["problem"])[:300])
                skip.add(index)
            elif isinstance(entry.get("case"), int) and "problem" in entry:
                problem = str(entry["problem"])[:300]
                if not problem and output is None:  # a line whose output file is missing or unreadable
                    problem = "left no output the grader reads"
                outcome = (problem, output, bool(entry.get("typed")))
                cases.setdefault(index, {}).setdefault(entry["case"], outcome)
            elif entry.get("done"):
                found[index] = _in_order(cases.get(index, {}), len(runs[index].cases))
                skip.add(index)
        if current is None or current in skip:  # nothing ran, or the process ended between functions
            for index in set(range(len(runs))) - skip:
                found[index] = ("problem", f"the grader's run of your function stopped (exit status {status})")
            break
        ended = f"ended the process that ran it (exit status {status})"
        ran = cases.get(current, {})
        ran.setdefault(max(ran, default=-1) + 1, (ended, None, False))
        found[current] = _in_order(ran, len(runs[current].cases))
        skip.add(current)
    return [found[index] for index in range(len(runs))]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))

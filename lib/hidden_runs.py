"""Running a learner's function on hidden inputs, in a sandbox that never holds the answer key.

The grader (``lib.answer_grading``) has a function a notebook recorded (pickled by value with
``cloudpickle``) and the inputs of the hidden cases. It never loads the function itself:
``run_functions`` writes the function and the inputs, as ``.npy`` files and JSON, into a
folder, and starts this module's ``main`` in a fresh sandbox (``lib.sandbox``) with nothing
else in it, no notebook and no ``lib/exercises``. There each function runs on each case as
``check()`` runs it: loaded by ``lib.safe_unpickle``, which calls nothing of the pickle's
while loading (so no answer can switch off what judges it), read by ``lib.code_policy``, then
run by ``lib.grading.run_learner_case`` (a time limit, exit() raising, what it may not use
refusing). What it returned goes back as plain arrays, one JSON line a case, for the grader
to compare with the references it computes itself::

    results.jsonl   {"function": 0, "case": 2, "problem": "", "file": "out-0-2.npy", "dtype": "float32", ...}

A function that ends the process (``os._exit``, a segfault) ends only its own run: the case it
was on says so, and the notebook's other functions run again in a fresh sandbox.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
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
    """The sandbox's side: run each requested function on its cases, writing results as they come."""
    from lib.code_policy import policy, read_before_running
    from lib.grading import run_learner_case, stops_the_cases
    from lib.safe_call import GradingTimeout, call_with_timeout, describe_error
    from lib.safe_unpickle import UnsafePickle, safe_loads

    root = Path(folder)
    request = json.loads((root / "request.json").read_text())
    # The results file is opened for each line: no handle of it is open while a learner's code runs.

    def emit(**entry) -> None:
        with open(root / "results.jsonl", "a", encoding="utf-8") as results:
            results.write(json.dumps(entry) + "\n")

    for index, run in enumerate(request["functions"]):
        if run.get("skip"):
            continue
        emit(function=index, start=True)
        try:
            data = (root / run["pickle"]).read_bytes()
            function = call_with_timeout(safe_loads, (data,), 10.0)  # nothing of theirs runs while loading
        except UnsafePickle as error:
            emit(
                function=index,
                problem=f"your answer is not a plain function the grader can load: it brings {error}",
            )
            continue
        except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # the learner's pickle
            emit(function=index, problem=f"could not load your function for grading ({describe_error(error)})")
            continue
        guarded, homes = [], []
        if run["stands_for"] or run["forbids"]:  # check()'s rules, read here from the names
            rules = policy(run["stands_for"], run["forbids"])
            found = read_before_running(function, rules)
            if found:
                emit(function=index, refused=found)
                continue
            guarded, homes = rules.guarded, rules.homes
        for number, case in enumerate(run["cases"]):
            emit(function=index, case=number, start=True)
            args = tuple(_load_arg(spec, root) for spec in case)
            problem, got, typed = run_learner_case(function, args, guarded, homes, run["timeout_s"])
            entry = {"function": index, "case": number, "problem": problem, "typed": typed}
            if got is not None:
                entry |= _save_output(got, root, f"out-{index}-{number}")
            emit(**entry)
            if stops_the_cases(problem):
                break
        emit(function=index, done=True)
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

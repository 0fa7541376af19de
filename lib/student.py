"""Student copies and grading, for a learner and a teacher (DESIGN: "What a learner opens").

The notebooks in ``chapters/`` carry reference answers between solution markers::

    # BEGIN SOLUTION
    answer = [1.0, 2.0]
    # END SOLUTION
    check("1.equal-scores", answer)

``make_student_copy`` replaces each marked block with ``name = ...`` for every name the
block defines, so the ``check`` below it reads "not attempted" until the student answers,
and clears every output (the solutions' outputs would give the answers away, and the
learner's own run should produce the rest). ``make lab`` opens these copies, in
``student/``; a copy that exists already is the learner's work and is never overwritten.

``grade_notebook`` executes a (student's) notebook and collects what each ``check`` call
reported in that run. Every stored output is cleared first, and only a result record that
``check`` signed with the key the grader made for this run, in the cell it shows in, counts:
a copied or hand-made record is a problem line, never a mark. Each notebook runs in a
grading process of its own, which the grader supervises, with the grader's own Python
kernel whatever kernelspec the notebook names. Nothing a notebook does stops the batch:
an endless loop, a kernel that dies, exit(), a cell that kills its parent process, or a
syntax error becomes that notebook's line in the report ("timed out in cell 12", "kernel
died in cell 3", "kernel stopped by exit() in cell 4", "grading process killed by SIGKILL in
cell 5", "syntax error in cell 5, line 2"), and so does the first error ("ImportError in
cell 2: cannot import name 'chek' ..."), while grading goes on. The kernel runs in the
notebook's own folder. A chapter's notebook (``01_....ipynb``) is graded on every exercise
of its chapter, so one whose cell the student deleted reads "not attempted" and still
counts; a ``check`` of an id the book does not have (a typo, a renamed exercise) is a
problem line, not a column.
A copy is never written with an answer in it: a solution marker left unmatched (``# END
SOLUTON``) stops that chapter's copy with an error that names the cell.

    python -m lib.student copy chapters student            # write missing student copies
    python -m lib.student grade submissions/*/*.ipynb      # run and grade; a table per student
    python -m lib.student grade ... --json grades.json     # the same, with what check() said
    python -m lib.student grade ... --csv book.csv         # the gradebook: a row per notebook
    python -m lib.student grade ... --feedback out/        # out/<student>/<notebook>.md to send back
    python -m lib.student grade ... --jobs 4 --kernel NAME # 4 at once; another Jupyter kernel

A notebook's student is the name of its folder (``submissions/ada/01_...ipynb`` is Ada's);
cells are numbered from 1, counting markdown cells, as they appear in the notebook.
"""

from __future__ import annotations

import argparse
import ast
import copy
import csv
import hmac
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_SOLUTION_BLOCK = re.compile(rf"^([ \t]*){BEGIN}[ \t]*\r?\n(.*?)^[ \t]*{END}[ \t]*\r?$", re.S | re.M)
# Any line that looks like a solution marker ("#END SOLUTON", "# begin solution"): one left over
# after stripping means a block was not recognised, and its answer would reach the student.
_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*(BEGIN|END)[ \t_-]*SOLU", re.I | re.M)
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")


def defined_names(solution: str) -> list[str]:
    """Top-level names a solution block defines (functions, classes, assignments)."""
    names: list[str] = []
    try:
        body = ast.parse(textwrap.dedent(solution)).body
    except SyntaxError:  # the placeholder falls back to `answer`; the reference is never copied
        return names
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def _names_read(code: str) -> set[str]:
    """The names some code reads (not the words in its strings); every word if it does not parse."""
    try:
        tree = ast.parse(_SOLUTION_BLOCK.sub("", code))
    except SyntaxError:
        return set(re.findall(r"\w+", code))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def strip_solutions(source: str) -> str:
    """The cell source with every solution block replaced by ``name = ...`` placeholders:
    one for each name the block defines that the rest of the cell uses (the ``check`` call
    reads ``answer``; a helper the solution made up along the way is not asked for)."""

    def placeholder(match: re.Match) -> str:
        indent, block = match.group(1), match.group(2)
        defined = defined_names(block)
        used = [name for name in defined if name in _names_read(source[match.end() :])]
        names = used or defined or ["answer"]
        return "\n".join(f"{indent}{name} = ...  # your answer here" for name in names)

    stripped = _SOLUTION_BLOCK.sub(placeholder, source)
    leftover = _MARKER_LINE.search(stripped)
    if leftover:
        number = stripped[: leftover.start()].count("\n") + 1
        line = stripped.splitlines()[number - 1].strip()
        raise ValueError(
            f"solution marker on line {number} ({line!r}) has no partner: write exactly {BEGIN!r} "
            f"and {END!r}, each on its own line, or the answer would be copied to the student"
        )
    return stripped


def student_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A student copy of ``notebook`` (changed in place and returned): solutions stripped,
    every output and execution count cleared, stored widget state dropped."""
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
        if _MARKER_LINE.search(cell.source) or "solution" in cell.metadata.get("tags", []):
            if not _SOLUTION_BLOCK.search(cell.source):
                raise ValueError(f"cell {number} is a solution cell without a {BEGIN!r} ... {END!r} block")
            try:
                cell.source = strip_solutions(cell.source)
            except ValueError as error:
                raise ValueError(f"cell {number}: {error}") from None
            cell.metadata.pop("mystnb", None)
            tags = [t for t in cell.metadata.get("tags", []) if t not in ("hide-cell", "solution")]
            if tags:
                cell.metadata["tags"] = tags
            else:
                cell.metadata.pop("tags", None)
    notebook.metadata.pop("widgets", None)
    return notebook


def make_student_copy(notebook_path: Path, out_dir: Path, *, overwrite: bool = False) -> tuple[Path, bool]:
    """Write the student copy of ``notebook_path`` into ``out_dir``.

    Returns (path, written). A copy that exists already is the learner's work: it is kept
    as it is (written is False) unless ``overwrite`` is given.
    """
    out_path = Path(out_dir) / Path(notebook_path).name
    if out_path.exists() and not overwrite:
        return out_path, False
    notebook = student_notebook(nbformat.read(notebook_path, as_version=4))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, out_path)
    return out_path, True


# --- grading ------------------------------------------------------------------------------

NOT_RUN = "not run"
DEFAULT_TIME_LIMIT_S = 180.0  # per notebook: a chapter runs in well under a minute
# The grading process gets this long beyond the time limit (to start, then to stop, its
# kernel on a busy machine) before its supervisor stops it.
_SUPERVISOR_MARGIN_S = 60.0
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_GRADER_KERNEL = "lib-student-grader"
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
# The process that runs one notebook imports this module without lib.checks (and torch with
# it): it starts in about a second less, once per notebook.
_WORKER = "import sys; from lib.student import _run_cells; raise SystemExit(_run_cells(*sys.argv[1:]))"
_LIBRARY_ROOT = Path(__file__).resolve().parent.parent  # the folder that holds `lib`


def _checks():
    import lib.checks

    return lib.checks


def exercises() -> dict:
    """Every exercise in the book, by id (``lib.checks.exercises``)."""
    return _checks().exercises()


@dataclass
class GradeReport:
    """What grading one notebook found."""

    notebook: str
    student: str
    exercises: dict[str, str] = field(default_factory=dict)  # id -> correct/incorrect/not attempted/not run
    problems: list[str] = field(default_factory=list)  # "timed out in cell 12", "syntax error in cell 5, line 2"
    seconds: float = 0.0
    # id -> what check() told the learner in this run: message, feedback, hint, mistake (the
    # feedback of the known wrong answer that fired, "" if none), cell (its number)
    details: dict[str, dict] = field(default_factory=dict)
    # id -> (cell number, source) of the exercise's cell: the learner's answer
    answers: dict[str, tuple[int, str]] = field(default_factory=dict, repr=False)
    executed: nbformat.NotebookNode | None = field(default=None, repr=False, compare=False)  # with this run's outputs

    @property
    def n_correct(self) -> int:
        return sum(status == "correct" for status in self.exercises.values())

    def as_dict(self) -> dict:
        fields = ("notebook", "student", "exercises", "problems", "seconds", "details")
        return {
            **{name: getattr(self, name) for name in fields},
            "correct": self.n_correct,
            "total": len(self.exercises),
        }


def _chapter_exercises(notebook_path: Path) -> list[str]:
    """The ids of the chapter a notebook's name starts with ("01_....ipynb": chapter 1's), so
    that an exercise whose cell the student deleted is still a column, and still counts."""
    match = re.match(r"(\d+)_", Path(notebook_path).name)
    if not match:
        return []
    chapter = str(int(match.group(1)))
    return [i for i in exercises() if i.split(".")[0] == chapter]


def _cleared(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy with every stored output and execution count removed: only this run's count."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return notebook


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def kernel_threads(jobs: int, cores: int | None = None) -> int:
    """Threads for each kernel when ``jobs`` run at once: the cores shared out, at least one,
    so that two kernels on two cores do not each start two threads and wait on each other."""
    return max(1, (cores or _cores()) // jobs)


# --- the grading process: it runs one notebook, and the notebook may kill it ---------------


def _run_cells(notebook_path: str, events_path: str, workdir: str, time_limit: str, kernel_name: str, spec_dir: str):
    """Run a notebook's code cells in order in a fresh kernel, in ``workdir``, and write what
    happens to ``events_path`` as it happens, one JSON object a line: the kernel's process
    ({"kernel": pid, "pgid": ...}), each cell as it starts ({"start": index}) and its outputs
    once it ran ({"ran": index, ...}), why the run stopped ({"problem": ...}), and
    {"finished": true}. The supervisor reads how far it got even if the notebook kills this
    process. Runs in its own process (``grade_notebook`` starts it); returns the exit status."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    limit = float(time_limit)
    notebook = nbformat.read(notebook_path, as_version=4)
    exited: list[int] = []  # cells that called exit(): IPython then shuts the kernel down, a moment later
    requests: dict[int, str] = {}  # cell index -> the id of the request that ran it (check() signs it)

    def on_cell_executed(cell, cell_index: int, execute_reply: dict) -> None:
        requests[cell_index] = str((execute_reply or {}).get("parent_header", {}).get("msg_id", ""))
        payloads = (execute_reply or {}).get("content", {}).get("payload", [])
        if any(p.get("source") == "ask_exit" and not p.get("keepkernel") for p in payloads):
            exited.append(cell_index)

    options = {
        "timeout": max(1, int(limit)),
        "allow_errors": True,
        "interrupt_on_timeout": False,
        "record_timing": False,
        "shutdown_kernel": "immediate",
        "on_cell_executed": on_cell_executed,
        "resources": {"metadata": {"path": workdir}},
    }
    if kernel_name:
        client = NotebookClient(notebook, kernel_name=kernel_name, **options)
    else:  # the grader's own Python, whatever kernel the notebook was saved with
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager

        specs = KernelSpecManager(kernel_dirs=[spec_dir], ensure_native_kernel=False)
        client = NotebookClient(
            notebook, km=AsyncKernelManager(kernel_name=_GRADER_KERNEL, kernel_spec_manager=specs), **options
        )
    with open(events_path, "a", encoding="utf-8") as events:

        def emit(**event) -> None:
            events.write(json.dumps(event) + "\n")
            events.flush()

        def timed_out(number: int) -> None:
            emit(problem=f"timed out in cell {number} ({limit:g} s for the notebook)")

        try:
            with client.setup_kernel():
                provisioner = getattr(client.km, "provisioner", None)
                emit(kernel=getattr(provisioner, "pid", None), pgid=getattr(provisioner, "pgid", None))
                start = time.monotonic()  # the limit is the cells' time: a slow kernel start costs the learner nothing
                for index, cell in enumerate(notebook.cells):
                    if cell.cell_type != "code":
                        continue
                    number = index + 1
                    remaining = limit - (time.monotonic() - start)
                    if remaining <= 0:
                        timed_out(number)
                        break
                    client.timeout = max(1, int(remaining + 0.999))
                    emit(start=index)
                    stop = None
                    try:
                        client.execute_cell(cell, index)
                    except CellTimeoutError:
                        stop = f"timed out in cell {number} ({limit:g} s for the notebook)"
                    except DeadKernelError:
                        stop = f"kernel died in cell {number}"
                    if exited and stop is None:  # stop here, as Jupyter would: what ran after it depended on timing
                        stop = f"kernel stopped by exit() in cell {number}"
                    emit(
                        ran=index,
                        request=requests.get(index, ""),
                        execution_count=cell.get("execution_count"),
                        outputs=cell.get("outputs", []),
                    )
                    if stop:
                        emit(problem=stop)
                        break
        except DeadKernelError:
            emit(problem="kernel died")
        except Exception as error:  # e.g. the kernel would not start: that notebook's line says why
            emit(problem=f"could not run the notebook ({type(error).__name__}: {error})"[:200])
        emit(finished=True)
    return 0


def _write_grader_kernel(spec_dir: Path) -> None:
    """A kernelspec for the grader's own Python. Its kernel imports this checkout's lib first
    (so a notebook's folder cannot bring another), and lib.checks with it, which takes the
    run's key from the environment before the first cell runs."""
    setup = f"import sys; sys.path.insert(0, {str(_LIBRARY_ROOT)!r}); import lib.checks"
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", f"--IPKernelApp.exec_lines={setup}"]
    folder = spec_dir / _GRADER_KERNEL
    folder.mkdir(parents=True)
    spec = {"argv": argv, "display_name": "Python (lib.student grader)", "language": "python"}
    (folder / "kernel.json").write_text(json.dumps(spec))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# The grading processes running now (pid -> its events file), so that an interrupted batch
# (Ctrl-C) stops them and their kernels, which sit in sessions of their own and do not get it.
_RUNNING: dict[int, Path] = {}
_RUNNING_LOCK = threading.Lock()
_STOPPING = threading.Event()


def _read_events(path: Path) -> list[dict]:
    events = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:  # a line cut off when the process was killed
            continue
    return events


def stop_grading() -> None:
    """Stop every grading process that is running, and its kernel, and start no more
    until the batch running now has ended (``grade_notebooks`` calls this when it is
    interrupted)."""
    with _RUNNING_LOCK:
        _STOPPING.set()
        running = dict(_RUNNING)
    for pid, events_path in running.items():
        _kill_group(pid)
        for event in _read_events(events_path):
            if "kernel" in event:
                _kill_group(event.get("pgid"))


def _kill_group(pgid: int | None) -> None:
    if pgid and hasattr(os, "killpg"):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _supervise(
    notebook: nbformat.NotebookNode,
    workdir: Path,
    time_limit: float,
    kernel_name: str | None,
    threads: int | None,
    key: str,
) -> tuple[list[dict], list[str]]:
    """Run the notebook in a grading process of its own and wait for it (the time limit plus
    a margin at most). Returns its events, and what went wrong with the process itself."""
    with tempfile.TemporaryDirectory(prefix="lib-student-") as tmp:
        tmp = Path(tmp)
        source, events_path, log_path = tmp / "notebook.ipynb", tmp / "events.jsonl", tmp / "log.txt"
        nbformat.write(notebook, source)
        events_path.touch()
        _write_grader_kernel(tmp / "kernels")
        env = {**os.environ, _checks().RUN_KEY_ENV: key}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_LIBRARY_ROOT), os.environ.get("PYTHONPATH")]))
        if threads:
            env.update(dict.fromkeys(_THREAD_VARIABLES, str(threads)))
        command = [sys.executable, "-c", _WORKER, str(source), str(events_path), str(workdir), repr(float(time_limit))]
        command += [kernel_name or "", str(tmp / "kernels")]
        overran = False
        with open(log_path, "wb") as log, _RUNNING_LOCK:
            if _STOPPING.is_set():
                raise RuntimeError("grading was interrupted")
            worker = subprocess.Popen(
                command, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            _RUNNING[worker.pid] = events_path
        try:
            status = worker.wait(timeout=time_limit + _SUPERVISOR_MARGIN_S)
        except subprocess.TimeoutExpired:  # stopped, or stuck: the notebook had its time
            _kill_group(worker.pid)
            status, overran = worker.wait(), True
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(worker.pid, None)
        events = _read_events(events_path)
        log_tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
    kernel = next((event for event in events if "kernel" in event), {})
    _kill_group(kernel.get("pgid"))  # the kernel, and whatever the notebook started, is gone when grading is
    problems: list[str] = []
    if not any(event.get("finished") for event in events):
        started = [event["start"] for event in events if "start" in event]
        where = f" in cell {started[-1] + 1}" if started else ""
        if overran:
            problems.append(f"timed out{where} (grading stopped after {time_limit + _SUPERVISOR_MARGIN_S:g} s)")
        elif status < 0:
            problems.append(f"grading process killed by {_signal_name(-status)}{where}")
        else:
            detail = f": {log_tail[0]}" if log_tail else ""
            problems.append(f"grading process failed{where} (exit status {status}){detail}"[:200])
    return events, problems


# --- what the run shows -----------------------------------------------------------------------


def _genuine(record, key: bytes, request: str) -> bool:
    """Whether a result record was made by check() in this run, in the cell it shows in
    (``request``: the id of the request that ran that cell)."""
    checks = _checks()
    if not isinstance(record, dict) or not isinstance(record.get("sig"), str):
        return False
    try:
        expected = checks.record_signature(record, key)
    except (TypeError, ValueError):
        return False
    return (
        hmac.compare_digest(record["sig"], expected)
        and bool(request)
        and record.get("request") == request
        and isinstance(record.get("id"), str)
        and record.get("status") in (checks.CORRECT, checks.INCORRECT, checks.NOT_ATTEMPTED)
    )


def _short_error(text: str) -> str:
    """An exception's text on one line, without the file it came from: "cannot import name
    'chek' from 'lib.checks'" rather than "... (/home/.../lib/checks.py)"."""
    text = re.sub(r"\s*\((?:/|[A-Za-z]:\\)[^()]*\)\s*$", "", " ".join(str(text).split()))
    return text if len(text) <= 120 else text[:119] + "…"


def _error_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """Every syntax error with its cell and line, and the first other error with its cell
    ("ImportError in cell 2: cannot import name 'chek' from 'lib.checks'"), in cell order."""
    problems: list[tuple[int, str]] = []
    others: list[tuple[int, dict]] = []
    for number, cell in enumerate(notebook.cells, start=1):
        error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        if error is None:
            continue
        if error.get("ename") in _SYNTAX_ERRORS:
            match = re.search(r"line (\d+)", " ".join(error.get("traceback", [])))
            where = f", line {match.group(1)}" if match else ""
            detail = re.sub(r"\s*\([^()]*, line \d+\)", "", error.get("evalue", ""))  # drop "(12345.py, line 3)"
            problems.append((number, f"syntax error in cell {number}{where}: {detail}".rstrip(": ")))
        else:
            others.append((number, error))
    if others:
        number, error = others[0]
        text = f"{error.get('ename', 'error')} in cell {number}: {_short_error(error.get('evalue', ''))}".rstrip(": ")
        if len(others) > 1:
            text += f" (and {len(others) - 1} more cell{'s' if len(others) > 2 else ''} raised an error)"
        problems.append((number, text))
    return [text for _, text in sorted(problems, key=lambda item: item[0])]


def _cells_text(numbers: list[int]) -> str:
    unique = list(dict.fromkeys(numbers))
    return f"cell{'s' if len(unique) > 1 else ''} {', '.join(map(str, unique))}"


def grade_notebook(
    notebook_path: Path,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    *,
    student: str | None = None,
    kernel_name: str | None = None,
    threads: int | None = None,
) -> GradeReport:
    """Execute the notebook in its own folder and report what each check() call said.

    Every stored output is cleared first, and only a result record that check() signed in
    this run, with the key made for it, counts; a record it cannot verify (copied from an
    earlier run, or made by hand) is a problem line. The notebook runs in a grading process
    of its own, with the grader's Python kernel (``kernel_name`` chooses another) and
    ``threads`` torch/OpenMP threads, so whatever it does (kill its parent, loop, exit) ends
    that process, never the caller. A cell that raises does not stop the run: the first
    error is named with its cell, and so is every syntax error. If the notebook runs past
    ``time_limit`` seconds (all cells together) or its kernel dies, the run stops there and
    the report says in which cell; exercises whose check() never reported read "not run".
    Never raises on a student's notebook.
    """
    checks = _checks()
    notebook_path = Path(notebook_path)
    # the folder's own name even for a bare "01_....ipynb" (whose parent is ".")
    report = GradeReport(str(notebook_path), student if student is not None else notebook_path.absolute().parent.name)
    # every exercise of the chapter counts, even one whose cell was deleted (or an unreadable file's)
    report.exercises = dict.fromkeys(_chapter_exercises(notebook_path), checks.NOT_ATTEMPTED)
    start = time.monotonic()
    try:
        notebook = _cleared(nbformat.read(notebook_path, as_version=4))
    except Exception as error:  # an unreadable file is that notebook's line in the report
        report.problems.append(f"could not read the notebook ({type(error).__name__}: {error})"[:200])
        return report
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type == "code":
            for exercise_id in _CHECK_CALL.findall(cell.source):
                report.exercises[exercise_id] = NOT_RUN
                report.answers.setdefault(exercise_id, (number, cell.source))
    key = secrets.token_hex(32)
    try:
        events, process_problems = _supervise(
            notebook, notebook_path.resolve().parent, time_limit, kernel_name, threads, key
        )
    except Exception as error:  # e.g. no room for the temporary folder: this notebook's line says so
        report.problems.append(f"could not run the notebook ({type(error).__name__}: {error})"[:200])
        report.seconds = round(time.monotonic() - start, 1)
        return report
    stops, requests = [], {}
    for event in events:
        if "ran" in event and 0 <= event["ran"] < len(notebook.cells):
            cell = notebook.cells[event["ran"]]
            cell.outputs = [nbformat.from_dict(output) for output in event.get("outputs", [])]
            cell.execution_count = event.get("execution_count")
            requests[event["ran"]] = str(event.get("request", ""))
        elif "problem" in event:
            stops.append(event["problem"])
    report.executed = notebook
    report.problems += _error_problems(notebook) + stops + process_problems
    forged: list[int] = []
    for index, cell in enumerate(notebook.cells):
        number = index + 1
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get(checks.RESULT_KEY)
            if record is None:
                continue
            if not _genuine(record, key.encode(), requests.get(index, "")):
                forged.append(number)
                continue
            report.exercises[record["id"]] = record["status"]
            report.details[record["id"]] = {
                **{name: str(record.get(name) or "") for name in ("message", "feedback", "hint", "mistake")},
                "cell": number,
            }
    if forged:
        many = len(forged) > 1
        report.problems.append(
            f"{len(forged)} result record{'s' if many else ''} in {_cells_text(forged)} not made by check() in this "
            f"run (copied or forged): not counted"
        )
    # An id the book does not have (a typo, or an exercise since renamed) is no column and does
    # not count: the report says so instead.
    known = exercises()
    for unknown in [i for i in report.exercises if i not in known]:
        del report.exercises[unknown]
        report.details.pop(unknown, None)
        report.problems.append(f"check() names no exercise of the book: {unknown!r}")
    report.seconds = round(time.monotonic() - start, 1)
    return report


def grade_notebooks(
    paths: Sequence[Path],
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    *,
    jobs: int | None = None,
    kernel_name: str | None = None,
    on_report: Callable[[GradeReport], None] | None = None,
) -> list[GradeReport]:
    """Grade every notebook, ``jobs`` at a time (default: one per core), each kernel with its
    share of the cores in threads. Returns the reports in the order of ``paths``;
    ``on_report`` sees each as soon as it is done."""
    jobs = jobs or _cores()
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    threads = kernel_threads(jobs)
    exercises()  # load the book once, before the threads
    _STOPPING.clear()
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [
            pool.submit(grade_notebook, path, time_limit, kernel_name=kernel_name, threads=threads) for path in paths
        ]
        for future in as_completed(futures):
            if on_report is not None:
                on_report(future.result())
        return [future.result() for future in futures]
    except BaseException:  # Ctrl-C: no notebook goes on running, and no kernel is left behind
        pool.shutdown(wait=False, cancel_futures=True)
        stop_grading()
        raise
    finally:
        pool.shutdown(wait=True)
        _STOPPING.clear()  # every thread is done: the next batch may start grading processes


# --- reports: terminal table, class summary, gradebook, feedback files ----------------------------

_MARKS = {"correct": "✓", "incorrect": "✗", "not attempted": "·", NOT_RUN: "–"}
TABLE_WIDTH = 100
_PROBLEM_LINES = 3  # a row's problems take at most this many lines of the table


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _ordered_ids(reports: Sequence[GradeReport]) -> list[str]:
    """Every exercise in the reports, in the book's order."""
    order = {exercise_id: n for n, exercise_id in enumerate(exercises())}
    ids = dict.fromkeys(i for report in reports for i in report.exercises)
    return sorted(ids, key=lambda i: order.get(i, len(order)))


def _sorted(reports: Sequence[GradeReport]) -> list[GradeReport]:
    return sorted(reports, key=lambda r: (r.student, Path(r.notebook).name))


def format_table(reports: Sequence[GradeReport], width: int = TABLE_WIDTH) -> str:
    """One row per (student, notebook): the mark of each of its exercises in numbered columns
    (a legend below says which exercise each number is, per chapter), the score, and its
    problems, wrapped under their column within ``width`` (and cut after a few lines: the
    full text is in the JSON, CSV and feedback files)."""
    rows = _sorted(reports)
    columns = max((len(report.exercises) for report in rows), default=0)
    student_width = min(14, max([len("student"), *(len(r.student) for r in rows)]))
    names = {id(r): Path(r.notebook).name.removesuffix(".ipynb") for r in rows}
    name_width = min(26, max([len("notebook"), *(len(n) for n in names.values())]))
    number_width = len(str(columns))
    score_width = max([len("score"), *(len(f"{r.n_correct}/{len(r.exercises)}") for r in rows)])

    def line(student: str, name: str, marks: list[str], score: str, problems: Sequence[str]) -> str:
        left = " ".join(
            [
                _fit(student, student_width).ljust(student_width),
                _fit(name, name_width).ljust(name_width),
                *(mark.rjust(number_width) for mark in marks),
                score.ljust(score_width),
            ]
        )
        room = max(20, width - len(left) - 1)
        # each problem on a line of its own, wrapped under the column (three lines in all at
        # most); the full text is in the files
        keep = [re.sub(r"\b(cells?|line) (?=\d)", "\\1\u00a0", problem) for problem in problems]  # "cell 12" whole
        wrapped = [
            text.replace("\u00a0", " ") for one in keep for text in textwrap.wrap(one, room, break_on_hyphens=False)
        ]
        wrapped = wrapped or [""]
        if len(wrapped) > _PROBLEM_LINES:
            wrapped = [*wrapped[: _PROBLEM_LINES - 1], _fit(" ".join(wrapped[_PROBLEM_LINES - 1 :]), room)]
        indent = " " * (len(left) + 1)
        return "\n".join([(left + " " + wrapped[0]).rstrip(), *(indent + more for more in wrapped[1:])])

    header = line("student", "notebook", [str(n) for n in range(1, columns + 1)], "score", ["problems"])
    lines = [header]
    for r in rows:
        marks = [_MARKS.get(status, "?") for status in r.exercises.values()]
        marks += [""] * (columns - len(marks))
        lines.append(line(r.student, names[id(r)], marks, f"{r.n_correct}/{len(r.exercises)}", r.problems))
    lines.insert(1, "-" * max(len(text) for row in lines for text in row.splitlines()))
    lines += ["", "  ".join(f"{mark} {status}" for status, mark in _MARKS.items())]
    chapters: dict[str, list[str]] = {}
    for exercise_id in exercises():
        chapters.setdefault(exercise_id.split(".")[0], []).append(exercise_id)
    legends: dict[tuple[str, ...], list[str]] = {}
    for r in rows:
        legends.setdefault(tuple(r.exercises), []).append(names[id(r)])
    for ids, notebook_names in legends.items():
        if not ids:
            continue
        chapter = ids[0].split(".")[0]
        label = f"chapter {chapter}" if list(ids) == chapters.get(chapter) else ", ".join(dict.fromkeys(notebook_names))
        label = _fit(label, 40)
        entries = [f"{n} {exercise_id}" for n, exercise_id in enumerate(ids, start=1)]
        legend = f"{label}:"
        for entry in entries:  # wrapped between entries, never inside one
            if len(legend) + 3 + len(entry) > width:
                lines.append(legend)
                legend = "    " + entry
            else:
                legend += (" " if legend.endswith(":") else "   ") + entry
        lines.append(legend)
    return "\n".join(lines)


def class_summary(reports: Sequence[GradeReport], width: int = TABLE_WIDTH) -> str:
    """Per exercise: how many of the notebooks that have it got it right, and the named
    mistake (the known wrong answer whose feedback fired) made most often: what to re-teach."""
    ids = _ordered_ids(reports)
    students = {r.student for r in reports}
    lines = [f"Class summary: {len(reports)} notebook{'s' if len(reports) != 1 else ''}, {len(students)} student"
             f"{'s' if len(students) != 1 else ''}"]  # fmt: skip
    id_width = max([len("exercise"), *map(len, ids)])
    lines.append(f"{'exercise'.ljust(id_width)}  correct      most common named mistake")
    for exercise_id in ids:
        graded = [r for r in reports if exercise_id in r.exercises]
        right = sum(r.exercises[exercise_id] == "correct" for r in graded)
        mistakes = Counter(
            r.details[exercise_id]["mistake"]
            for r in graded
            if r.exercises[exercise_id] == "incorrect" and r.details.get(exercise_id, {}).get("mistake")
        )
        share = f"{right}/{len(graded)} {round(100 * right / len(graded)):>3}%"
        named = "—"
        if mistakes:
            text, count = mistakes.most_common(1)[0]
            named = f"{count}× {' '.join(text.split())}"
        left = f"{exercise_id.ljust(id_width)}  {share.ljust(11)}  "
        lines.append(left + _fit(named, max(20, width - len(left))))
    return "\n".join(lines)


def write_csv(reports: Sequence[GradeReport], path: Path) -> None:
    """The gradebook: one row per student and notebook, one column per exercise (its status),
    the notebook's score, the student's total over all their notebooks, and the problems."""
    ids = _ordered_ids(reports)
    totals: dict[str, list[int]] = {}
    for r in reports:
        total = totals.setdefault(r.student, [0, 0])
        total[0] += r.n_correct
        total[1] += len(r.exercises)
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(
            ["student", "notebook", *ids, "correct", "total", "student correct", "student total", "problems"]
        )
        for r in _sorted(reports):
            writer.writerow(
                [
                    r.student,
                    Path(r.notebook).name,
                    *(r.exercises.get(i, "") for i in ids),
                    r.n_correct,
                    len(r.exercises),
                    *totals[r.student],
                    "; ".join(r.problems),
                ]
            )


def _fenced(source: str, language: str = "python") -> str:
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", source)), default=0))
    return f"{fence}{language}\n{source.rstrip()}\n{fence}"


def feedback_markdown(report: GradeReport) -> str:
    """The feedback to send back for one notebook: the score and problems, then per exercise
    its question, status, the learner's answer (the exercise's cell) and what check() said."""
    book = exercises()
    name = Path(report.notebook).name
    lines = [f"# {name}: feedback for {report.student}", ""]
    lines.append(f"**Score: {report.n_correct} of {len(report.exercises)} correct.**")
    if report.problems:
        lines += ["", "What went wrong while running the notebook:", ""]
        lines += [f"- {problem}" for problem in report.problems]
    for n, (exercise_id, status) in enumerate(report.exercises.items(), start=1):
        lines += ["", f"## {n}. `{exercise_id}`: {_MARKS.get(status, '?')} {status}", ""]
        exercise = book.get(exercise_id)
        if exercise is not None:
            lines += [f"*{exercise.question}*", ""]
        if exercise_id in report.answers:
            number, source = report.answers[exercise_id]
            lines += [f"Your answer (cell {number}):", "", _fenced(source), ""]
        else:
            lines += ["This exercise's cell is not in the notebook (deleted?), so it counts as not attempted.", ""]
        detail = report.details.get(exercise_id)
        if detail is None:
            if exercise_id in report.answers:
                lines.append("check() did not report for this exercise in this run: the cell did not run to it.")
            continue
        lines.append(f"**Result:** {detail['message']}")
        for label, key in (("Feedback", "feedback"), ("Hint", "hint")):
            if detail[key]:
                lines += ["", f"**{label}:** {detail[key]}"]
    return "\n".join(lines).rstrip() + "\n"


def _safe_name(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("._") or "student"


def write_feedback(report: GradeReport, out_dir: Path) -> Path:
    """Write ``out_dir/<student>/<notebook>.md`` (``feedback_markdown``) and, beside it, the
    notebook as this run executed it, with every message. Returns the Markdown file's path."""
    folder = Path(out_dir) / _safe_name(report.student)
    folder.mkdir(parents=True, exist_ok=True)
    name = Path(report.notebook).name
    if report.executed is not None:
        nbformat.write(report.executed, folder / name)
    path = folder / f"{Path(name).stem}.md"
    path.write_text(feedback_markdown(report), encoding="utf-8")
    return path


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number, got {text!r}") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"--jobs must be at least 1, got {jobs}")
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.student", description="Student copies and grading.")
    commands = parser.add_subparsers(dest="command", required=True)
    copy_command = commands.add_parser(
        "copy", help="write student copies of every notebook in a folder (keeps existing ones)"
    )
    copy_command.add_argument("source", type=Path)
    copy_command.add_argument("out", type=Path)
    copy_command.add_argument(
        "--overwrite", action="store_true", help="replace existing copies (a learner's work is lost)"
    )
    grade = commands.add_parser("grade", help="execute notebooks and report each exercise's status")
    grade.add_argument("notebooks", type=Path, nargs="+")
    grade.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        help=f"seconds each notebook may run, all cells together (default {DEFAULT_TIME_LIMIT_S:g})",
    )
    grade.add_argument(
        "--jobs", type=_jobs, default=None, help=f"notebooks graded at once (default: the cores, {_cores()})"
    )
    grade.add_argument(
        "--kernel", metavar="NAME", help="grade with this Jupyter kernel (default: the grader's own Python)"
    )
    grade.add_argument("--json", type=Path, metavar="PATH", help="also write the report as JSON")
    grade.add_argument("--csv", type=Path, metavar="PATH", help="also write a gradebook: a row per notebook")
    grade.add_argument(
        "--feedback", type=Path, metavar="DIR", help="write DIR/<student>/<notebook>.md and the executed notebook"
    )
    args = parser.parse_args(argv)
    if args.command == "copy":
        failed = 0
        for path in sorted(args.source.glob("*.ipynb")):
            try:
                out, written = make_student_copy(path, args.out, overwrite=args.overwrite)
            except ValueError as error:  # nothing is written: a copy must never carry an answer
                print(f"{path}: no copy written: {error}")
                failed += 1
                continue
            print(f"{out}  ({'written' if written else 'kept: it exists already'})")
        return 1 if failed else 0

    def on_report(report: GradeReport) -> None:
        print(f"graded {report.notebook}: {report.n_correct}/{len(report.exercises)} correct in {report.seconds:g} s")
        for problem in report.problems:
            print(f"    {problem}")
        sys.stdout.flush()

    try:
        reports = grade_notebooks(
            args.notebooks, args.time_limit, jobs=args.jobs, kernel_name=args.kernel, on_report=on_report
        )
    except KeyboardInterrupt:
        print("\ngrading interrupted: every grading process and kernel is stopped; no report written")
        return 130
    print()
    print(format_table(reports))
    print()
    print(class_summary(reports))
    if args.json:
        args.json.write_text(json.dumps([report.as_dict() for report in reports], indent=1, ensure_ascii=False) + "\n")
        print(f"\nwrote {args.json}")
    if args.csv:
        write_csv(reports, args.csv)
        print(f"wrote {args.csv}")
    if args.feedback:
        for report in reports:
            write_feedback(report, args.feedback)
        print(f"wrote feedback for {len(reports)} notebook{'s' if len(reports) != 1 else ''} in {args.feedback}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Grading a class: each notebook run afresh in a sandbox, and what its cells recorded graded outside it.

``grade_notebook`` runs a (student's) notebook in a grading process of its own, in a sandbox
(``lib.grading_process``, ``lib.sandbox``) on a private copy of its folder, with every stored
output cleared. There ``check()`` grades nothing: it records each answer as data
(``lib.answer_records``); the grader, outside, keeps the answer each exercise's own cell
recorded last and grades it with the answer key the sandbox never saw (``lib.answer_grading``:
functions run on hidden inputs drawn from the batch's seed, in a sandbox of their own). So
nothing a notebook does changes any grade but its own. Nor does it stop the batch: an endless
loop, a kernel that dies, exit(), a cell that kills its parent process, or a syntax error
becomes that notebook's line in the report ("timed out in cell 12", "kernel died in cell 3",
"kernel stopped by exit() in cell 4", "grading process killed by SIGKILL in cell 5", "syntax
error in cell 5, line 2"), and so does the first error ("ImportError in cell 2: cannot import
name 'chek' ..."), and an answer given outside its own cell, while grading goes on. A
chapter's notebook (``01_....ipynb``) is graded on every exercise of its chapter, so one
whose cell the student deleted reads "not attempted" and still counts; a ``check`` of an id
the book does not have (a typo, a renamed exercise) is a problem line, not a column.
``lib.grade_reports`` turns the reports into a table, a class summary, a gradebook and
feedback files; ``python -m lib.student grade`` does all of it.

A notebook's student is the name of its folder (``submissions/ada/01_...ipynb`` is Ada's);
cells are numbered from 1, counting markdown cells, as they appear in the notebook.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from lib import answer_grading, sandbox
from lib.answer_records import read_plain
from lib.grading_process import (
    DEFAULT_TIME_LIMIT_S,
    OUTPUT_LIMIT,
    allow_grading,
    available_cores,
    kernel_threads,
    stop_grading,
    supervise,
)

__all__ = ["GradeReport", "grade_notebook", "grade_notebooks", "exercises", "NOT_RUN", "SandboxUnavailable"]
__all__ += ["chapter_of", "OUTPUT_LIMIT"]

NOT_RUN = "not run"
# OUTPUT_LIMIT (lib.grading_process): bytes of a notebook's outputs kept, cut inside the sandbox
NOTEBOOK_LIMIT = 100 * 1024**2  # a hand-in larger than this is not read
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def _checks():
    import lib.checks

    return lib.checks


def exercises() -> dict:
    """Every exercise in the book, by id (``lib.checks.exercises``)."""
    return _checks().exercises()


def variants_for(student: str) -> dict:
    """Every exercise by id, with the value exercises' numbers drawn for ``student`` (``lib.variants``);
    a name no variant can be drawn for (empty) gets the book's."""
    from lib.variants import exercises_for

    try:
        return exercises_for(student)
    except ValueError:
        return exercises()


class SandboxUnavailable(RuntimeError):
    """No sandbox to grade in here (the message says what is missing, and about --no-sandbox)."""


@dataclass
class GradeReport:
    """What grading one notebook found."""

    notebook: str
    student: str
    exercises: dict[str, str] = field(default_factory=dict)  # id -> correct/incorrect/not attempted/not run
    problems: list[str] = field(default_factory=list)  # "timed out in cell 12", "syntax error in cell 5, line 2"
    seconds: float = 0.0
    seed: int = 0  # the batch's seed: which hidden inputs were drawn (the same seed grades alike)
    # id -> what check() told the learner in this run: message, feedback, hint, mistake (the
    # feedback of the known wrong answer that fired, "" if none), cell (its number)
    details: dict[str, dict] = field(default_factory=dict)
    # id -> (cell number, source) of the exercise's cell: the learner's answer
    answers: dict[str, tuple[int, str]] = field(default_factory=dict, repr=False)
    # id -> (hidden cases passed, cases) of each function exercise graded: partial credit
    cases: dict[str, tuple[int, int]] = field(default_factory=dict)
    executed: nbformat.NotebookNode | None = field(default=None, repr=False, compare=False)  # with this run's outputs

    @property
    def n_correct(self) -> int:
        return sum(status == "correct" for status in self.exercises.values())

    def as_dict(self) -> dict:
        fields = ("notebook", "student", "exercises", "problems", "seconds", "details", "seed")
        return {
            **{name: getattr(self, name) for name in fields},
            "correct": self.n_correct,
            "total": len(self.exercises),
            "cases": {i: list(c) for i, c in self.cases.items()},
            "answers": {i: list(a) for i, a in self.answers.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> GradeReport:
        """The report ``as_dict`` wrote (without the executed notebook, which is not in it)."""
        report = cls(str(data["notebook"]), str(data["student"]), dict(data["exercises"]), list(data["problems"]))
        report.seconds, report.seed, report.details = data.get("seconds", 0.0), data.get("seed", 0), data["details"]
        report.cases = {i: (int(c[0]), int(c[1])) for i, c in data.get("cases", {}).items()}
        report.answers = {i: (int(a[0]), str(a[1])) for i, a in data.get("answers", {}).items()}
        return report


def chapter_of(notebook_path: str | Path) -> str | None:
    """The chapter a notebook's name starts with ("01_....ipynb": "1"), None for another name."""
    return _chapter(Path(notebook_path))


def _chapter(notebook_path: Path) -> str | None:
    """The chapter a notebook's name starts with ("01_....ipynb": "1"), None for another name."""
    match = re.match(r"(\d+)_", Path(notebook_path).name)
    return str(int(match.group(1))) if match else None


def _chapter_exercises(notebook_path: Path) -> list[str]:
    """The ids of the notebook's chapter, so that an exercise whose cell the student deleted
    is still a column, and still counts."""
    chapter = _chapter(notebook_path)
    return [] if chapter is None else [i for i in exercises() if i.split(".")[0] == chapter]


def _cleared(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy with every stored output and execution count removed: only this run's count."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return notebook


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


def _kinds() -> dict[str, str]:
    """Each exercise's id and kind, all that check() in the sandbox learns of the book."""
    from lib.exercises.base import FunctionExercise

    return {i: "function" if isinstance(e, FunctionExercise) else "value" for i, e in exercises().items()}


def _apply_events(notebook: nbformat.NotebookNode, events: list[dict]) -> tuple[dict[str, int], list[str]]:
    """Put each cell's outputs from this run back in the notebook (a cell whose outputs passed
    ``OUTPUT_LIMIT`` holds a line that says so); returns the cell index of each request and the problems it met.

    The limit is applied again here, over every event: the notebook's own code can append events
    to the file the sandbox's worker writes, so nothing in it is trusted to have been cut."""
    cell_of_request: dict[str, int] = {}
    stops, cut = [], []
    kept = 0  # bytes of outputs put back so far
    for event in events:
        index = event.get("ran")
        if isinstance(index, int) and 0 <= index < len(notebook.cells):
            cell = notebook.cells[index]
            outputs = event.get("outputs") if isinstance(event.get("outputs"), list) else []
            size = len(json.dumps(outputs, ensure_ascii=False, default=str))
            over = bool(outputs) and kept + size > OUTPUT_LIMIT
            kept += 0 if over else size
            try:
                cell.outputs = [nbformat.from_dict(output) for output in outputs]
            except Exception:  # outputs the sandbox wrote by hand: not kept
                cell.outputs = []
            if event.get("cut") or over:  # past OUTPUT_LIMIT: cut, and said where
                cut.append(index + 1)
                text = (
                    f"[output not kept: the notebook's outputs passed the grader's {_limit_text()} output limit here]\n"
                )
                cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=text)]
            cell.execution_count = (
                event.get("execution_count") if isinstance(event.get("execution_count"), int) else None
            )
            request = event.get("request")
            if isinstance(request, str) and request:
                cell_of_request.setdefault(request, index)
        elif "problem" in event:
            stops.append(str(event["problem"])[:200])
    if cut:
        stops.append(f"outputs past the {_limit_text()} output limit not kept ({_cells_text(cut)})")
    return cell_of_request, stops


def _limit_text() -> str:
    return f"{OUTPUT_LIMIT / 1024**2:g} MB"


def grade_notebook(
    notebook_path: Path,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    *,
    student: str | None = None,
    kernel_name: str | None = None,
    threads: int | None = None,
    seed: int = 0,
    sandboxed: bool = True,
    variants: bool = False,
) -> GradeReport:
    """Execute the notebook in a sandbox, on a private copy of its folder, and grade what its
    check() calls recorded there, outside it (``lib.answer_grading``).

    Every stored output is cleared first and none counts: what counts is the answer each
    exercise's own cell recorded in this run, graded with the answer key the sandbox never
    saw, functions run on hidden inputs drawn from ``seed``. The notebook runs in a grading
    process of its own, with the grader's Python kernel (``kernel_name`` chooses another) and
    ``threads`` torch/OpenMP threads, so whatever it does (kill its parent, loop, exit) ends
    that run, never the caller. A cell that raises does not stop the run: the first error is
    named with its cell, and so is every syntax error. If the notebook runs past
    ``time_limit`` seconds (all cells together) or its kernel dies, the run stops there and
    the report says in which cell; exercises whose cell never recorded read "not run".
    ``sandboxed=False`` runs it as the caller, unprotected. ``variants``: the value exercises are
    graded on the numbers ``lib.variants`` draws for ``student`` (the folder's name by default),
    as that student's copy showed them; never on anything the notebook says about itself.
    Never raises on a student's notebook.
    """
    checks = _checks()
    notebook_path = Path(notebook_path)
    # the folder's own name even for a bare "01_....ipynb" (whose parent is ".")
    report = GradeReport(str(notebook_path), student if student is not None else notebook_path.absolute().parent.name)
    report.seed = seed
    # every exercise of the chapter counts, even one whose cell was deleted (or an unreadable file's)
    chapter = _chapter(notebook_path)
    report.exercises = dict.fromkeys(_chapter_exercises(notebook_path), checks.NOT_ATTEMPTED)
    start = time.monotonic()
    if notebook_path.is_symlink() or notebook_path.parent.is_symlink():
        # a link could hand in the teacher's solved chapter, or a classmate's notebook
        report.problems.append("not graded: the hand-in is a symbolic link, not a notebook of its own")
        return report
    try:  # read_plain: a FIFO or a device in a student's folder must not stall the batch
        text = read_plain(notebook_path, NOTEBOOK_LIMIT).decode("utf-8", errors="replace")
        notebook = _cleared(nbformat.reads(text, as_version=4))
    except Exception as error:  # an unreadable file is that notebook's line in the report
        report.problems.append(f"could not read the notebook ({type(error).__name__}: {error})"[:200])
        return report
    own = answer_grading.own_cells([c.source if c.cell_type == "code" else None for c in notebook.cells])
    known = variants_for(report.student) if variants else exercises()
    for exercise_id, index in own.items():
        if chapter is None or exercise_id.split(".")[0] == chapter:
            report.exercises[exercise_id] = NOT_RUN
            report.answers[exercise_id] = (index + 1, notebook.cells[index].source)
    try:
        events, process_problems, records = supervise(
            notebook, notebook_path, time_limit, kernel_name, threads, _kinds(), sandboxed=sandboxed
        )
    except Exception as error:  # e.g. no room for the temporary folder: this notebook's line says so
        report.problems.append(f"could not run the notebook ({type(error).__name__}: {error})"[:200])
        report.seconds = round(time.monotonic() - start, 1)
        return report
    cell_of_request, stops = _apply_events(notebook, events)
    report.executed = notebook
    report.problems += _error_problems(notebook) + stops + process_problems
    counted, ignored = answer_grading.counted_answers(
        [r for r in records if r["id"] in known], own, cell_of_request, chapter
    )
    report.problems += ignored
    passed: dict[str, tuple[int, int]] = {}
    graded = answer_grading.grade_answers(known, counted, seed, passed=passed, sandboxed=sandboxed)
    report.cases = passed
    for exercise_id, result in graded.items():  # the grade also shows in the exercise's cell of the executed copy
        notebook.cells[own[exercise_id]].outputs.append(
            nbformat.v4.new_output("display_data", data=result.mime_bundle(), metadata={"graded": True})
        )
        report.exercises[exercise_id] = result.status
        report.details[exercise_id] = {
            **{name: str(getattr(result, name) or "") for name in ("message", "feedback", "hint", "mistake")},
            "cell": own[exercise_id] + 1,
        }
    # An id the book does not have (a typo, or an exercise since renamed) is no column and does
    # not count: the report says so instead.
    for unknown in [i for i in report.exercises if i not in known]:
        del report.exercises[unknown]
        report.details.pop(unknown, None)
        report.answers.pop(unknown, None)
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
    seed: int | None = None,
    sandboxed: bool = True,
    variants: bool = False,
) -> list[GradeReport]:
    """Grade every notebook, ``jobs`` at a time (default: one per core), each kernel with its
    share of the cores in threads, each in a sandbox (``SandboxUnavailable`` when there is
    none, unless ``sandboxed`` is False). The hidden inputs are drawn from ``seed`` (default:
    a fresh one, in every report). Returns the reports in the order of ``paths``;
    ``on_report`` sees each as soon as it is done."""
    jobs = jobs or available_cores()
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if sandboxed and not sandbox.available()[0]:
        raise SandboxUnavailable(sandbox.UNAVAILABLE_HELP.format(why=sandbox.available()[1]))
    seed = secrets.randbelow(2**31) if seed is None else seed
    threads = kernel_threads(jobs)
    exercises()  # load the book once, before the threads
    allow_grading()
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [
            pool.submit(
                grade_notebook,
                path,
                time_limit,
                kernel_name=kernel_name,
                threads=threads,
                seed=seed,
                sandboxed=sandboxed,
                variants=variants,
            )  # fmt: skip
            for path in paths
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
        allow_grading()  # every thread is done: the next batch may start grading processes

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
reported. Nothing a notebook does stops the batch: each notebook has a time limit, and an
endless loop, a kernel that dies, or a syntax error becomes that notebook's line in the
report ("timed out in cell 12", "kernel died in cell 3", "kernel stopped by exit() in cell 4",
"syntax error in cell 5, line 2") while grading goes on with the next. The kernel runs in the
notebook's own folder. A chapter's notebook (``01_....ipynb``) is graded on every exercise of
its chapter, so one whose cell the student deleted reads "not attempted" and still counts;
a ``check`` of an id the book does not have (a typo, a renamed exercise) is a problem line,
not a column.
A copy is never written with an answer in it: a solution marker left unmatched (``# END
SOLUTON``) stops that chapter's copy with an error that names the cell.

    python -m lib.student copy chapters student            # write missing student copies
    python -m lib.student grade submissions/*/*.ipynb      # run and grade; a table per student
    python -m lib.student grade ... --json grades.json     # the same, for a spreadsheet

A notebook's student is the name of its folder (``submissions/ada/01_...ipynb`` is Ada's);
cells are numbered from 1, counting markdown cells, as they appear in the notebook.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from lib.checks import CORRECT, NOT_ATTEMPTED, RESULT_KEY, exercises

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_SOLUTION_BLOCK = re.compile(rf"^([ \t]*){BEGIN}[ \t]*\r?\n(.*?)^[ \t]*{END}[ \t]*\r?$", re.S | re.M)
# Any line that looks like a solution marker ("#END SOLUTON", "# begin solution"): one left over
# after stripping means a block was not recognised, and its answer would reach the student.
_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*(BEGIN|END)[ \t_-]*SOLU", re.I | re.M)
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")
NOT_RUN = "not run"
DEFAULT_TIME_LIMIT_S = 180.0  # per notebook: a chapter runs in well under a minute


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


@dataclass
class GradeReport:
    """What grading one notebook found."""

    notebook: str
    student: str
    exercises: dict[str, str] = field(default_factory=dict)  # id -> correct/incorrect/not attempted/not run
    problems: list[str] = field(default_factory=list)  # "timed out in cell 12", "syntax error in cell 5, line 2"
    seconds: float = 0.0

    @property
    def n_correct(self) -> int:
        return sum(status == CORRECT for status in self.exercises.values())

    def as_dict(self) -> dict:
        return {**asdict(self), "correct": self.n_correct, "total": len(self.exercises)}


def _chapter_exercises(notebook_path: Path) -> list[str]:
    """The ids of the chapter a notebook's name starts with ("01_....ipynb": chapter 1's), so
    that an exercise whose cell the student deleted is still a column, and still counts."""
    match = re.match(r"(\d+)_", Path(notebook_path).name)
    if not match:
        return []
    chapter = str(int(match.group(1)))
    return [i for i in exercises() if i.split(".")[0] == chapter]


def _first_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()[:60]
    return ""


def _error_problem(number: int, cell) -> str | None:
    """'syntax error in cell N, line L' when the cell's output is a SyntaxError, else None."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") in (
            "SyntaxError",
            "IndentationError",
            "TabError",
        ):
            match = re.search(r"line (\d+)", " ".join(output.get("traceback", [])))
            where = f", line {match.group(1)}" if match else ""
            detail = re.sub(r"\s*\([^()]*, line \d+\)", "", output.get("evalue", ""))  # drop "(12345.py, line 3)"
            return f"syntax error in cell {number}{where}: {detail}".rstrip(": ")
    return None


def grade_notebook(
    notebook_path: Path,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    *,
    student: str | None = None,
    kernel_name: str | None = None,
) -> GradeReport:
    """Execute the notebook in its own folder and report what each check() call said.

    A cell that raises does not stop the run: the exercises after it are still graded, and
    a syntax error is noted with its cell. If the notebook runs past ``time_limit`` seconds
    (all cells together) or its kernel dies, the run stops there and the report says in
    which cell; exercises whose check() never reported read "not run". Never raises on a
    student's notebook.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    notebook_path = Path(notebook_path)
    # the folder's own name even for a bare "01_....ipynb" (whose parent is ".")
    report = GradeReport(str(notebook_path), student if student is not None else notebook_path.absolute().parent.name)
    # every exercise of the chapter counts, even one whose cell was deleted (or an unreadable file's)
    report.exercises = dict.fromkeys(_chapter_exercises(notebook_path), NOT_ATTEMPTED)
    start = time.monotonic()
    try:
        notebook = nbformat.read(notebook_path, as_version=4)
    except Exception as error:  # noqa: BLE001 - an unreadable file is that notebook's line in the report
        report.problems.append(f"could not read the notebook ({type(error).__name__}: {error})"[:200])
        return report
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    report.exercises.update(dict.fromkeys(_CHECK_CALL.findall(code), NOT_RUN))
    exited: list[int] = []  # cells that called exit(): IPython then shuts the kernel down, a moment later

    def on_cell_executed(cell, cell_index: int, execute_reply: dict) -> None:
        payloads = (execute_reply or {}).get("content", {}).get("payload", [])
        if any(p.get("source") == "ask_exit" and not p.get("keepkernel") for p in payloads):
            exited.append(cell_index)

    options = {"kernel_name": kernel_name} if kernel_name else {}
    client = NotebookClient(
        notebook,
        timeout=max(1, int(time_limit)),
        allow_errors=True,
        interrupt_on_timeout=False,
        record_timing=False,
        shutdown_kernel="immediate",
        on_cell_executed=on_cell_executed,
        resources={"metadata": {"path": str(notebook_path.resolve().parent)}},
        **options,
    )
    try:
        with client.setup_kernel():
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type != "code":
                    continue
                number = index + 1
                remaining = time_limit - (time.monotonic() - start)
                if remaining <= 0:
                    report.problems.append(f"timed out in cell {number} ({time_limit:g} s for the notebook)")
                    break
                client.timeout = max(1, int(remaining + 0.999))
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    report.problems.append(f"timed out in cell {number} ({time_limit:g} s for the notebook)")
                    break
                except DeadKernelError:
                    report.problems.append(f"kernel died in cell {number}")
                    break
                problem = _error_problem(number, cell)
                if problem:
                    report.problems.append(problem)
                if exited:  # stop here, as Jupyter would: what ran after it depended on timing
                    report.problems.append(f"kernel stopped by exit() in cell {number}")
                    break
    except DeadKernelError:
        if not any(p.startswith("kernel died") for p in report.problems):
            report.problems.append("kernel died")
    except Exception as error:  # noqa: BLE001 - e.g. the kernel would not start; grading goes on
        report.problems.append(f"could not run the notebook ({type(error).__name__}: {error})"[:200])
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            record = output.get("metadata", {}).get(RESULT_KEY)
            if record and "id" in record and "status" in record:
                report.exercises[record["id"]] = record["status"]
    # An id the book does not have (a typo, or an exercise since renamed) is no column and does
    # not count: the report says so instead.
    known = exercises()
    for unknown in [i for i in report.exercises if i not in known]:
        del report.exercises[unknown]
        report.problems.append(f"check() names no exercise of the book: {unknown!r}")
    report.seconds = round(time.monotonic() - start, 1)
    return report


_MARKS = {"correct": "✓", "incorrect": "✗", "not attempted": "·", NOT_RUN: "–"}


def format_table(reports: Sequence[GradeReport]) -> str:
    """One row per (student, notebook), one column per exercise, then the score and any problem."""
    ids = list(dict.fromkeys(i for report in reports for i in report.exercises))
    header = ["student", "notebook", *ids, "score", "problems"]
    rows = [
        [
            report.student,
            Path(report.notebook).name,
            *(_MARKS.get(report.exercises[i], "?") if i in report.exercises else "" for i in ids),
            f"{report.n_correct}/{len(report.exercises)}",
            "; ".join(report.problems),
        ]
        for report in sorted(reports, key=lambda r: (r.student, Path(r.notebook).name))
    ]
    widths = [max(len(str(row[c])) for row in [header, *rows]) for c in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    legend = "  ".join(f"{mark} {status}" for status, mark in _MARKS.items())
    return "\n".join(lines + ["", legend])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.student", description="Student copies and grading.")
    commands = parser.add_subparsers(dest="command", required=True)
    copy = commands.add_parser("copy", help="write student copies of every notebook in a folder (keeps existing ones)")
    copy.add_argument("source", type=Path)
    copy.add_argument("out", type=Path)
    copy.add_argument("--overwrite", action="store_true", help="replace existing copies (a learner's work is lost)")
    grade = commands.add_parser("grade", help="execute notebooks and report each exercise's status")
    grade.add_argument("notebooks", type=Path, nargs="+")
    grade.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        help=f"seconds each notebook may run, all cells together (default {DEFAULT_TIME_LIMIT_S:g})",
    )
    grade.add_argument("--json", type=Path, metavar="PATH", help="also write the report as JSON, for a spreadsheet")
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
    reports = []
    for path in args.notebooks:
        report = grade_notebook(path, args.time_limit)
        reports.append(report)
        problems = f"  [{'; '.join(report.problems)}]" if report.problems else ""
        print(f"graded {path}: {report.n_correct}/{len(report.exercises)} correct in {report.seconds:g} s{problems}")
    print()
    print(format_table(reports))
    if args.json:
        args.json.write_text(json.dumps([report.as_dict() for report in reports], indent=1, ensure_ascii=False) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

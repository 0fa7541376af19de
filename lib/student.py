"""Student copies of the chapters, and the command line for copies and grading (DESIGN: "What a learner opens").

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
A copy is never written with an answer in it: a solution marker left unmatched (``# END
SOLUTON``) stops that chapter's copy with an error that names the cell.

Grading lives in ``lib.batch_grading`` (a notebook executed afresh in a sandbox, its recorded
answers graded outside it), ``lib.grading_process`` and ``lib.sandbox`` (the supervised,
sandboxed process each notebook runs in), ``lib.answer_grading`` and ``lib.hidden_runs`` (the
grade, computed with the answer key) and ``lib.grade_reports`` (table, summary, gradebook,
feedback files):

    python -m lib.student copy chapters student            # write missing student copies
    python -m lib.student copy chapters student --variant ada        # with Ada's own numbers
    python -m lib.student copy chapters copies --roster class.csv    # copies/<name>/ for each student
    python -m lib.student grade submissions/*/*.ipynb      # run and grade; a table per student
    python -m lib.student grade ... --json grades.json     # the same, with what check() said
    python -m lib.student grade ... --csv book.csv         # the gradebook: a row per notebook
    python -m lib.student grade ... --feedback out/        # out/<student>/<notebook>.md to send back
    python -m lib.student grade ... --jobs 4 --kernel NAME # 4 at once; another Jupyter kernel
    python -m lib.student grade ... --seed 7               # the hidden inputs a run drew, again
    python -m lib.student grade ... --no-sandbox           # where no bwrap runs: unprotected

A notebook's student is the name of its folder (``submissions/ada/01_...ipynb`` is Ada's).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import nbformat

from lib import variants
from lib.batch_grading import GradeReport, SandboxUnavailable, grade_notebooks
from lib.grade_reports import class_summary, format_table, write_csv, write_feedback
from lib.grading_process import DEFAULT_TIME_LIMIT_S, available_cores
from lib.roster import RosterError, read_roster

__all__ = ["BEGIN", "END", "defined_names", "strip_solutions", "student_notebook", "make_student_copy", "main"]

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_SOLUTION_BLOCK = re.compile(rf"^([ \t]*){BEGIN}[ \t]*\r?\n(.*?)^[ \t]*{END}[ \t]*\r?$", re.S | re.M)
# Any line that looks like a solution marker ("#END SOLUTON", "# begin solution"): one left over
# after stripping means a block was not recognised, and its answer would reach the student.
_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*(BEGIN|END)[ \t_-]*SOLU", re.I | re.M)


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


def with_numbers(notebook: nbformat.NotebookNode, variant: str | None = None) -> nbformat.NotebookNode:
    """``notebook`` (changed in place) with its questions' MyST substitutions (``{{ ex_1_new_values_a }}``)
    written out: the student ``variant``'s numbers (``lib.variants``), the book's when None."""
    values = variants.substitutions(variant)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = variants.render(cell.source, values)
    myst = notebook.metadata.get("myst", {})
    myst.pop("substitutions", None)
    if not myst:
        notebook.metadata.pop("myst", None)
    return notebook


def make_student_copy(
    notebook_path: Path, out_dir: Path, *, overwrite: bool = False, variant: str | None = None
) -> tuple[Path, bool]:
    """Write the student copy of ``notebook_path`` into ``out_dir``, its questions showing the
    numbers of the student ``variant`` (``lib.variants``; the book's numbers when None).

    Returns (path, written). A copy that exists already is the learner's work: it is kept
    as it is (written is False) unless ``overwrite`` is given. With a variant, ``out_dir``
    also gets the ``lib.variants.VARIANT_FILE`` that makes check() grade those numbers there.
    """
    out_path = Path(out_dir) / Path(notebook_path).name
    if out_path.exists() and not overwrite:
        return out_path, False
    notebook = with_numbers(student_notebook(nbformat.read(notebook_path, as_version=4)), variant)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, out_path)
    if variant is not None:
        (out_path.parent / variants.VARIANT_FILE).write_text(variant.strip() + "\n", encoding="utf-8")
    return out_path, True


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
    who = copy_command.add_mutually_exclusive_group()
    who.add_argument("--variant", metavar="NAME", help="the questions show the numbers drawn for this student")
    who.add_argument("--roster", type=Path, metavar="FILE", help="a copy per student of the class list, in OUT/<name>/")
    grade = commands.add_parser("grade", help="execute notebooks and report each exercise's status")
    grade.add_argument("notebooks", type=Path, nargs="+")
    grade.add_argument(
        "--time-limit",
        type=float,
        default=DEFAULT_TIME_LIMIT_S,
        help=f"seconds each notebook may run, all cells together (default {DEFAULT_TIME_LIMIT_S:g})",
    )
    grade.add_argument(
        "--jobs", type=_jobs, default=None, help=f"notebooks graded at once (default: the cores, {available_cores()})"
    )
    grade.add_argument(
        "--kernel", metavar="NAME", help="grade with this Jupyter kernel (default: the grader's own Python)"
    )
    grade.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without bubblewrap: each notebook runs as you, able to read and change your files and grades",
    )
    grade.add_argument("--seed", type=int, help="draw the hidden inputs from this seed (default: a fresh one)")
    grade.add_argument("--json", type=Path, metavar="PATH", help="also write the report as JSON")
    grade.add_argument("--csv", type=Path, metavar="PATH", help="also write a gradebook: a row per notebook")
    grade.add_argument(
        "--feedback", type=Path, metavar="DIR", help="write DIR/<student>/<notebook>.md and the executed notebook"
    )
    args = parser.parse_args(argv)
    if args.command == "copy":
        return _copy(args)

    def on_report(report: GradeReport) -> None:
        print(f"graded {report.notebook}: {report.n_correct}/{len(report.exercises)} correct in {report.seconds:g} s")
        for problem in report.problems:
            print(f"    {problem}")
        sys.stdout.flush()

    for output in (args.json, args.csv):  # made now: a missing folder must not lose a graded batch at the end
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
    try:
        reports = grade_notebooks(
            args.notebooks, args.time_limit, jobs=args.jobs, kernel_name=args.kernel, on_report=on_report,
            seed=args.seed, sandboxed=not args.no_sandbox,
        )  # fmt: skip
    except SandboxUnavailable as error:
        print(f"not grading: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ngrading interrupted: every grading process and kernel is stopped; no report written")
        return 130
    if args.no_sandbox:
        print("graded WITHOUT a sandbox (--no-sandbox): any notebook could have changed files and grades")
    print(f"hidden inputs drawn from seed {reports[0].seed if reports else args.seed} (--seed grades alike)")
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


def _copy(args: argparse.Namespace) -> int:
    if args.roster is not None:
        try:
            students = [(name, args.out / name) for name in read_roster(args.roster)]
        except RosterError as error:
            print(f"no copies written: {error}", file=sys.stderr)
            return 2
        for name, _ in students:
            if Path(name).name != name or name in (".", ".."):
                print(f"no copies written: roster name {name!r} cannot be a folder name", file=sys.stderr)
                return 2
    else:
        students = [(args.variant, args.out)]
    if args.variant is not None and not args.variant.strip():
        print("no copies written: --variant needs a student name", file=sys.stderr)
        return 2
    failed = 0
    for name, folder in students:
        for path in sorted(args.source.glob("*.ipynb")):
            try:
                out, written = make_student_copy(path, folder, overwrite=args.overwrite, variant=name)
            except ValueError as error:  # nothing is written: a copy must never carry an answer
                print(f"{path}: no copy written: {error}")
                failed += 1
                continue
            print(f"{out}  ({'written' if written else 'kept: it exists already'})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

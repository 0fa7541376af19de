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
    python -m lib.student grade submissions/*/*.ipynb      # run and grade; a table per student
    python -m lib.student grade ... --json grades.json     # the same, with what check() said
    python -m lib.student grade ... --roster class.txt --csv book.csv  # a row per student and chapter
    python -m lib.student grade ... --gradebook gb.json    # the gradebook's state: --update, merge
    python -m lib.student grade new/*/*.ipynb --update gb.json --overrides fixes.csv --csv book.csv
    python -m lib.student grade ... --seed 7 --shard 2/4 --gradebook part2.json   # one machine's share
    python -m lib.student merge part*.json --gradebook gb.json --csv book.csv --canvas canvas.csv
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

from lib.batch_grading import GradeReport, SandboxUnavailable, chapter_of, grade_notebooks
from lib.grade_reports import class_summary, format_table, summary_markdown, write_feedback
from lib.gradebook import GradebookError, reports_of
from lib.grading_process import DEFAULT_TIME_LIMIT_S, available_cores

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


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number, got {text!r}") from None
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"--jobs must be at least 1, got {jobs}")
    return jobs


def _chapters(text: str) -> list[str]:
    from lib.batch_grading import exercises

    have = {i.split(".")[0] for i in exercises()}
    chapters = [part.strip() for part in text.split(",") if part.strip()]
    wrong = [c for c in chapters if not c.isdigit() or str(int(c)) not in have]
    if wrong or not chapters:
        raise argparse.ArgumentTypeError(
            f"--chapters takes chapter numbers with exercises, comma-separated ({', '.join(sorted(have, key=int))}), "
            f"got {text!r}"
        )
    return [str(int(c)) for c in chapters]


def _add_outputs(command: argparse.ArgumentParser) -> None:
    """The files a gradebook is written to (grade and merge take the same)."""
    command.add_argument(
        "--gradebook",
        type=Path,
        metavar="PATH",
        help="write the gradebook's whole state as JSON (what --update, --shard and merge read)",
    )
    command.add_argument("--csv", type=Path, metavar="PATH",
                         help="write the gradebook CSV (a row per student and chapter, in points) and the class "
                              "summary beside it (PATH with .summary.md)")  # fmt: skip
    command.add_argument("--canvas", type=Path, metavar="PATH", help="write a CSV for Canvas's gradebook import")
    command.add_argument(
        "--overrides",
        type=Path,
        metavar="FILE",
        help="a CSV of student, exercise, points, reason: applied last, shown in the feedback",
    )
    command.add_argument(
        "--feedback",
        type=Path,
        metavar="DIR",
        help="write DIR/<student>/<notebook>.md (and, when graded now, the executed notebook)",
    )


def _write_outputs(state: dict, args: argparse.Namespace, reports: Sequence[GradeReport]) -> None:
    """The rows from ``state`` (overrides last), then every file asked for; ``reports`` are
    the ones graded now (with their executed notebooks) or the state's."""
    from lib.gradebook import apply_overrides, build_rows, write_state
    from lib.gradebook_csv import write_canvas, write_gradebook

    rows, notes = build_rows(
        reports_of(state), roster=state["roster"], chapters=state["chapters"], partial=state["partial"]
    )
    apply_overrides(rows, state["overrides"])
    print()
    print(class_summary(rows))
    for note in notes:
        print(f"note: {note}")
    target = getattr(args, "update", None) or args.gradebook
    if target:
        write_state(state, target)
        print(f"wrote {target}")
    if args.csv:
        write_gradebook(rows, args.csv)
        summary = args.csv.with_suffix(".summary.md")
        summary.write_text(summary_markdown(rows, notes), encoding="utf-8")
        print(f"wrote {args.csv} and {summary}")
    if args.canvas:
        write_canvas(rows, args.canvas)
        print(f"wrote {args.canvas}")
    if args.feedback:
        by_key = {(row.student, row.chapter): row for row in rows}
        for report in reports:
            write_feedback(report, args.feedback, by_key.get((report.student, chapter_of(report.notebook))))
        print(f"wrote feedback for {len(reports)} notebook{'s' if len(reports) != 1 else ''} in {args.feedback}")


def _merge(args: argparse.Namespace) -> int:
    from lib.gradebook import merge_states, read_overrides, read_state

    try:
        state = merge_states([read_state(path) for path in args.shards], [str(path) for path in args.shards])
        if args.overrides:
            state["overrides"] = read_overrides(args.overrides)
        for output in (args.gradebook, args.csv, args.canvas):
            if output is not None:
                output.parent.mkdir(parents=True, exist_ok=True)
        _write_outputs(state, args, reports_of(state))
    except GradebookError as error:
        print(f"not merged: {error}", file=sys.stderr)
        return 2
    return 0


def _grade(args: argparse.Namespace) -> int:
    from lib.gradebook import (
        check_hand_ins,
        in_shard,
        make_state,
        parse_shard,
        read_overrides,
        read_state,
        update_state,
    )
    from lib.roster import RosterError, read_roster

    try:
        check_hand_ins(args.notebooks)
        shard = parse_shard(args.shard) if args.shard else None
        if shard and (args.seed is None or not (args.gradebook or args.json)):
            raise GradebookError("--shard needs --seed (every shard draws the same hidden inputs) and --gradebook")
        if args.update and (shard or args.gradebook):
            raise GradebookError("--update GRADEBOOK writes that gradebook: give neither --shard nor --gradebook")
        old = read_state(args.update) if args.update else None
        if old is not None and args.seed is not None and args.seed != old["seed"]:
            raise GradebookError(f"--seed {args.seed} differs from the gradebook's seed {old['seed']}")
        roster = read_roster(args.roster, args.roster_column) if args.roster else None
        overrides = read_overrides(args.overrides) if args.overrides else None
    except (GradebookError, RosterError) as error:
        print(f"not grading: {error}", file=sys.stderr)
        return 2
    notebooks = list(args.notebooks)
    if shard:
        notebooks = [p for p in notebooks if in_shard(Path(p).absolute().parent.name, *shard)]
        print(f"shard {args.shard}: {len(notebooks)} of {len(args.notebooks)} hand-ins")
    seed = old["seed"] if old is not None else args.seed

    def on_report(report: GradeReport) -> None:
        print(f"graded {report.notebook}: {report.n_correct}/{len(report.exercises)} correct in {report.seconds:g} s")
        for problem in report.problems:
            print(f"    {problem}")
        sys.stdout.flush()

    for output in (args.json, args.csv, args.gradebook, args.canvas):  # now: a missing folder must not lose a batch
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
    try:
        reports = grade_notebooks(
            notebooks, args.time_limit, jobs=args.jobs, kernel_name=args.kernel, on_report=on_report,
            seed=seed, sandboxed=not args.no_sandbox,
        )  # fmt: skip
    except SandboxUnavailable as error:
        print(f"not grading: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ngrading interrupted: every grading process and kernel is stopped; no report written")
        return 130
    if args.no_sandbox:
        print("graded WITHOUT a sandbox (--no-sandbox): any notebook could have changed files and grades")
    seed = reports[0].seed if reports else seed
    print(f"hidden inputs drawn from seed {seed} (--seed grades alike)")
    print()
    print(format_table(reports))
    if args.json:
        args.json.write_text(json.dumps([report.as_dict() for report in reports], indent=1, ensure_ascii=False) + "\n")
        print(f"\nwrote {args.json}")
    if old is not None:
        state = update_state(old, reports, overrides)
    else:
        state = make_state(reports, seed=seed if seed is not None else 0, partial=args.partial, roster=roster,
                           chapters=args.chapters, shard=args.shard, overrides=overrides or ())  # fmt: skip
    try:
        _write_outputs(state, args, reports)
    except GradebookError as error:
        print(f"gradebook not written: {error}", file=sys.stderr)
        return 2
    return 0


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
    grade.add_argument("--json", type=Path, metavar="PATH", help="also write each notebook's report as JSON")
    grade.add_argument(
        "--roster",
        type=Path,
        metavar="FILE",
        help="the class list (a name a line, or a CSV): a row for every name, 0 for what is missing",
    )
    grade.add_argument("--roster-column", metavar="NAME", help="the roster CSV's column of student names")
    grade.add_argument(
        "--chapters",
        type=_chapters,
        metavar="1,2,6",
        help="the chapters expected of everyone (default: the chapters handed in)",
    )
    grade.add_argument(
        "--partial",
        action="store_true",
        help="a function exercise earns its share of hidden cases passed (default: all or nothing)",
    )
    grade.add_argument(
        "--update",
        type=Path,
        metavar="GRADEBOOK",
        help="regrade these hand-ins into this gradebook (JSON), keeping its other rows and its seed",
    )
    grade.add_argument("--shard", metavar="K/N", help="grade the K-th of N shares of the students (needs --seed)")
    _add_outputs(grade)
    merge = commands.add_parser("merge", help="join the gradebooks of --shard 1/N ... N/N into one")
    merge.add_argument("shards", type=Path, nargs="+", metavar="SHARD.json")
    _add_outputs(merge)
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
    return _merge(args) if args.command == "merge" else _grade(args)


if __name__ == "__main__":
    raise SystemExit(main())

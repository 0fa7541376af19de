"""The command line of ``python -m lib.student grade`` and ``merge`` (``lib.student`` holds the parser).

``grade`` runs and grades the hand-ins (``lib.batch_grading``), prints the table and the class
summary, and writes what is asked: each notebook's report (``--json``), the gradebook's state
(``--gradebook``, or ``--update`` into an existing one), its CSV with the Markdown summary
beside it, the Canvas file and the feedback (``lib.gradebook``, ``lib.gradebook_csv``,
``lib.grade_reports``). With ``--shard K/N`` it grades the K-th share of the students only;
``merge`` joins the shards' gradebooks and writes the same files from them. Every refusal
(bad arguments, colliding hand-ins, a roster or overrides file that cannot be read) comes
before any notebook runs, names its argument, and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from lib.batch_grading import GradeReport, SandboxUnavailable, chapter_of, grade_notebooks
from lib.grade_reports import TABLE_WIDTH, class_summary, format_table, summary_markdown, write_feedback
from lib.gradebook import GradebookError, reports_of
from lib.grading_process import DEFAULT_TIME_LIMIT_S, available_cores

__all__ = ["add_grade_arguments", "add_merge_arguments", "run_grade", "run_merge"]


def add_grade_arguments(grade: argparse.ArgumentParser) -> None:
    """The ``grade`` command's arguments."""
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
        help="regrade these hand-ins into this gradebook (JSON): its other rows, seed, roster and chapters kept",
    )
    grade.add_argument(
        "--variants",
        action="store_true",
        help="the copies were made with copy --roster: grade each student against the numbers drawn for the name "
        "of their folder (the roster name), as their copy showed them",
    )
    grade.add_argument("--shard", metavar="K/N", help="grade the K-th of N shares of the students (needs --seed)")
    _add_outputs(grade)


def add_merge_arguments(merge: argparse.ArgumentParser) -> None:
    """The ``merge`` command's arguments: the shards' gradebooks, then the files to write."""
    merge.add_argument("shards", type=Path, nargs="+", metavar="SHARD.json")
    _add_outputs(merge)


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
    for note in notes:  # within the table's width, as the rest of the report
        print(textwrap.fill(f"note: {note}", TABLE_WIDTH, subsequent_indent="    ", break_on_hyphens=False))
    target = getattr(args, "update", None) or args.gradebook
    if target:
        write_state(state, target)
        print(f"wrote {target}")
    if args.csv:
        write_gradebook(rows, args.csv)
        summary = args.csv.with_suffix(".summary.md")
        summary.write_text(summary_markdown(rows, notes, state["seed"]), encoding="utf-8")
        print(f"wrote {args.csv} and {summary}")
    if args.canvas:
        write_canvas(rows, args.canvas)
        print(f"wrote {args.canvas}")
    if args.feedback:
        by_key = {(row.student, row.chapter): row for row in rows}
        for report in reports:
            write_feedback(report, args.feedback, by_key.get((report.student, chapter_of(report.notebook))))
        print(f"wrote feedback for {len(reports)} notebook{'s' if len(reports) != 1 else ''} in {args.feedback}")


def run_merge(args: argparse.Namespace) -> int:
    """``merge``: one gradebook from the shards' (exit status 2 when they do not make one)."""
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


def run_grade(args: argparse.Namespace) -> int:
    """``grade``: grade the hand-ins and write what is asked (exit status 2 on a refusal)."""
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
    variants = args.variants or (old is not None and bool(old.get("variants")))  # a regrade keeps the batch's rule

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
            seed=seed, sandboxed=not args.no_sandbox, variants=variants,
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
    if variants:
        print("each student graded on their own numbers, drawn from their folder's name (--variants)")
    print()
    print(format_table(reports))
    if args.json:
        args.json.write_text(json.dumps([report.as_dict() for report in reports], indent=1, ensure_ascii=False) + "\n")
        print(f"\nwrote {args.json}")
    if old is not None:  # the gradebook's roster, chapters and rule, unless given again
        state = update_state(old, reports, overrides)
        state["roster"] = roster if roster is not None else state["roster"]
        state["chapters"] = args.chapters or state["chapters"]
        state["partial"] = args.partial or state["partial"]
    else:
        state = make_state(reports, seed=seed if seed is not None else 0, partial=args.partial, roster=roster,
                           chapters=args.chapters, shard=args.shard, overrides=overrides or (),
                           variants=variants)  # fmt: skip
    try:
        _write_outputs(state, args, reports)
    except GradebookError as error:
        print(f"gradebook not written: {error}", file=sys.stderr)
        return 2
    return 0

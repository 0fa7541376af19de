"""What a teacher reads after grading: the terminal table, the class summary, the gradebook, feedback.

``format_table`` prints a row per notebook under 100 columns (a mark per exercise, the
problems wrapped under their column); ``class_summary`` gives each exercise's share correct
and its most common named mistake; ``write_csv`` is the gradebook, a row per notebook with
each student's totals; ``write_feedback`` writes a Markdown file per notebook to send back
(each answer, what check() said, the hint), with the executed notebook beside it.
"""

from __future__ import annotations

import csv
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import nbformat

from lib.batch_grading import NOT_RUN, GradeReport, exercises

__all__ = ["format_table", "class_summary", "write_csv", "feedback_markdown", "write_feedback", "TABLE_WIDTH"]

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

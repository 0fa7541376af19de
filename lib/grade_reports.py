"""What a teacher reads after grading: the terminal table, the class summary, the gradebook, feedback.

``format_table`` prints a row per notebook under 100 columns (a mark per exercise, the
problems wrapped under their column); ``class_summary`` and ``summary_markdown`` give, over
the gradebook's rows (``lib.gradebook``), each exercise's correct, wrong, blank and missing
counts and its most common named mistakes (all of them on a tie); ``write_feedback`` writes a
Markdown file per notebook to send back (each answer, what check() said, the hint, the points
and any override), with the executed notebook beside it, in one folder per student. The CSV
files are ``lib.gradebook_csv``'s.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import nbformat

from lib.batch_grading import NOT_RUN, GradeReport, exercises
from lib.gradebook import NOT_HANDED_IN, Row, folder_name
from lib.gradebook_csv import number

__all__ = ["format_table", "class_summary", "summary_markdown", "escape_markdown", "feedback_markdown"]
__all__ += ["write_feedback", "TABLE_WIDTH"]

_MARKS = {"correct": "✓", "incorrect": "✗", "not attempted": "·", NOT_RUN: "–"}
TABLE_WIDTH = 100
_PROBLEM_LINES = 3  # a row's problems take at most this many lines of the table


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


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


def _summary_counts(rows: Sequence[Row]) -> list[dict]:
    """Per exercise, over the rows that have it: correct, wrong (incorrect), blank (not
    attempted or not run), not handed in, the points given, and every named mistake made most
    often (all of them on a tie)."""
    order = {exercise_id: n for n, exercise_id in enumerate(exercises())}
    ids = sorted({i for row in rows for i in row.statuses}, key=lambda i: order.get(i, len(order)))
    counts = []
    for exercise_id in ids:
        having = [row for row in rows if exercise_id in row.statuses]
        statuses = Counter(row.statuses[exercise_id] for row in having)
        mistakes = Counter(row.mistakes[exercise_id] for row in having if exercise_id in row.mistakes)
        top = max(mistakes.values(), default=0)
        counts.append(
            {
                "id": exercise_id,
                "rows": len(having),
                "correct": statuses["correct"],
                "wrong": statuses["incorrect"],
                "blank": statuses["not attempted"] + statuses[NOT_RUN],
                "missing": statuses[NOT_HANDED_IN],
                "points": round(sum(row.points[exercise_id] for row in having), 4),
                "max": round(sum(row.maximum[exercise_id] for row in having), 4),
                "mistakes": sorted(" ".join(text.split()) for text, n in mistakes.items() if n == top),
                "mistake_count": top,
            }
        )
    return counts


def _heading(rows: Sequence[Row]) -> str:
    notebooks = sum(bool(row.notebook) for row in rows)
    students = len({row.student for row in rows})
    return f"{notebooks} notebook{'s' if notebooks != 1 else ''}, {students} student{'s' if students != 1 else ''}"


def class_summary(rows: Sequence[Row], width: int = TABLE_WIDTH) -> str:
    """Per exercise: how many rows got it right, wrong, left it blank or handed nothing in,
    and the named mistake made most often (each of them, on a tie): what to re-teach."""
    counts = _summary_counts(rows)
    lines = [f"Class summary: {_heading(rows)}"]
    id_width = max([len("exercise"), *(len(c["id"]) for c in counts)])
    lines.append(f"{'exercise'.ljust(id_width)}  correct   wrong blank missing  most common named mistake")
    for c in counts:
        share = f"{c['correct']}/{c['rows']} {round(100 * c['correct'] / c['rows']):>3}%"
        named = "; ".join(f"{c['mistake_count']}× {text}" for text in c["mistakes"]) or "—"
        left = f"{c['id'].ljust(id_width)}  {share.ljust(9)} {c['wrong']:>5} {c['blank']:>5} {c['missing']:>7}  "
        lines.append(left + _fit(named, max(20, width - len(left))))
    return "\n".join(lines)


def summary_markdown(rows: Sequence[Row], notes: Sequence[str] = (), seed: int | None = None) -> str:
    """The class summary as Markdown, for the file written next to the gradebook CSV (with the
    batch's ``seed``, which drew the hidden inputs, when given)."""
    lines = [f"# Class summary: {_heading(rows)}", ""]
    if seed is not None:
        lines += [f"Hidden inputs drawn from seed {seed} (`--seed {seed}` grades alike).", ""]
    lines += ["| exercise | points given | correct | wrong | blank | not handed in | most common named mistake |"]
    lines += ["|---|---:|---:|---:|---:|---:|---|"]
    for c in _summary_counts(rows):
        named = "<br>".join(f"{c['mistake_count']}× {escape_markdown(text)}" for text in c["mistakes"]) or "—"
        points = f"{number(c['points'])} of {number(c['max'])}"
        lines.append(f"| `{c['id']}` | {points} | {c['correct']} of {c['rows']} | {c['wrong']} | {c['blank']} | "
                     f"{c['missing']} | {named} |")  # fmt: skip
    if notes:
        lines += ["", "## Notes", "", *(f"- {escape_markdown(note)}" for note in notes)]
    return "\n".join(lines) + "\n"


def _fenced(source: str, language: str = "python") -> str:
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", source)), default=0))
    return f"{fence}{language}\n{source.rstrip()}\n{fence}"


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~!#])")


def escape_markdown(text: str) -> str:
    r"""Text a notebook chose (a name, an error message) as Markdown shows it, on one line:
    HTML escaped, Markdown's marks backslash-escaped, so nothing in it renders as a tag, a
    link, an image or a heading.

    >>> print(escape_markdown("<img src=x onerror=alert(1)> *bold* [a](b)"))
    &lt;img src=x onerror=alert(1)&gt; \*bold\* \[a\](b)
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(" ".join(str(text).split()), quote=False))


def feedback_markdown(report: GradeReport, row: Row | None = None) -> str:
    """The feedback to send back for one notebook: the score and problems, then per exercise
    its question, status, the learner's answer (the exercise's cell) and what check() said.
    With the notebook's gradebook ``row``: the points, and any override with its reason.
    Whatever the notebook chose (names, error text) is escaped; answers are fenced whole."""
    book = exercises()
    name = escape_markdown(Path(report.notebook).name)
    lines = [f"# {name}: feedback for {escape_markdown(report.student)}", ""]
    score = f"{report.n_correct} of {len(report.exercises)} correct"
    if row is not None and row.notebook == Path(report.notebook).name:
        score = f"{number(row.total)} of {number(row.max_total)} points ({score})"
    elif row is not None:
        score += f"; this notebook does not count: {escape_markdown(row.notebook)} is chapter {row.chapter}'s"
    lines.append(f"**Score: {score}.**")
    if report.problems:
        lines += ["", "What went wrong while running the notebook:", ""]
        lines += [f"- {escape_markdown(problem)}" for problem in report.problems]
    counted = row is not None and row.notebook == Path(report.notebook).name
    for n, (exercise_id, status) in enumerate(report.exercises.items(), start=1):
        points = f" ({number(row.points[exercise_id])} of {number(row.maximum[exercise_id])} points)" if counted else ""
        lines += ["", f"## {n}. `{exercise_id}`: {_MARKS.get(status, '?')} {status}{points}", ""]
        exercise = book.get(exercise_id)
        if exercise is not None:
            lines += [f"*{exercise.question}*", ""]
        if counted and exercise_id in row.overrides:
            change = row.overrides[exercise_id]
            lines += [f"**Changed by your teacher:** {number(change['points'])} points (was {number(change['was'])}): "
                      f"{escape_markdown(change['reason'])}", ""]  # fmt: skip
        if exercise_id in report.answers:
            number_, source = report.answers[exercise_id]
            lines += [f"Your answer (cell {number_}):", "", _fenced(source), ""]
        else:
            lines += ["This exercise's cell is not in the notebook (deleted?), so it counts as not attempted.", ""]
        detail = report.details.get(exercise_id)
        if detail is None:
            if exercise_id in report.answers:
                lines.append("check() did not report for this exercise in this run: the cell did not run to it.")
            continue
        lines.append(f"**Result:** {escape_markdown(detail['message'])}")
        if counted and exercise_id in report.cases and status == "incorrect":
            passed, cases = report.cases[exercise_id]
            lines += ["", f"Hidden cases passed: {passed} of {cases}."]
        for label, key in (("Feedback", "feedback"), ("Hint", "hint")):
            if detail[key]:
                lines += ["", f"**{label}:** {detail[key]}"]
    return "\n".join(lines).rstrip() + "\n"


def write_feedback(report: GradeReport, out_dir: Path, row: Row | None = None) -> Path:
    """Write ``out_dir/<folder>/<notebook>.md`` (``feedback_markdown``; the folder is
    ``lib.gradebook.folder_name`` of the student: one per student, reversible) and, beside it,
    the notebook as this run executed it (its outputs cut at the output limit). Returns the
    Markdown file's path."""
    folder = Path(out_dir) / folder_name(report.student)
    folder.mkdir(parents=True, exist_ok=True)
    name = Path(report.notebook).name
    if report.executed is not None:
        nbformat.write(report.executed, folder / name)
    path = folder / f"{Path(name).stem}.md"
    path.write_text(feedback_markdown(report, row), encoding="utf-8")
    return path

"""The gradebook's CSV files, safe to open in a spreadsheet: the full gradebook and a Canvas import.

Every field that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is written
with a leading apostrophe (``safe_field``, OWASP's rule against CSV injection), so a name, a
notebook or an error text the notebook chose reads as text in Excel, LibreOffice or Google
Sheets, never as a formula. Points are numbers, never negative, and need no such care.

``write_gradebook`` writes a row per student and chapter (``lib.gradebook.build_rows``): per
exercise its points and its status, the chapter's points and maximum, the student's points
and maximum over every chapter, the problems and the teacher's overrides. ``write_canvas``
writes the layout Canvas's gradebook import reads (README: "Grading a class, start to finish").
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from lib.batch_grading import exercises
from lib.gradebook import Row

__all__ = ["FORMULA_STARTS", "safe_field", "number", "write_gradebook", "write_canvas", "CANVAS_COLUMNS"]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


def safe_field(value) -> str:
    """A CSV field a spreadsheet shows as text (OWASP: a leading apostrophe before a formula start),
    also when spaces come first, since some spreadsheets trim them before reading the cell.

    >>> [safe_field(v) for v in ("=1+1", "@SUM(A1)", " +cmd", "ada", 2.5)]
    ["'=1+1", "'@SUM(A1)", "' +cmd", 'ada', '2.5']
    """
    text = number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    return "'" + text if text.lstrip(" \n\x0b\x0c").startswith(FORMULA_STARTS) else text


def number(value: float) -> str:
    """Points as a spreadsheet reads them: ``1``, ``0.83`` (two decimals at most)."""
    return f"{round(float(value), 2):g}"


def _ids(rows: Sequence[Row]) -> list[str]:
    order = {exercise_id: n for n, exercise_id in enumerate(exercises())}
    return sorted({i for row in rows for i in row.statuses}, key=lambda i: order.get(i, len(order)))


def _student_totals(rows: Sequence[Row]) -> dict[str, tuple[float, float]]:
    totals: dict[str, list[float]] = {}
    for row in rows:
        total = totals.setdefault(row.student, [0.0, 0.0])
        total[0] += row.total
        total[1] += row.max_total
    return {student: (round(a, 4), round(b, 4)) for student, (a, b) in totals.items()}


def _write(path: Path, lines: list[list]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows([[safe_field(value) for value in line] for line in lines])


def write_gradebook(rows: Sequence[Row], path: Path) -> None:
    """The gradebook CSV: a row per student and chapter, the points per exercise (its status
    beside it), per chapter and per student, each total with its maximum beside it."""
    ids = _ids(rows)
    totals = _student_totals(rows)
    header = ["student", "chapter", "notebook"]
    header += [column for i in ids for column in (i, f"{i} status")]
    header += ["points", "max points", "student points", "student max points", "problems", "overrides"]
    lines: list[list] = [header]
    for row in rows:
        cells: list = [row.student, row.chapter, row.notebook]
        for i in ids:
            cells += [row.points[i], row.statuses[i]] if i in row.statuses else ["", ""]
        overrides = "; ".join(
            f"{i}: {number(o['points'])} (was {number(o['was'])}): {o['reason']}" for i, o in row.overrides.items()
        )
        cells += [row.total, row.max_total, *totals[row.student], "; ".join(row.problems), overrides]
        lines.append(cells)
    _write(path, lines)


def write_canvas(rows: Sequence[Row], path: Path) -> None:
    """The Canvas gradebook import: a row per student, a column per chapter (an assignment,
    "Chapter 1 notebook"), its points, below a "Points Possible" row with each maximum. The
    student's name goes in Student and in SIS Login ID (the submission folder's name)."""
    chapters = list(dict.fromkeys(row.chapter for row in rows))
    by_student: dict[str, dict[str, Row]] = {}
    for row in rows:
        by_student.setdefault(row.student, {})[row.chapter] = row
    maximum = {row.chapter: row.max_total for row in rows}
    lines: list[list] = [[*CANVAS_COLUMNS, *(f"Chapter {c} notebook" for c in chapters)]]
    lines.append(["    Points Possible", "", "", "", "", *(maximum[c] for c in chapters)])
    for student, theirs in by_student.items():
        lines.append([student, "", "", student, "", *(theirs[c].total if c in theirs else "" for c in chapters)])
    _write(path, lines)

"""A class list, read once for both commands that take one: ``python -m lib.student copy
--roster FILE`` (a student copy per name) and ``python -m lib.student grade --roster FILE``
(a row per name and chapter, zeros for what was not handed in).

A roster is either plain text, one student a line (blank lines and lines starting with ``#``
are skipped), or a CSV file with a header row, whose student column is named by ``column=``
or found among the usual headers (``student``, ``name``, ``login``, ``username``, ``id``,
case-insensitive). Names are stripped of surrounding space; a name listed twice is an error
that names both lines, since two students cannot share one grade or one variant.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

__all__ = ["STUDENT_COLUMNS", "RosterError", "read_roster", "parse_roster"]

STUDENT_COLUMNS = ("student", "name", "login", "username", "id")
_MAX_BYTES = 4 * 1024 * 1024  # a class list, not a data set


class RosterError(ValueError):
    """A roster that cannot be read as a list of distinct student names."""


def read_roster(path: str | Path, column: str | None = None) -> list[str]:
    """The student names in the roster file at ``path``, in file order."""
    path = Path(path)
    if not path.is_file():
        raise RosterError(f"roster {str(path)!r} is not a file")
    if path.stat().st_size > _MAX_BYTES:
        raise RosterError(f"roster {str(path)!r} is over {_MAX_BYTES // 2**20} MiB: is it the right file?")
    text = path.read_text(encoding="utf-8-sig")
    return parse_roster(text, column=column, source=str(path))


def parse_roster(text: str, column: str | None = None, source: str = "roster") -> list[str]:
    """The student names in a roster's text (see the module docstring for the two forms).

    >>> parse_roster("ada\\n# comment\\n\\n  grace  \\n")
    ['ada', 'grace']
    >>> parse_roster("email,Student\\na@x,ada\\ng@x,grace\\n")
    ['ada', 'grace']
    """
    lines = text.splitlines()
    first = next((line for line in lines if line.strip() and not line.lstrip().startswith("#")), "")
    rows: list[tuple[int, str]]
    if column is not None or _looks_like_csv_header(first):
        rows = _csv_names(text, column, source)
    else:
        rows = [
            (number, line.strip())
            for number, line in enumerate(lines, start=1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    seen: dict[str, int] = {}
    names = []
    for number, name in rows:
        if name in seen:
            raise RosterError(f"{source}: {name!r} is listed twice (lines {seen[name]} and {number})")
        seen[name] = number
        names.append(name)
    if not names:
        raise RosterError(f"{source}: no student names in it")
    return names


def _looks_like_csv_header(line: str) -> bool:
    if "," not in line:
        return False
    cells = [cell.strip().strip('"').lower() for cell in next(csv.reader([line]))]
    return any(cell in STUDENT_COLUMNS for cell in cells)


def _csv_names(text: str, column: str | None, source: str) -> list[tuple[int, str]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise RosterError(f"{source}: empty CSV")
    lowered = [cell.strip().lower() for cell in header]
    if column is not None:
        if column.strip().lower() not in lowered:
            raise RosterError(f"{source}: no column {column!r}; the header has {header}")
        index = lowered.index(column.strip().lower())
    else:
        index = next(lowered.index(name) for name in STUDENT_COLUMNS if name in lowered)
    rows = []
    for number, row in enumerate(reader, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if index >= len(row) or not row[index].strip():
            raise RosterError(f"{source}: line {number} has no {header[index]!r}")
        rows.append((number, row[index].strip()))
    return rows

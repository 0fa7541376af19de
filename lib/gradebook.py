"""The gradebook: a row per student and chapter, in points, from a batch's reports (``lib.batch_grading``).

Every student on the roster (or, without one, every student found) gets a row for every
chapter expected (default: the chapters found); a chapter not handed in scores 0 and says so.
Each exercise counts once per student, from the notebook of its own chapter only: the
student's notebook named as the book names the chapter, or their one notebook of that
chapter; another of the same chapter (a renamed copy) and a notebook that is no chapter's
are named problems, not marks (a ``check()`` of another chapter's exercise is one already,
in ``lib.batch_grading``). An exercise is worth its ``points`` (default 1); with
``partial``, a function exercise graded incorrect earns its points times the share of hidden
cases it passed. Overrides (student, exercise, points, reason) are applied last.

The state of a gradebook (its seed, roster, chapters, overrides and every notebook's
report) is one JSON file (``write_state``): ``--shard K/N`` writes one per shard
(``in_shard``: a student's share is fixed by their name), ``merge_states`` joins them, and
``update_state`` regrades some hand-ins into an existing one. Rows are rebuilt from the
state, so a merged gradebook is the one a single run writes.
"""

from __future__ import annotations

import csv
import io
import json
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from lib.batch_grading import GradeReport, chapter_of, exercises

__all__ = ["NOT_HANDED_IN", "GradebookError", "Row", "build_rows", "folder_name", "student_of_folder"]
__all__ += ["check_hand_ins", "parse_shard", "in_shard", "read_overrides", "apply_overrides"]
__all__ += ["make_state", "write_state", "read_state", "reports_of", "merge_states", "update_state"]

NOT_HANDED_IN = "not handed in"
CHAPTERS_DIR = Path(__file__).resolve().parent.parent / "chapters"
_MAX_OVERRIDES_BYTES = 4 * 1024**2


class GradebookError(ValueError):
    """Hand-ins, overrides or gradebook files that cannot make one gradebook (the message says why)."""


@dataclass
class Row:
    """One student's grade for one chapter: per exercise its status, points and maximum."""

    student: str
    chapter: str
    notebook: str = ""  # the counted notebook's file name; "" when none was handed in
    statuses: dict[str, str] = field(default_factory=dict)
    points: dict[str, float] = field(default_factory=dict)
    maximum: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    overrides: dict[str, dict] = field(default_factory=dict)  # id -> {"points", "was", "reason"}
    mistakes: dict[str, str] = field(default_factory=dict)  # id -> the named mistake of a wrong answer

    @property
    def total(self) -> float:
        return round(sum(self.points.values()), 4)

    @property
    def max_total(self) -> float:
        return round(sum(self.maximum.values()), 4)


def exercise_points(exercise_id: str) -> float:
    """What an exercise is worth: its ``points``, 1 when it declares none."""
    points = exercises()[exercise_id].points
    if isinstance(points, bool) or not isinstance(points, (int, float)) or not points > 0:
        raise GradebookError(f"exercise {exercise_id!r} declares points={points!r}: a positive number is needed")
    return float(points)


def _chapter_ids(chapter: str) -> list[str]:
    return [i for i in exercises() if i.split(".")[0] == chapter]


def _book_notebook(chapter: str) -> str | None:
    """The book's file name for a chapter's notebook ("01_one_attention_read.ipynb")."""
    return next((p.name for p in sorted(CHAPTERS_DIR.glob("*.ipynb")) if chapter_of(p) == chapter), None)


def points_for(report: GradeReport, exercise_id: str, partial: bool) -> float:
    """The points an exercise's status earns: all when correct; with ``partial``, an incorrect
    function its share of the hidden cases passed; else none."""
    full, status = exercise_points(exercise_id), report.exercises.get(exercise_id)
    if status == "correct":
        return full
    if partial and status == "incorrect" and exercise_id in report.cases:
        passed, cases = report.cases[exercise_id]
        return round(full * passed / cases, 4) if cases else 0.0
    return 0.0


def build_rows(
    reports: Sequence[GradeReport],
    *,
    roster: Sequence[str] | None = None,
    chapters: Sequence[str] | None = None,
    partial: bool = False,
) -> tuple[list[Row], list[str]]:
    """The gradebook's rows (roster order, then students not on it, by name; chapters in
    order) and the class-level notes: roster names with no hand-in, hand-ins of no roster name,
    notebooks that count for nothing."""
    by_student: dict[str, list[GradeReport]] = {}
    for report in sorted(reports, key=lambda r: (r.student, Path(r.notebook).name)):
        by_student.setdefault(report.student, []).append(report)
    found = {chapter_of(r.notebook) for r in reports} - {None}
    chapters = [str(int(c)) for c in chapters] if chapters else sorted(found, key=int)
    notes = []
    students = list(roster or [])
    if roster is not None:
        missing = [name for name in roster if name not in by_student]
        extra = sorted(name for name in by_student if name not in set(roster))
        if missing:
            notes.append(f"on the roster, no hand-in found: {', '.join(missing)}")
        if extra:
            notes.append(f"handed in, not on the roster: {', '.join(extra)}")
    students += sorted(name for name in by_student if name not in set(students))
    rows = []
    for student in students:
        theirs = by_student.get(student, [])
        for report in theirs:
            name, chapter = Path(report.notebook).name, chapter_of(report.notebook)
            if chapter is None:
                notes.append(f"{student}: {name} is no chapter's notebook (no chapter number): not counted")
            elif chapter not in chapters:
                notes.append(f"{student}: {name} is chapter {chapter}'s, not a chapter graded here: not counted")
        for chapter in chapters:
            rows.append(_row(student, chapter, [r for r in theirs if chapter_of(r.notebook) == chapter], partial))
    return rows, notes


def _row(student: str, chapter: str, candidates: list[GradeReport], partial: bool) -> Row:
    ids = _chapter_ids(chapter)
    row = Row(student, chapter, maximum={i: exercise_points(i) for i in ids})
    if not candidates:
        row.statuses, row.points, row.problems = (
            dict.fromkeys(ids, NOT_HANDED_IN),
            dict.fromkeys(ids, 0.0),
            [NOT_HANDED_IN],
        )
        return row
    book_name = _book_notebook(chapter)
    counted = next((r for r in candidates if Path(r.notebook).name == book_name), candidates[0])
    row.notebook = Path(counted.notebook).name
    row.statuses = {i: counted.exercises.get(i, "not attempted") for i in ids}
    row.points = {i: points_for(counted, i, partial) for i in ids}
    row.problems = list(counted.problems)
    row.mistakes = {
        i: counted.details[i]["mistake"]
        for i in ids
        if row.statuses[i] == "incorrect" and counted.details.get(i, {}).get("mistake")
    }
    for other in candidates:
        if other is not counted:
            row.problems.append(
                f"{Path(other.notebook).name} is a second chapter-{chapter} notebook (a renamed copy?): "
                f"not counted, {row.notebook} is"
            )
    return row


def folder_name(student: str) -> str:
    """The student's feedback folder: their name with every character but letters, digits and
    ``_-~`` percent-encoded (a dot too, at either end), so that no two names share one and
    ``student_of_folder`` gives the name back.

    >>> [folder_name(n) for n in ("mary ann", "mary_ann", "..", "=1+1")]
    ['mary%20ann', 'mary_ann', '%2E%2E', '%3D1%2B1']
    >>> student_of_folder(folder_name("../ada é"))
    '../ada é'
    """
    text = quote(student, safe="")
    if text.startswith("."):
        text = "%2E" + text[1:]
    if text.endswith("."):
        text = text[:-1] + "%2E"
    return text


def student_of_folder(folder: str) -> str:
    """The name a feedback folder was made from (``folder_name`` reversed)."""
    return unquote(folder)


def check_hand_ins(paths: Sequence[Path]) -> None:
    """Refuse hand-ins that would share one feedback file: one student's two notebooks of one
    name, or two students whose folders differ only in case or Unicode form (one folder on a
    disk that ignores those)."""
    seen: dict[tuple[str, str], Path] = {}
    folders: dict[str, str] = {}
    for path in paths:
        student = Path(path).absolute().parent.name
        key = (student, Path(path).name)
        if key in seen:
            raise GradebookError(
                f"two hand-ins would be graded as one: {seen[key]} and {path} (student {student!r}, {Path(path).name})"
            )
        seen[key] = Path(path)
        folder = unicodedata.normalize("NFC", folder_name(unicodedata.normalize("NFC", student))).casefold()
        if folders.setdefault(folder, student) != student:
            raise GradebookError(
                f"students {folders[folder]!r} and {student!r} would share one feedback folder on a disk that "
                "ignores case: rename one folder"
            )


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N), 1 <= K <= N."""
    try:
        k, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise GradebookError(f"--shard takes K/N (the K-th of N shares, e.g. 2/4), got {text!r}") from None
    if not 1 <= k <= n:
        raise GradebookError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def in_shard(student: str, k: int, n: int) -> bool:
    """Whether a student's hand-ins are the K-th of N shares': fixed by the name alone
    (CRC-32 of its UTF-8), so every machine agrees whatever else it sees."""
    return zlib.crc32(student.encode("utf-8")) % n == k - 1


def read_overrides(path: Path) -> list[dict]:
    """The overrides file: a CSV with the columns student, exercise, points and reason."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size > _MAX_OVERRIDES_BYTES:
        raise GradebookError(f"--overrides {str(path)!r} is not a file of at most 4 MiB")
    reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))
    header = [name.strip().lower() for name in reader.fieldnames or []]
    if not {"student", "exercise", "points", "reason"} <= set(header):
        raise GradebookError(f"--overrides {str(path)!r}: the header must name student, exercise, points, reason")
    overrides = []
    for number, raw in enumerate(reader, start=2):
        entry = {key.strip().lower(): (value or "").strip() for key, value in raw.items() if key}
        where = f"--overrides {path.name} line {number}"
        if entry["exercise"] not in exercises():
            raise GradebookError(f"{where}: no exercise {entry['exercise']!r} in the book")
        try:
            points = float(entry["points"])
        except ValueError:
            raise GradebookError(f"{where}: points {entry['points']!r} is not a number") from None
        if not 0 <= points <= exercise_points(entry["exercise"]):
            raise GradebookError(f"{where}: points {points:g} is outside 0..{exercise_points(entry['exercise']):g}")
        overrides.append({"student": entry["student"], "exercise": entry["exercise"], "points": points,
                          "reason": entry["reason"], "line": number})  # fmt: skip
    return overrides


def apply_overrides(rows: Sequence[Row], overrides: Sequence[dict]) -> None:
    """Set each override's points on its row (last of all), keeping what it replaced and why."""
    index = {(row.student, row.chapter): row for row in rows}
    for entry in overrides:
        chapter = entry["exercise"].split(".")[0]
        row = index.get((entry["student"], chapter))
        if row is None:
            raise GradebookError(
                f"override line {entry.get('line', '?')}: no row for student {entry['student']!r} in chapter {chapter}"
            )
        was = row.overrides.get(entry["exercise"], {}).get("was", row.points[entry["exercise"]])
        row.overrides[entry["exercise"]] = {"points": entry["points"], "was": was, "reason": entry["reason"]}
        row.points[entry["exercise"]] = entry["points"]


def make_state(reports: Sequence[GradeReport], *, seed: int, partial: bool = False, roster=None, chapters=None,
               shard: str | None = None, overrides: Sequence[dict] = (), variants: bool = False) -> dict:  # fmt: skip
    """A gradebook's whole state, as JSON holds it (``variants``: each student graded on their own numbers)."""
    ordered = sorted(reports, key=lambda r: (r.student, Path(r.notebook).name))
    return {"gradebook": 1, "seed": seed, "partial": partial, "variants": bool(variants),
            "roster": None if roster is None else list(roster),
            "chapters": None if chapters is None else [str(int(c)) for c in chapters], "shard": shard,
            "overrides": list(overrides), "reports": [r.as_dict() for r in ordered]}  # fmt: skip


def write_state(state: dict, path: Path) -> None:
    Path(path).write_text(json.dumps(state, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def read_state(path: Path) -> dict:
    """A gradebook ``write_state`` wrote (a clear error for any other file)."""
    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise GradebookError(f"gradebook {str(path)!r} could not be read: {error}") from None
    if not isinstance(state, dict) or state.get("gradebook") != 1:
        raise GradebookError(f"{str(path)!r} is not a gradebook written by --gradebook or --shard")
    return state


def reports_of(state: dict) -> list[GradeReport]:
    return [GradeReport.from_dict(entry) for entry in state["reports"]]


def merge_states(states: Sequence[dict], sources: Sequence[str]) -> dict:
    """One gradebook from the shards' (same seed, roster, chapters and rule; every shard of
    N there once; no student in two)."""
    if not states:
        raise GradebookError("merge needs at least one shard's gradebook")
    first = states[0]

    def rule(state: dict, key: str):  # a gradebook from before --variants has no such key: it is False
        return bool(state.get(key)) if key == "variants" else state[key]

    for state, source in zip(states, sources, strict=True):
        for key in ("seed", "partial", "roster", "chapters", "variants"):
            if rule(state, key) != rule(first, key):
                raise GradebookError(
                    f"{source} has {key} {rule(state, key)!r}, {sources[0]} {rule(first, key)!r}: not one batch"
                )
    shards = [parse_shard(state["shard"]) if state["shard"] else None for state in states]
    if any(shards):
        if None in shards or len({n for _, n in shards}) != 1:
            raise GradebookError(f"merge takes the gradebooks of one --shard K/N split; got shards {shards}")
        n = shards[0][1]
        missing = sorted(set(range(1, n + 1)) - {k for k, _ in shards})
        if missing or len(shards) != n:
            raise GradebookError(f"shards of {n}: missing {missing} or given twice ({sorted(k for k, _ in shards)})")
    owner: dict[str, str] = {}
    for state, source in zip(states, sources, strict=True):
        for student in {entry["student"] for entry in state["reports"]}:
            if owner.setdefault(student, source) != source:
                raise GradebookError(f"student {student!r} is in both {owner[student]} and {source}")
    reports = [report for state in states for report in reports_of(state)]
    merged = make_state(reports, seed=first["seed"], partial=first["partial"], roster=first["roster"],
                        chapters=first["chapters"], overrides=first["overrides"],
                        variants=first.get("variants", False))  # fmt: skip
    return merged


def update_state(old: dict, reports: Sequence[GradeReport], overrides: Sequence[dict] | None = None) -> dict:
    """``old`` with these reports in place of the ones for the same student and notebook (the
    rest kept); ``overrides``, when given, replace the stored ones."""
    regraded = {(r.student, Path(r.notebook).name) for r in reports}
    kept = [r for r in reports_of(old) if (r.student, Path(r.notebook).name) not in regraded]
    overrides = old["overrides"] if overrides is None else overrides
    return make_state([*kept, *reports], seed=old["seed"], partial=old["partial"], roster=old["roster"],
                      chapters=old["chapters"], overrides=overrides, variants=old.get("variants", False))  # fmt: skip

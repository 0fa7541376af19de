"""lib.gradebook_csv: points per exercise, chapter and student with each maximum beside its total,
no field a spreadsheet reads as a formula, and the Canvas import layout."""

import csv

from lib.batch_grading import GradeReport, exercises
from lib.gradebook import build_rows
from lib.gradebook_csv import CANVAS_COLUMNS, safe_field, write_canvas, write_gradebook


def _read(path):
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def test_safe_field_follows_the_owasp_rule():
    assert [safe_field(v) for v in ("=1+1", "+1", "-1", "@x", "\tx", "\rx", "ada", 0.5)] == [
        "'=1+1", "'+1", "'-1", "'@x", "'\tx", "'\rx", "ada", "0.5"
    ]  # fmt: skip


def test_gradebook_and_canvas_rows_hold_points_with_their_maxima(tmp_path):
    chapter_1 = [i for i in exercises() if i.startswith("1.")]
    reports = [
        GradeReport("=ada/01_a.ipynb", "=ada", {"1.equal-scores": "correct", "1.masked-read": "incorrect"}),
        GradeReport("bo/01_a.ipynb", "bo", {"1.equal-scores": "not attempted"}, ["@SUM(1) in cell 2: x"]),
    ]
    rows, _ = build_rows(reports, chapters=["1", "2"])
    write_gradebook(rows, tmp_path / "book.csv")
    header, *lines = _read(tmp_path / "book.csv")
    assert header[:5] == ["student", "chapter", "notebook", chapter_1[0], f"{chapter_1[0]} status"]
    book = [dict(zip(header, line, strict=True)) for line in lines]
    assert [(r["student"], r["chapter"]) for r in book] == [("'=ada", "1"), ("'=ada", "2"), ("bo", "1"), ("bo", "2")]
    assert (book[0]["1.equal-scores"], book[0]["1.masked-read status"], book[0]["points"]) == ("1", "incorrect", "1")
    assert book[0]["max points"] == str(len(chapter_1)) and book[1]["problems"] == "not handed in"
    assert book[0]["student points"] == "1" and float(book[0]["student max points"]) > len(chapter_1)
    assert book[2]["problems"] == "'@SUM(1) in cell 2: x"
    write_canvas(rows, tmp_path / "canvas.csv")
    canvas = _read(tmp_path / "canvas.csv")
    assert canvas[0] == [*CANVAS_COLUMNS, "Chapter 1 notebook", "Chapter 2 notebook"]
    assert canvas[1][0].strip() == "Points Possible" and canvas[1][5] == str(len(chapter_1))
    assert canvas[2] == ["'=ada", "", "", "'=ada", "", "1", "0"] and canvas[3][5:] == ["0", "0"]

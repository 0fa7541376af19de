"""lib.grade_reports: the table stays under 100 columns whatever the problems, the class summary
names the most common mistake, the gradebook totals each student, feedback quotes answers whole."""

import csv

from lib.batch_grading import GradeReport, exercises
from lib.checks import check
from lib.grade_reports import TABLE_WIDTH, class_summary, feedback_markdown, format_table, write_csv


def _report(name: str, statuses: dict[str, str], mistakes: dict[str, str] | None = None, problems=()) -> GradeReport:
    details = {
        i: {"message": "", "feedback": m, "hint": "", "mistake": m, "cell": 3} for i, m in (mistakes or {}).items()
    }
    return GradeReport(f"{name}/01_one_attention_read.ipynb", name, dict(statuses), list(problems), details=details)


def test_table_stays_narrow_and_names_its_columns_whatever_the_problems():
    chapter_1 = [i for i in exercises() if i.startswith("1.")]
    long_problems = [f"ValueError in cell {n}: " + "x" * 300 for n in range(5)]
    reports = [
        _report("a" * 40, dict.fromkeys(chapter_1, "correct"), problems=long_problems),
        _report("bo", {**dict.fromkeys(chapter_1, "not run"), chapter_1[0]: "incorrect"}),
    ]
    table = format_table(reports)
    lines = table.splitlines()
    assert max(map(len, lines)) <= TABLE_WIDTH
    assert lines[0].split()[: 2 + len(chapter_1)] == ["student", "notebook", *map(str, range(1, len(chapter_1) + 1))]
    # the first row's problems wrap under their column, three lines at most, the last one cut
    assert lines[2].startswith("aaa") and lines[3].startswith(" ") and lines[4].endswith("…")
    bo = lines[5]
    assert bo.split()[2 : 3 + len(chapter_1)] == ["✗", *["–"] * (len(chapter_1) - 1), f"0/{len(chapter_1)}"]
    legend = " ".join(line for line in lines if line.startswith(("chapter 1:", "    ")))
    assert [f"{n} {i}" in legend for n, i in enumerate(chapter_1, start=1)] == [True] * len(chapter_1)


def test_class_summary_counts_the_share_correct_and_the_most_common_named_mistake():
    reports = [
        _report("a", {"1.equal-scores": "correct", "1.masked-read": "incorrect"}, {"1.masked-read": "flipped mask"}),
        _report("b", {"1.equal-scores": "incorrect", "1.masked-read": "incorrect"}, {"1.masked-read": "flipped mask"}),
        _report("c", {"1.equal-scores": "correct", "1.masked-read": "incorrect"}, {"1.masked-read": "after softmax"}),
        _report("d", {"1.equal-scores": "not run"}),
    ]
    lines = class_summary(reports).splitlines()
    assert lines[0] == "Class summary: 4 notebooks, 4 students"
    by_id = {line.split()[0]: line.split(None, 3)[1:] for line in lines[2:]}
    assert by_id["1.equal-scores"] == ["2/4", "50%", "—"]
    assert by_id["1.masked-read"] == ["0/3", "0%", "2× flipped mask"]


def test_gradebook_totals_each_student_over_their_notebooks(tmp_path):
    reports = [
        GradeReport("ada/01_a.ipynb", "ada", {"1.equal-scores": "correct", "1.masked-read": "incorrect"}),
        GradeReport(
            "ada/02_b.ipynb", "ada", {"2.score-shape": "correct"}, ["timed out in cell 3 (1 s for the notebook)"]
        ),
        GradeReport("bo/01_a.ipynb", "bo", {"1.equal-scores": "not attempted", "1.masked-read": "correct"}),
    ]
    write_csv(reports, tmp_path / "book.csv")
    with open(tmp_path / "book.csv", newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    assert rows[0] == [
        "student", "notebook", "1.equal-scores", "1.masked-read", "2.score-shape", "correct", "total",
        "student correct", "student total", "problems",
    ]  # fmt: skip
    assert rows[1:] == [
        ["ada", "01_a.ipynb", "correct", "incorrect", "", "1", "2", "2", "3", ""],
        ["ada", "02_b.ipynb", "", "", "correct", "1", "1", "2", "3", "timed out in cell 3 (1 s for the notebook)"],
        ["bo", "01_a.ipynb", "not attempted", "correct", "", "1", "2", "1", "2", ""],
    ]


def test_feedback_shows_an_answer_that_holds_backticks_whole():
    told = check("1.equal-scores", [2, 0])
    source = 'note = """```"""\nanswer = [2, 0]\ncheck("1.equal-scores", answer)'
    report = _report("ada", {"1.equal-scores": "incorrect", "1.masked-read": "not attempted"})
    report.details["1.equal-scores"] = {"message": told.message, "feedback": told.feedback, "hint": told.hint}
    report.answers["1.equal-scores"] = (5, source)
    text = feedback_markdown(report)
    assert f"````python\n{source}\n````" in text
    assert told.feedback and told.feedback in text and told.hint in text
    assert "cell is not in the notebook" in text.split("1.masked-read")[1]

"""lib.grade_reports: the table stays under 100 columns whatever the problems, the class summary
names the most common mistake, the gradebook totals each student, feedback quotes answers whole."""

from lib.batch_grading import GradeReport, exercises
from lib.checks import check
from lib.grade_reports import (
    TABLE_WIDTH,
    class_summary,
    escape_markdown,
    feedback_markdown,
    format_table,
    summary_markdown,
)
from lib.gradebook import build_rows


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


def test_class_summary_counts_wrong_and_blank_apart_and_shows_every_tied_mistake():
    reports = [
        _report("a", {"1.equal-scores": "correct", "1.masked-read": "incorrect"}, {"1.masked-read": "flipped mask"}),
        _report("b", {"1.equal-scores": "incorrect", "1.masked-read": "incorrect"}, {"1.masked-read": "flipped mask"}),
        _report("c", {"1.equal-scores": "correct", "1.masked-read": "incorrect"}, {"1.masked-read": "after softmax"}),
        _report("d", {"1.equal-scores": "not run", "1.masked-read": "incorrect"}, {"1.masked-read": "after softmax"}),
    ]
    rows, notes = build_rows(reports, roster=["a", "b", "c", "d", "e"])
    lines = class_summary(rows).splitlines()
    assert lines[0] == "Class summary: 4 notebooks, 5 students"
    by_id = {line.split()[0]: line.split(None, 6)[1:] for line in lines[2:]}
    assert by_id["1.equal-scores"][:5] == ["2/5", "40%", "1", "1", "1"]  # correct, wrong, blank, not handed in
    assert by_id["1.masked-read"] == ["0/5", "0%", "4", "0", "1", "2× after softmax; 2× flipped mask"]
    markdown = summary_markdown(rows, notes)
    assert "| `1.masked-read` | 0 of 5 | 0 of 5 | 4 | 0 | 1 | 2× after softmax<br>2× flipped mask |" in markdown
    assert "- on the roster, no hand\\-in found: e" in markdown or "no hand-in found: e" in markdown


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


def test_feedback_escapes_what_the_notebook_chose():
    report = _report("<img src=x onerror=alert(1)>", {"1.equal-scores": "incorrect"}, problems=["<script>x</script>"])
    report.details["1.equal-scores"] = {"message": "raised [a](javascript:x)", "feedback": "", "hint": ""}
    text = feedback_markdown(report)
    assert "<img" not in text and "<script>" not in text and "&lt;script&gt;" in text
    assert "\\[a\\](javascript:x)" in text and escape_markdown("*x*") == "\\*x\\*"

"""A gradebook a course can use (issue 31), on one small class graded once through the command
line (a module-scoped batch) and then split into two shards and merged, and regraded with
--update: a roster with a missing student and a missing chapter (zeros, listed), a renamed
copy and an off-chapter check() (counted once, problems named), names and an exception class
made to be spreadsheet formulas (text in the CSV), colliding names, partial credit, an
override shown in the feedback, and shards merged equal to one run."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _notebooks import ROOT, SOLVED, write_notebook

from lib import student
from lib.gradebook import (
    GradebookError,
    check_hand_ins,
    folder_name,
    in_shard,
    parse_shard,
    student_of_folder,
)
from lib.gradebook_csv import FORMULA_STARTS

pytestmark = pytest.mark.usefixtures("needs_sandbox")

BOOK_1 = "01_one_attention_read.ipynb"
HYPERLINK = '=HYPERLINK("evil.example","click")'
# right on every case but a row of -inf only (and its drawn twin): part of the hidden cases
PARTLY = (
    "def stable_softmax(scores):\n    e = (scores - scores.max(-1, keepdim=True).values).exp()\n"
    "    return e / e.sum(-1, keepdim=True)\n\ncheck('1.stable-softmax', stable_softmax)"
)
EVIL_ERROR = f"raise type({HYPERLINK!r}, (Exception,), {{}})('<script>alert(1)</script>')"
ROSTER = ["=1+1", HYPERLINK, "mary ann", "mary_ann", "zoe"]
COMMON = ["--seed", "5", "--chapters", "1,2", "--partial", "--jobs", "2", "--time-limit", "120"]


def _start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [sys.executable, "-m", "lib.student", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _finish(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=900)
    assert process.returncode == 0, stdout + stderr
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return _finish(_start(*args))


def _outputs(folder: Path, name: str) -> list[str]:
    return ["--csv", str(folder / f"{name}.csv"), "--gradebook", str(folder / f"{name}.json")]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """The class, graded once: paths, the output folder and the CLI's output."""
    hand_ins = tmp_path_factory.mktemp("hand_ins")
    out = tmp_path_factory.mktemp("out")
    notebooks = [
        write_notebook(hand_ins / "=1+1" / BOOK_1, *SOLVED),
        write_notebook(hand_ins / HYPERLINK / BOOK_1, SOLVED[0], EVIL_ERROR, PARTLY),
        write_notebook(hand_ins / "mary ann" / BOOK_1, SOLVED[0], "check('2.score-shape', [1, 2, 3])"),
        write_notebook(hand_ins / "mary_ann" / BOOK_1, *SOLVED),
        write_notebook(hand_ins / "mary_ann" / "01_one_attention_read (1).ipynb", *SOLVED),
        write_notebook(hand_ins / "ghost" / BOOK_1, "x = 1"),
    ]
    (out / "roster.txt").write_text("\n".join(ROSTER) + "\n", encoding="utf-8")
    (out / "overrides.csv").write_text(
        "student,exercise,points,reason\nmary ann,1.wider-variance,1,answered on paper <b>in class</b>\n"
    )
    args = [
        *map(str, notebooks),
        *COMMON,
        "--roster",
        str(out / "roster.txt"),
        "--overrides",
        str(out / "overrides.csv"),
    ]
    done = _cli("grade", *args, *_outputs(out, "full"), "--feedback", str(out / "feedback"), "--canvas",
                str(out / "canvas.csv"))  # fmt: skip
    return {"notebooks": notebooks, "args": args, "out": out, "stdout": done.stdout}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def test_a_roster_gives_every_student_and_chapter_a_row_with_zeros_for_what_is_missing(batch):
    rows = _rows(batch["out"] / "full.csv")
    assert [(r["student"], r["chapter"]) for r in rows] == [
        *((name if not name.startswith(("=", "+")) else "'" + name, c) for name in ROSTER for c in "12"),
        ("ghost", "1"), ("ghost", "2"),
    ]  # fmt: skip
    zoe = [r for r in rows if r["student"] == "zoe"]
    assert all(r["points"] == "0" and r["problems"] == "not handed in" and r["notebook"] == "" for r in zoe)
    assert all(r["2.score-shape status"] == "not handed in" for r in rows if r["chapter"] == "2")
    assert next(r for r in rows if r["student"] == "'=1+1" and r["chapter"] == "1")["points"] == "2"
    # each total has its maximum beside it: chapter 1's points, all of chapters 1 and 2 for the student
    first = rows[0]
    assert float(first["max points"]) >= 6 and float(first["student max points"]) > float(first["max points"])
    summary = (batch["out"] / "full.summary.md").read_text(encoding="utf-8")
    assert "on the roster, no hand-in found: zoe" in summary and "handed in, not on the roster: ghost" in summary
    assert "note: on the roster, no hand-in found: zoe" in batch["stdout"]
    assert "Hidden inputs drawn from seed 5" in summary


def test_a_renamed_copy_and_an_off_chapter_check_are_named_not_counted(batch):
    rows = {(r["student"], r["chapter"]): r for r in _rows(batch["out"] / "full.csv")}
    mary_ann = rows[("mary_ann", "1")]
    assert mary_ann["notebook"] == BOOK_1 and mary_ann["points"] == "2"
    assert "01_one_attention_read (1).ipynb is a second chapter-1 notebook" in mary_ann["problems"]
    assert rows[("mary_ann", "1")]["student points"] == "2"  # not 4: the copy counts nothing
    mary = rows[("mary ann", "1")]
    assert "an answer to 2.score-shape, another chapter's exercise, given in cell 4: not counted" in mary["problems"]
    assert rows[("mary ann", "2")]["2.score-shape status"] == "not handed in"


def test_no_field_reads_as_a_formula_in_a_spreadsheet(batch):
    for name in ("full.csv", "canvas.csv"):
        with open(batch["out"] / name, newline="", encoding="utf-8") as file:
            fields = [field for line in csv.reader(file) for field in line]
        assert not [f for f in fields if f.startswith(FORMULA_STARTS)]
        import openpyxl  # types each field as a spreadsheet types a typed-in cell

        sheet = openpyxl.Workbook().active
        for n, field in enumerate(fields, start=1):
            sheet.cell(row=n, column=1, value=field)
        assert not [c.value for c in sheet["A"] if c.data_type == "f"]
    problems = next(r for r in _rows(batch["out"] / "full.csv") if r["student"] == "'" + HYPERLINK)["problems"]
    assert problems.startswith("'=HYPERLINK(") and "<script>" in problems  # the exception class, as text


def test_feedback_folders_are_one_per_student_reversible_and_escaped(batch):
    folders = sorted(p.name for p in (batch["out"] / "feedback").iterdir())
    assert sorted(map(student_of_folder, folders)) == sorted(["=1+1", HYPERLINK, "mary ann", "mary_ann", "ghost"])
    text = (batch["out"] / "feedback" / folder_name(HYPERLINK) / "01_one_attention_read.md").read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    mary = (batch["out"] / "feedback" / "mary%20ann" / "01_one_attention_read.md").read_text()
    assert "**Changed by your teacher:** 1 points (was 0): answered on paper &lt;b&gt;in class&lt;/b&gt;" in mary
    with pytest.raises(GradebookError, match="share one feedback folder"):
        check_hand_ins([Path("a/Ada/01_x.ipynb"), Path("a/ada/01_x.ipynb")])
    with pytest.raises(GradebookError, match="graded as one"):
        check_hand_ins([Path("a/ada/01_x.ipynb"), Path("b/ada/01_x.ipynb")])
    assert len({folder_name(n) for n in ("...", "___", "..", ".", "student")}) == 5


def test_partial_credit_is_the_share_of_hidden_cases_passed(batch):
    row = next(r for r in _rows(batch["out"] / "full.csv") if r["student"] == "'" + HYPERLINK and r["chapter"] == "1")
    assert row["1.stable-softmax status"] == "incorrect"
    assert 0 < float(row["1.stable-softmax"]) < 1
    state = json.loads((batch["out"] / "full.json").read_text())
    passed, cases = next(r for r in state["reports"] if r["student"] == HYPERLINK)["cases"]["1.stable-softmax"]
    assert float(row["1.stable-softmax"]) == pytest.approx(round(passed / cases, 2)) and 0 < passed < cases
    assert state["seed"] == 5 and state["partial"] is True


def test_shards_merged_equal_one_run_and_update_regrades_one_student(batch, tmp_path):
    out, args = batch["out"], batch["args"]
    students = {Path(p).parent.name for p in batch["notebooks"]}
    assert {s for s in students if in_shard(s, 1, 2)} and {s for s in students if in_shard(s, 2, 2)}
    # the two shards and an --update of one student's chapter (now wrong) are graded at once, as
    # separate machines would grade them
    shutil.copy(out / "full.json", tmp_path / "book.json")
    wrong = write_notebook(tmp_path / "mary_ann" / BOOK_1, "check('1.equal-scores', [2, 0])")
    runs = [_start("grade", *args, "--shard", f"{k}/2", "--gradebook", str(tmp_path / f"part{k}.json")) for k in (1, 2)]
    runs.append(
        _start("grade", str(wrong), "--update", str(tmp_path / "book.json"), "--csv", str(tmp_path / "book.csv"))
    )
    for run in runs:
        _finish(run)
    _cli("merge", str(tmp_path / "part1.json"), str(tmp_path / "part2.json"), "--overrides", str(out / "overrides.csv"),
         *_outputs(tmp_path, "merged"))  # fmt: skip
    assert (tmp_path / "merged.csv").read_bytes() == (out / "full.csv").read_bytes()
    assert (tmp_path / "merged.summary.md").read_bytes() == (out / "full.summary.md").read_bytes()
    # --update: every other row kept, the override still applied
    before = {(r["student"], r["chapter"]): r for r in _rows(out / "full.csv")}
    after = {(r["student"], r["chapter"]): r for r in _rows(tmp_path / "book.csv")}
    assert after.keys() == before.keys() and after[("mary_ann", "1")]["points"] == "0"
    assert [after[k] for k in after if k[0] != "mary_ann"] == [before[k] for k in before if k[0] != "mary_ann"]
    assert after[("mary ann", "1")]["overrides"].startswith("1.wider-variance: 1 (was 0)")


def test_shard_arguments_are_checked():
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "two/4", "1"):
        with pytest.raises(GradebookError, match="--shard"):
            parse_shard(bad)


def test_variants_grade_each_student_on_the_numbers_their_copy_showed(tmp_path, capsys):
    """With --variants a value exercise is graded on the numbers drawn for the folder's (roster)
    name: a student's own answer is right, the book's or a classmate's is wrong (a hostile batch
    found the grader ignoring them: the book's answer scored, a student's own did not)."""
    from lib.exercises import find
    from lib.variants import exercises_for

    own = {name: list(exercises_for(name)["1.new-values"].expected) for name in ("vera", "wren")}
    book = list(find("1.new-values").expected)
    assert len({str(own["vera"]), str(own["wren"]), str(book)}) == 3
    hand_ins = tmp_path / "hand-ins"
    answers = {"vera": own["vera"], "victor": book, "wren": own["vera"]}  # wren copies vera
    paths = [
        write_notebook(hand_ins / name / "01_one_attention_read.ipynb", f"check('1.new-values', {answer!r})")
        for name, answer in answers.items()
    ]
    book_json = tmp_path / "gradebook.json"
    assert student.main(["grade", *map(str, paths), "--variants", "--seed", "3", "--gradebook", str(book_json)]) == 0
    assert "each student graded on their own numbers" in capsys.readouterr().out
    state = json.loads(book_json.read_text())
    assert state["variants"] is True
    status = {r["student"]: r["exercises"]["1.new-values"] for r in state["reports"]}
    assert status == {"vera": "correct", "victor": "incorrect", "wren": "incorrect"}


def test_shards_graded_with_and_without_variants_are_not_one_batch():
    """merge refuses shards whose rule differs, naming it, also against a gradebook written
    before --variants existed (no such key)."""
    from lib.gradebook import make_state, merge_states

    with_variants, without = make_state([], seed=1, variants=True), make_state([], seed=1)
    older = {key: value for key, value in without.items() if key != "variants"}
    for other in (without, older):
        with pytest.raises(GradebookError, match="b.json has variants False, a.json True"):
            merge_states([with_variants, other], ["a.json", "b.json"])
    assert merge_states([without, older], ["a.json", "b.json"])["variants"] is False

"""Grading a class a teacher can trust (issue 18): stored or copied results never count, a
notebook that kills its parent cannot end the batch, any kernelspec grades, and the teacher
gets feedback files, a gradebook and a class summary.

The batch that holds a parent-killing notebook runs the grader as a subprocess, so it cannot
take pytest down; the endless loop is graded on its own, with a small time limit."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from lib import student
from lib.checks import RESULT_KEY, check, exercises
from lib.student import GradeReport, class_summary, format_table, grade_notebook, kernel_threads, write_csv

ROOT = Path(__file__).resolve().parent.parent
CHAPTER_1 = ROOT / "chapters" / "01_one_attention_read.ipynb"
SOLVED = ("check('1.equal-scores', [1, 2])", "check('1.wider-variance', [1024, 1 / 32])")


def _stored_record(exercise_id: str, sig: str | None = None) -> dict:
    """A display output as an earlier run of check() stored it (correct, and signed or not)."""
    record = {"id": exercise_id, "status": "correct", "cell": 3, "mistake": "", "message": "right"}
    if sig is not None:
        record["sig"] = sig
    return new_output("display_data", data={"text/plain": f"[{exercise_id}] ✓ correct"}, metadata={RESULT_KEY: record})


def _write(path: Path, *sources: str, kernel: str = "python3", stored: bool = False) -> Path:
    """A student's notebook: a markdown cell, the import (cell 2), then one code cell per source.
    ``stored`` gives each check() cell the output of a correct result, as a solved run leaves it."""
    cells = [new_markdown_cell("# a student's notebook"), new_code_cell("from lib.checks import check")]
    for source in sources:
        cell = new_code_cell(source)
        if stored and "check(" in source:
            cell.outputs = [_stored_record(source.split("'")[1], sig="0" * 64)]
            cell.execution_count = len(cells)
        cells.append(cell)
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def _grade_in_subprocess(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "lib.student", "grade", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def test_a_class_with_crashes_loops_forgeries_and_a_parent_killer_is_graded_in_full(tmp_path):
    """The issue's batch, on small notebooks and one full chapter: every notebook is reported,
    stored and copied results score nothing, the other kernelspec scores full marks, and the
    wrong answer's targeted feedback reaches its feedback file and the gradebook."""
    forged = "\n".join(
        [
            "from IPython.display import publish_display_data",
            f"record = {{'id': '1.equal-scores', 'status': 'correct', 'cell': 3, 'sig': '{'0' * 64}'}}",
            "publish_display_data({'text/plain': 'ok'}, metadata={'lib.checks': record})",
            "publish_display_data({'text/plain': 'ok'}, metadata={'lib.checks': {'id': '2.x', 'status': 'correct'}})",
        ]
    )
    wrong = exercises()["1.longer-query"]
    mistake = next(w for w in wrong.wrong_answers if list(w.value) == [2.0, 0.0]).feedback
    solved = nbformat.read(CHAPTER_1, as_version=4)
    solved.metadata["kernelspec"] = {"name": "conda-env-ml-py", "display_name": "ml", "language": "python"}
    (tmp_path / "d_kernelspec").mkdir()
    nbformat.write(solved, tmp_path / "d_kernelspec" / CHAPTER_1.name)
    notebooks = [
        _write(tmp_path / "a_exits" / "ch.ipynb", "import os\nos._exit(1)", *SOLVED, stored=True),
        _write(tmp_path / "c_copies" / "ch.ipynb", "check('1.equal-scores', ...)", forged),
        tmp_path / "d_kernelspec" / CHAPTER_1.name,
        _write(tmp_path / "e_wrong" / "ch.ipynb", "answer = [2.0, 0.0]\ncheck('1.longer-query', answer)", SOLVED[0]),
        _write(
            tmp_path / "f_kills" / "ch.ipynb",
            SOLVED[0],
            "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
            SOLVED[1],
        ),
        _write(tmp_path / "g_typo" / "ch.ipynb", *SOLVED),
    ]
    typo = nbformat.read(notebooks[-1], as_version=4)
    typo.cells[1].source = "from lib.checks import chek"
    nbformat.write(typo, notebooks[-1])
    out, gradebook, feedback = tmp_path / "grades.json", tmp_path / "grades.csv", tmp_path / "feedback"
    done = _grade_in_subprocess(
        *map(str, notebooks), "--jobs", "2", "--time-limit", "300", "--json", str(out), "--csv", str(gradebook),
        "--feedback", str(feedback),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    graded = {row["student"]: row for row in json.loads(out.read_text())}
    assert list(graded) == ["a_exits", "c_copies", "d_kernelspec", "e_wrong", "f_kills", "g_typo"]
    both_not_run = {"1.equal-scores": "not run", "1.wider-variance": "not run"}
    # stored outputs never count: the kernel died before any check() ran
    assert graded["a_exits"]["problems"] == ["kernel died in cell 3"]
    assert graded["a_exits"]["exercises"] == both_not_run and graded["a_exits"]["correct"] == 0
    # copied records (a stale signature, none at all, another chapter's id) are flagged, not counted
    assert graded["c_copies"]["exercises"] == {"1.equal-scores": "not attempted"}
    assert graded["c_copies"]["problems"] == [
        "2 result records in cell 4 not made by check() in this run (copied or forged): not counted"
    ]
    chapter_1 = [i for i in exercises() if i.startswith("1.")]
    assert graded["d_kernelspec"]["problems"] == []
    assert (graded["d_kernelspec"]["correct"], graded["d_kernelspec"]["total"]) == (len(chapter_1), len(chapter_1))
    assert graded["e_wrong"]["exercises"] == {"1.longer-query": "incorrect", "1.equal-scores": "correct"}
    assert graded["e_wrong"]["details"]["1.longer-query"]["feedback"] == mistake
    # the notebook that killed its grading process: what ran before is graded, the batch went on
    assert graded["f_kills"]["problems"] == ["grading process killed by SIGKILL in cell 4"]
    assert graded["f_kills"]["exercises"] == {"1.equal-scores": "correct", "1.wider-variance": "not run"}
    assert graded["g_typo"]["problems"] == [
        "ImportError in cell 2: cannot import name 'chek' from 'lib.checks' (and 2 more cells raised an error)"
    ]
    # the printed report: a compact table, then the class summary
    printed = done.stdout
    table = printed[printed.index("student ") : printed.index("Class summary")]
    assert max(len(line) for line in table.splitlines()) <= student.TABLE_WIDTH
    assert "grading process killed by SIGKILL in cell 4" in table
    summary = printed[printed.index("Class summary") :].splitlines()
    assert summary[0] == "Class summary: 6 notebooks, 6 students"
    assert next(line for line in summary if line.startswith("1.longer-query ")).split()[1:3] == ["1/2", "50%"]
    # the gradebook: a row per student and notebook, a column per exercise, the totals
    with open(gradebook, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    assert [row["student"] for row in rows] == list(graded)
    assert set(chapter_1) <= set(rows[0]) and {"correct", "total", "student correct", "student total"} <= set(rows[0])
    wrong_row = next(row for row in rows if row["student"] == "e_wrong")
    assert (wrong_row["1.longer-query"], wrong_row["1.equal-scores"], wrong_row["1.masked-read"]) == (
        "incorrect",
        "correct",
        "",
    )
    assert (wrong_row["correct"], wrong_row["total"], wrong_row["student total"]) == ("1", "2", "2")
    # the feedback file holds the answer, the targeted feedback and the hint; the executed notebook is beside it
    text = (feedback / "e_wrong" / "ch.md").read_text(encoding="utf-8")
    assert "answer = [2.0, 0.0]" in text and mistake in text and wrong.hints[0] in text
    assert "✗ incorrect" in text and "Score: 1 of 2 correct" in text
    executed = nbformat.read(feedback / "e_wrong" / "ch.ipynb", as_version=4)
    assert mistake in json.dumps(executed.cells[2].outputs, ensure_ascii=False)


def test_a_solved_notebook_that_loops_first_scores_nothing(tmp_path):
    """Its stored results are cleared; the loop runs out the (small) time limit before any check()."""
    path = _write(tmp_path / "b_loops" / "ch.ipynb", "while True:\n    pass", *SOLVED, stored=True)
    assert nbformat.read(path, as_version=4).cells[3].outputs  # it was handed in with the results shown
    report = grade_notebook(path, time_limit=5)
    assert report.problems == ["timed out in cell 3 (5 s for the notebook)"]
    assert report.exercises == {"1.equal-scores": "not run", "1.wider-variance": "not run"}
    assert report.n_correct == 0


def test_a_record_is_bound_to_the_cell_that_made_it_and_the_kernel_keeps_no_key(tmp_path):
    """A genuine record of this run shown again in another cell (captured, then re-shown)
    does not count there; showing a returned result again is no record at all. The kernel's
    environment no longer holds the key, and it runs the threads it was given."""
    path = _write(
        tmp_path / "ida" / "ch.ipynb",
        "from IPython.utils.capture import capture_output\nwith capture_output() as shown:\n"
        "    check('1.masked-read', [0, 4])",
        "shown.show()",
        "result = check('1.equal-scores', [1, 2])",
        "result",
        "import os, torch\nprint(torch.get_num_threads(), os.environ.get('LIB_CHECKS_RUN_KEY'))",
    )
    report = grade_notebook(path, time_limit=60, threads=1)
    assert report.exercises == {"1.masked-read": "not run", "1.equal-scores": "correct"}
    assert report.problems == [
        "1 result record in cell 4 not made by check() in this run (copied or forged): not counted"
    ]
    assert report.executed.cells[-1].outputs[0]["text"] == "1 None\n"


def test_an_unknown_kernel_is_that_notebooks_problem_and_jobs_must_be_positive(tmp_path, capsys):
    path = _write(tmp_path / "jo" / "ch.ipynb", SOLVED[0])
    report = grade_notebook(path, time_limit=60, kernel_name="no-such-kernel")
    assert len(report.problems) == 1 and report.problems[0].startswith("could not run the notebook (NoSuchKernel")
    assert report.exercises == {"1.equal-scores": "not run"}
    try:
        student.main(["grade", str(path), "--jobs", "0"])
    except SystemExit as stop:
        assert stop.code == 2
    else:
        raise AssertionError("--jobs 0 was accepted")
    assert "--jobs must be at least 1, got 0" in capsys.readouterr().err


def test_each_kernel_gets_its_share_of_the_cores():
    assert [kernel_threads(jobs, cores=2) for jobs in (1, 2, 3)] == [2, 1, 1]
    assert [kernel_threads(jobs, cores=16) for jobs in (1, 3, 16, 40)] == [16, 5, 1, 1]


def test_the_process_that_runs_a_notebook_does_not_load_torch():
    code = "import sys, lib.student; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"


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
    assert max(map(len, lines)) <= student.TABLE_WIDTH
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
    text = student.feedback_markdown(report)
    assert f"````python\n{source}\n````" in text
    assert told.feedback and told.feedback in text and told.hint in text
    assert "cell is not in the notebook" in text.split("1.masked-read")[1]


class _Shell:
    """Just enough of a kernel's shell for check() to publish its record."""

    kernel = object()
    execution_count = 7
    parent_header = {"header": {"msg_id": "request-7"}}


def test_check_signs_its_record_and_the_grader_verifies_exactly_that(monkeypatch):
    import IPython.display

    from lib import checks, grading

    key = b"a key made for this run"
    shown = []
    monkeypatch.setattr(grading, "kernel_shell", lambda: _Shell())
    monkeypatch.setattr(checks, "_RUN_KEY", key)
    monkeypatch.setattr(IPython.display, "display", lambda *args, **kwargs: shown.append(kwargs["metadata"]))
    told = check("1.longer-query", [2.0, 0.0])
    record = shown[0][RESULT_KEY]
    assert {name: record[name] for name in ("id", "status", "cell", "request", "feedback", "hint")} == {
        "id": "1.longer-query",
        "status": "incorrect",
        "cell": 7,
        "request": "request-7",
        "feedback": told.feedback,
        "hint": told.hint,
    }
    assert record["mistake"] == getattr(told, "mistake", "")
    assert student._genuine(record, key, "request-7")
    assert not student._genuine(record, b"another run's key", "request-7")
    assert not student._genuine(record, key, "request-8")  # shown again in another cell
    for name, value in (("status", "correct"), ("id", "1.equal-scores"), ("mistake", "x"), ("request", "r")):
        assert not student._genuine({**record, name: value}, key, "request-7"), name
    assert not student._genuine({k: v for k, v in record.items() if k != "sig"}, key, "request-7")
    monkeypatch.setattr(checks, "_RUN_KEY", b"")  # outside grading: no signature at all
    check("1.equal-scores", [1, 2])
    assert "sig" not in shown[1][RESULT_KEY]


def _wait_for(condition, what: str, limit_s: float = 300.0) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.2)


def test_an_interrupted_batch_leaves_no_grading_process_or_kernel_behind(tmp_path):
    """What Ctrl-C does (grade_notebooks calls stop_grading on any interrupt): the grading
    processes sit in sessions of their own, so the terminal's signal would not reach them."""
    import threading

    path = _write(tmp_path / "kai" / "ch.ipynb", SOLVED[0], "while True:\n    pass")
    reports = []
    batch = threading.Thread(target=lambda: reports.extend(student.grade_notebooks([path], 600, jobs=1)))
    batch.start()

    def looping() -> list[dict]:
        running = list(student._RUNNING.values())
        events = student._read_events(running[0]) if running else []
        return events if any(event.get("start") == 3 for event in events) else []

    _wait_for(looping, "the loop's cell start")
    kernel = next(event for event in looping() if "kernel" in event)
    student.stop_grading()
    batch.join()
    assert reports[0].problems == ["grading process killed by SIGKILL in cell 4"]
    assert reports[0].exercises == {"1.equal-scores": "correct"}

    def gone(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    _wait_for(lambda: gone(kernel["pgid"]), "the kernel's process group end")
    assert student._RUNNING == {} and not student._STOPPING.is_set()  # the next batch grades as usual

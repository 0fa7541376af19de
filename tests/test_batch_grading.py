"""Grading a class a teacher can trust (issues 18 and 29): stored outputs and answers given
outside an exercise's own cell never count, a notebook that kills its parent cannot end the
batch, any kernelspec grades, every exercise of a chapter counts even when its cell is gone,
and each status comes with what the grader said.

The batch that holds a parent-killing notebook runs the grader as a subprocess, so it cannot
take pytest down; the endless loop is graded on its own, with a small time limit."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from _notebooks import CHAPTER_1, ROOT, SOLVED, write_notebook

from lib import student
from lib.batch_grading import exercises, grade_notebook
from lib.checks import check
from lib.grade_reports import TABLE_WIDTH

pytestmark = pytest.mark.usefixtures("needs_sandbox")


def _grade_in_subprocess(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "lib.student", "grade", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def test_a_class_with_crashes_loops_forgeries_and_a_parent_killer_is_graded_in_full(tmp_path):
    """The issue's batch, on small notebooks and one full chapter: every notebook is reported,
    stored and copied results score nothing, the other kernelspec scores full marks, and the
    wrong answer's targeted feedback reaches its feedback file and the gradebook."""
    forged = "\n".join(  # a record written by hand beside check()'s, and an answer given in another cell
        [
            "import json, os",
            "folder = os.environ['LIB_CHECKS_RECORD']",
            "record = {'id': '1.equal-scores', 'request': 'made-up', 'answer': 'problem', 'problem': 'x'}",
            "open(os.path.join(folder, '99999.json'), 'w').write(json.dumps(record))",
            "check('1.equal-scores', [1, 2])",
        ]
    )
    wrong = exercises()["1.longer-query"]
    mistake = next(w for w in wrong.wrong_answers if list(w.value) == [2.0, 0.0]).feedback
    solved = nbformat.read(CHAPTER_1, as_version=4)
    solved.metadata["kernelspec"] = {"name": "conda-env-ml-py", "display_name": "ml", "language": "python"}
    (tmp_path / "d_kernelspec").mkdir()
    nbformat.write(solved, tmp_path / "d_kernelspec" / CHAPTER_1.name)
    notebooks = [
        write_notebook(tmp_path / "a_exits" / "ch.ipynb", "import os\nos._exit(1)", *SOLVED, stored=True),
        write_notebook(tmp_path / "c_copies" / "ch.ipynb", "check('1.equal-scores', ...)", forged),
        tmp_path / "d_kernelspec" / CHAPTER_1.name,
        write_notebook(
            tmp_path / "e_wrong" / "ch.ipynb", "answer = [2.0, 0.0]\ncheck('1.longer-query', answer)", SOLVED[0]
        ),
        write_notebook(
            tmp_path / "f_kills" / "ch.ipynb",
            SOLVED[0],
            "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
            SOLVED[1],
        ),
        write_notebook(tmp_path / "g_typo" / "ch.ipynb", *SOLVED),
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
    # a record made by hand and an answer given in another cell are named, not counted
    assert graded["c_copies"]["exercises"] == {"1.equal-scores": "not attempted"}
    assert graded["c_copies"]["problems"] == [
        "an answer to 1.equal-scores given in cell 4 and outside any cell, not in its own cell 3: not counted"
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
    assert max(len(line) for line in table.splitlines()) <= TABLE_WIDTH
    assert "grading process killed by SIGKILL in cell 4" in table
    summary = printed[printed.index("Class summary") :].splitlines()
    # the summary and the gradebook count chapter notebooks only: d_kernelspec's (the others are named)
    assert summary[0] == "Class summary: 1 notebook, 6 students"
    assert next(line for line in summary if line.startswith("1.longer-query ")).split()[1:6] == [
        "1/6", "17%", "0", "0", "5"
    ]  # fmt: skip
    assert "note: e_wrong: ch.ipynb is no chapter's notebook (no chapter number): not counted" in printed
    # the gradebook: a row per student and chapter, points and a status per exercise, the totals with their maxima
    with open(gradebook, newline="", encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    assert [row["student"] for row in rows] == list(graded)
    assert {"points", "max points", "student points", "student max points"} <= set(rows[0])
    solved_row = next(row for row in rows if row["student"] == "d_kernelspec")
    assert (solved_row["points"], solved_row["max points"]) == (str(len(chapter_1)), str(len(chapter_1)))
    assert (solved_row["1.longer-query"], solved_row["1.longer-query status"]) == ("1", "correct")
    wrong_row = next(row for row in rows if row["student"] == "e_wrong")
    assert (wrong_row["points"], wrong_row["problems"]) == ("0", "not handed in")
    # the feedback file holds the answer, the targeted feedback and the hint; the executed notebook is beside it
    text = (feedback / "e_wrong" / "ch.md").read_text(encoding="utf-8")
    assert "answer = [2.0, 0.0]" in text and mistake in text and wrong.hints[0] in text
    assert "✗ incorrect" in text and "Score: 1 of 2 correct" in text
    executed = nbformat.read(feedback / "e_wrong" / "ch.ipynb", as_version=4)
    assert mistake in json.dumps(executed.cells[2].outputs, ensure_ascii=False)


def test_a_solved_notebook_that_loops_first_scores_nothing(tmp_path):
    """Its stored results are cleared; the loop runs out the (small) time limit before any check()."""
    path = write_notebook(tmp_path / "b_loops" / "ch.ipynb", "while True:\n    pass", *SOLVED, stored=True)
    assert nbformat.read(path, as_version=4).cells[3].outputs  # it was handed in with the results shown
    report = grade_notebook(path, time_limit=5)
    assert report.problems == ["timed out in cell 3 (5 s for the notebook)"]
    assert report.exercises == {"1.equal-scores": "not run", "1.wider-variance": "not run"}
    assert report.n_correct == 0


def test_the_answer_that_counts_is_the_last_its_own_cell_recorded(tmp_path):
    """An exercise's own cell is the first that calls check() with its id; it may record more
    than once (the last counts). An answer shown in another cell, or for another exercise
    than the cell's own, is named and ignored. In the kernel check() only says "recorded",
    and the kernel runs the threads it was given, in a sandbox with an empty environment."""
    path = write_notebook(
        tmp_path / "ida" / "ch.ipynb",
        "for candidate in ([0, 4], [2, 0]):\n    result = check('1.masked-read', candidate)\nprint(result.status)",
        "check('1.equal-scores', [1, 2])",
        "check('1.equal-scores', [0, 0])\ncheck('1.wider-variance', [1024, 1 / 32])",
        "import os, torch\nprint(torch.get_num_threads(), 'PYTEST_CURRENT_TEST' in os.environ)",
    )
    report = grade_notebook(path, time_limit=60, threads=1)
    assert report.exercises == {
        "1.masked-read": "incorrect",
        "1.equal-scores": "correct",
        "1.wider-variance": "correct",
    }
    assert report.details["1.masked-read"]["message"].startswith("[2., 0.] is not it")
    assert report.problems == ["an answer to 1.equal-scores given in cell 5, not in its own cell 4: not counted"]
    assert [output.get("text") for output in report.executed.cells[2].outputs][-2] == "recorded\n"
    assert "[2., 0.] is not it" in report.executed.cells[2].outputs[-1]["data"]["text/plain"]  # the grade, added
    assert report.executed.cells[-1].outputs[0]["text"] == "1 False\n"


def test_an_unknown_kernel_is_that_notebooks_problem_and_jobs_must_be_positive(tmp_path, capsys):
    path = write_notebook(tmp_path / "jo" / "ch.ipynb", SOLVED[0])
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


def test_grade_notebook_reports_each_exercise(tmp_path):
    path = write_notebook(
        tmp_path / "ada" / "student.ipynb",
        "check('1.equal-scores', [1, 2])",
        "check('1.masked-read', [0, 4])",
        "check('1.wider-variance', ...)",
        "answer = undefined_name\ncheck('1.longer-query', answer)",
    )
    report = grade_notebook(path)
    assert report.student == "ada"
    # the first error is named with its cell, so a "not run" has its reason beside it
    assert report.problems == ["NameError in cell 6: name 'undefined_name' is not defined"]
    assert report.exercises == {
        "1.equal-scores": "correct",
        "1.masked-read": "incorrect",
        "1.wider-variance": "not attempted",
        "1.longer-query": "not run",
    }
    # what check() told the learner comes back with each status (the same as it says here)
    told = check("1.masked-read", [0, 4])
    assert report.details["1.masked-read"] == {
        "message": told.message,
        "feedback": told.feedback,
        "hint": told.hint,
        "mistake": getattr(told, "mistake", ""),
        "cell": 4,
    }
    assert report.answers["1.masked-read"] == (4, "check('1.masked-read', [0, 4])")


def test_exit_stops_grading_in_the_cell_that_called_it(tmp_path):
    """exit() in a kernel does not raise: IPython shuts the kernel down a moment later, so
    without this the notebook died in some later cell, or not at all, depending on timing."""
    path = write_notebook(
        tmp_path / "eve" / "ch.ipynb",
        "check('1.equal-scores', [1, 2])",
        "exit()",
        "check('1.masked-read', [2, 0])",
        "import time\ntime.sleep(1)\ncheck('1.wider-variance', [1024, 1 / 32])",
    )
    report = grade_notebook(path, time_limit=60)
    assert report.problems == ["kernel stopped by exit() in cell 4"]
    assert report.exercises == {"1.equal-scores": "correct", "1.masked-read": "not run", "1.wider-variance": "not run"}


def test_a_deleted_exercise_still_counts_and_a_bare_path_names_the_student(tmp_path, monkeypatch):
    """A chapter notebook (named NN_...) is graded on all of its chapter's exercises: deleting
    the hard ones must not raise the score. Graded from inside the student's folder, the
    student is still that folder's name."""
    write_notebook(
        tmp_path / "ada" / "01_one_attention_read.ipynb",
        "check('1.equal-scores', [1, 2])",
        "check('1.equal-score', [1, 2])  # a typo, or an id since renamed: not a column of its own",
    )
    monkeypatch.chdir(tmp_path / "ada")
    report = grade_notebook(Path("01_one_attention_read.ipynb"), time_limit=60)
    assert report.student == "ada"
    assert report.problems == ["check() names no exercise of the book: '1.equal-score'"]
    chapter_1 = [i for i in exercises() if i.startswith("1.")]
    assert list(report.exercises) == chapter_1 and len(chapter_1) > 1
    assert report.exercises["1.equal-scores"] == "correct"
    assert {s for i, s in report.exercises.items() if i != "1.equal-scores"} == {"not attempted"}
    assert (report.n_correct, report.as_dict()["total"]) == (1, len(chapter_1))
    (tmp_path / "bo").mkdir()
    (tmp_path / "bo" / "01_one_attention_read.ipynb").write_text("{not json")
    unreadable = grade_notebook(tmp_path / "bo" / "01_one_attention_read.ipynb")
    assert unreadable.problems[0].startswith("could not read") and unreadable.as_dict()["total"] == len(chapter_1)


def test_a_linked_or_fifo_hand_in_is_refused_at_once(tmp_path):
    # a link to the teacher's solved chapter would score full marks and return its solutions;
    # a FIFO named like a notebook would stall the batch on its first read
    linked = tmp_path / "h_link" / CHAPTER_1.name
    linked.parent.mkdir()
    linked.symlink_to(CHAPTER_1)
    report = grade_notebook(linked, time_limit=5)
    assert report.problems == ["not graded: the hand-in is a symbolic link, not a notebook of its own"]
    assert report.n_correct == 0 and set(report.exercises.values()) == {"not attempted"}
    fifo = tmp_path / "h_fifo" / CHAPTER_1.name
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    report = grade_notebook(fifo, time_limit=5)
    assert report.problems[0].startswith("could not read the notebook (OSError")
    assert report.n_correct == 0


# The grader's peak resident memory, from VmHWM: getrusage's ru_maxrss survives exec, so a
# child of a big pytest process would report the parent's size at fork, not its own.
_MEASURED = """
import re, sys
from pathlib import Path
from lib.batch_grading import grade_notebook
from lib.grade_reports import write_feedback
report = grade_notebook(Path(sys.argv[1]), time_limit=120, threads=1)
write_feedback(report, Path(sys.argv[2]))
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1])
print(peak_kb // 1024, report.exercises["1.equal-scores"])
print(*report.problems, sep="\\n")
"""


def test_a_50_mb_output_is_cut_inside_the_sandbox_and_the_grader_stays_small(tmp_path):
    """The grader's own process (not the sandbox's) peaks under 300 MB, the output limit is
    named where it cut, and the executed notebook in the feedback folder is small."""
    path = write_notebook(tmp_path / "ada" / "ch.ipynb", "print('x' * 50_000_000)", SOLVED[0], "print('after')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(path), str(tmp_path / "feedback")],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    peak_mb, status = done.stdout.splitlines()[0].split()
    assert int(peak_mb) < 300 and status == "correct", done.stdout
    assert "outputs past the 10 MB output limit not kept (cell 3)" in done.stdout.splitlines()[1:]
    executed = tmp_path / "feedback" / "ada" / "ch.ipynb"
    assert executed.stat().st_size < 1024**2
    cells = nbformat.read(executed, as_version=4).cells
    assert "passed the grader's 10 MB output limit" in cells[2].outputs[0]["text"]
    assert cells[4].outputs[0]["text"] == "after\n"  # a small output after the cut is kept


def test_events_the_notebook_forged_are_cut_at_the_limit_too():
    """A notebook can append its own events to the worker's file (a hostile batch kept 60 MB
    that way): the limit is applied again outside, over every event."""
    import nbformat

    from lib.batch_grading import OUTPUT_LIMIT, _apply_events

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1") for _ in range(3)])
    big = {"output_type": "stream", "name": "stdout", "text": "x" * (OUTPUT_LIMIT // 2 + 10)}
    events = [{"ran": 0, "outputs": [big]}, {"ran": 1, "outputs": [big]}, {"ran": 2, "outputs": []}]
    _, problems = _apply_events(notebook, events)
    assert notebook.cells[0].outputs[0]["text"] == big["text"]  # within the limit: kept
    assert notebook.cells[1].outputs[0]["text"].startswith("[output not kept")
    assert problems == ["outputs past the 10 MB output limit not kept (cell 2)"]

"""The grading benchmark (``python -m lib.bench grading``) runs end to end at toy size; no timing is asserted."""

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from lib.bench.__main__ import commands, main
from lib.bench.grading import hand_ins


def test_grading_is_a_bench_command_that_prints_both_times_and_the_ratio(tmp_path, capsys, needs_sandbox):
    assert "grading" in commands()
    notebook = new_notebook(cells=[new_code_cell("from lib.checks import check\ncheck('1.equal-scores', [1, 2])")])
    nbformat.write(notebook, tmp_path / "01_tiny.ipynb")
    assert main(["grading", "--notebook", str(tmp_path / "01_tiny.ipynb"), "--copies", "1", "--time-limit", "120"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("grading 1 copy of 01_tiny.ipynb: --jobs 1 (")
    assert lines[1].split() == ["round", "jobs", "1", "(s)", "jobs", "2", "(s)", "jobs", "2", "/", "jobs", "1"]
    assert lines[2].split()[0] == "1" and len(lines[2].split()) == 4
    assert lines[3].startswith("median ratio jobs 2 / jobs 1: ")
    assert lines[4] == "same grades both ways: yes"


def test_hand_ins_are_copies_in_a_folder_per_student(tmp_path):
    source = tmp_path / "01_x.ipynb"
    source.write_text("{}")
    paths = hand_ins(source, 3, tmp_path / "class")
    assert [p.relative_to(tmp_path / "class").as_posix() for p in paths] == [
        "student01/01_x.ipynb",
        "student02/01_x.ipynb",
        "student03/01_x.ipynb",
    ]
    assert {p.read_text() for p in paths} == {"{}"}

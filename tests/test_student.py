"""Student copies hide every reference answer; grading reads what check() reported."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from lib.student import BEGIN, defined_names, grade_notebook, make_student_copy, strip_solutions

CHAPTERS = sorted(Path(__file__).parent.parent.joinpath("chapters").glob("*.ipynb"))


def test_defined_names():
    assert defined_names("answer = [1, 2]") == ["answer"]
    assert defined_names("def f(x):\n    y = 2\n    return y\nalpha, beta = 1, 2\nalpha += 1") == ["f", "alpha", "beta"]


def test_strip_solutions_keeps_the_check_call():
    source = "# NBVAL_CHECK_OUTPUT\n# BEGIN SOLUTION\ndef f(x):\n    return x\n# END SOLUTION\ncheck('1.x', f)"
    assert strip_solutions(source) == "# NBVAL_CHECK_OUTPUT\nf = ...  # your answer here\ncheck('1.x', f)"


def test_student_copies_of_every_chapter_hide_the_answers(tmp_path):
    assert CHAPTERS
    for chapter in CHAPTERS:
        copy = nbformat.read(make_student_copy(chapter, tmp_path), as_version=4)
        original = nbformat.read(chapter, as_version=4)
        n_solutions = sum(BEGIN in cell.source for cell in original.cells)
        placeholders = [cell for cell in copy.cells if "= ...  # your answer here" in cell.source]
        assert len(placeholders) == n_solutions > 0
        for cell in placeholders:
            assert cell.outputs == [] and "SOLUTION" not in cell.source
            assert "hide-cell" not in cell.metadata.get("tags", [])


def test_grade_notebook_reports_each_exercise(tmp_path):
    notebook = new_notebook(
        cells=[
            new_code_cell("from lib.checks import check"),
            new_code_cell("check('1.equal-scores', [1, 2])"),
            new_code_cell("check('1.causal-output', [0, 4])"),
            new_code_cell("check('1.dot-variance', ...)"),
            new_code_cell("answer = undefined_name\ncheck('1.scaled-scores', answer)"),
        ]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "student.ipynb"
    nbformat.write(notebook, path)
    assert grade_notebook(path) == {
        "1.equal-scores": "correct",
        "1.causal-output": "incorrect",
        "1.dot-variance": "not attempted",
        "1.scaled-scores": "not run",
    }

"""lib.grade_command: grade and merge refuse what cannot make one gradebook, naming the argument,
before any notebook runs (the grading itself is tests/test_gradebook.py's)."""

import pytest
from _notebooks import write_notebook

from lib import student


def test_grade_refuses_bad_gradebook_arguments_before_grading(tmp_path, capsys):
    """Each refusal names its argument, and comes before any notebook runs."""
    path = write_notebook(tmp_path / "ada" / "01_x.ipynb", "x = 1")
    (tmp_path / "not_a_book.json").write_text("[]")
    for args, told in (
        (["--shard", "1/2", "--gradebook", str(tmp_path / "g.json")], "--shard needs --seed"),
        (["--shard", "3/2", "--seed", "1"], "--shard K/N needs 1 <= K <= N"),
        (["--update", str(tmp_path / "not_a_book.json")], "is not a gradebook"),
        (["--roster", str(tmp_path / "missing.txt")], "is not a file"),
        (["--overrides", str(tmp_path / "not_a_book.json")], "the header must name student, exercise"),
    ):
        assert student.main(["grade", str(path), *args]) == 2
        assert told in capsys.readouterr().err
    with pytest.raises(SystemExit):
        student.main(["grade", str(path), "--chapters", "1,99"])
    assert "--chapters takes chapter numbers" in capsys.readouterr().err
    assert student.main(["merge", str(tmp_path / "not_a_book.json")]) == 2
    assert "not merged" in capsys.readouterr().err

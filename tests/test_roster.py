"""The class list both ``copy --roster`` and ``grade --roster`` read."""

import pytest

from lib.roster import RosterError, parse_roster, read_roster


def test_plain_list_skips_blanks_and_comments(tmp_path):
    path = tmp_path / "class.txt"
    path.write_text("# spring\nada\n\n  mary ann \ngrace\n", encoding="utf-8")
    assert read_roster(path) == ["ada", "mary ann", "grace"]


def test_csv_finds_the_student_column_and_keeps_order():
    text = "Email,Name,Section\nz@x,zoe,1\na@x,ada,2\n,,\n"
    assert parse_roster(text) == ["zoe", "ada"]
    assert parse_roster("login,name\nzz,zoe\naa,ada\n", column="login") == ["zz", "aa"]


def test_a_comma_in_a_plain_name_is_not_a_csv():
    assert parse_roster("Lovelace, Ada\nHopper, Grace\n") == ["Lovelace, Ada", "Hopper, Grace"]


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("ada\ngrace\nada\n", None, "listed twice (lines 1 and 3)"),
        ("# nobody\n\n", None, "no student names"),
        ("name,email\nada,a@x\n", "login", "no column 'login'"),
        ("name,email\n,a@x\n", None, "line 2 has no 'name'"),
    ],
)
def test_bad_rosters_say_what_is_wrong(text, column, message):
    with pytest.raises(RosterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_roster(text, column=column)


def test_read_roster_refuses_a_folder(tmp_path):
    with pytest.raises(RosterError, match="is not a file"):
        read_roster(tmp_path)

"""lib.checks: check() finds the exercise, shows the result, reads any id, records and lists; never raises."""

import pytest
import torch

from lib import checks, grading
from lib.checks import (
    INCORRECT,
    ValueExercise,
    check,
    exercises,
)


def test_check_prints_in_a_terminal_and_never_raises(capsys):
    result = check("1.equal-scores", [2, 0])
    printed = capsys.readouterr().out
    assert "[1.equal-scores] ✗ incorrect" in printed and "best-matching" in printed
    assert result.status == INCORRECT
    assert check("no.such-exercise", 1).status == INCORRECT
    assert "no exercise called" in capsys.readouterr().out


def test_grader_crash_is_reported_not_raised(monkeypatch, capsys):
    def broken(exercise, answer):
        raise RuntimeError("grader bug")

    monkeypatch.setattr(checks, "grade", broken)
    result = check("1.equal-scores", [1, 2])
    assert result.status == INCORRECT and "could not grade" in result.message


def test_list_command(capsys):
    assert checks.main(["--list"]) == 0
    printed = capsys.readouterr().out
    for exercise_id in checks.exercises():
        assert exercise_id in printed
    assert "function" in printed and "value" in printed


# --- issue 15: check() never raises and never passes a wrong answer ------------------------


def test_id_given_as_a_list_is_a_message_not_a_type_error(capsys):
    result = check(["1.equal-scores"], [1, 2])
    assert result.status == INCORRECT
    assert "must be text" in result.message and 'check("1.equal-scores", answer)' in result.message
    assert check(42, [1, 2]).status == INCORRECT
    assert check({"a": 1}, [1, 2]).status == INCORRECT  # unhashable, and not a list either


def test_unknown_id_suggests_the_closest(capsys):
    assert "did you mean '1.equal-scores'?" in check("1.equal-score", [1, 2]).message
    assert "did you mean '1.equal-scores'?" in check("1.Equal scores", [1, 2]).message
    message = check("1.zzzzzzzzzzzz", [1, 2]).message
    assert "chapter 1 has" in message and "1.equal-scores" in message
    assert "--list" in check("99.nothing-like-it", 1).message


class Exits:
    """A learner's object whose conversion to an array calls exit()."""

    def __array__(self, dtype=None, copy=None):
        raise SystemExit(3)

    def __len__(self):
        raise SystemExit(4)


def test_system_exit_inside_array_is_caught(capsys):
    result = check("1.equal-scores", Exits())
    assert result.status == INCORRECT and "SystemExit" in result.message


class FakeShell:
    """Just enough of an IPython kernel shell for check()'s display logic."""

    kernel = object()
    execution_count = 1


def test_result_kept_in_a_variable_shows_in_a_later_cell(monkeypatch):
    shell = FakeShell()
    shown = []
    monkeypatch.setattr(grading, "kernel_shell", lambda: shell)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *args, **kwargs: shown.append(args[0]))
    r = check("1.equal-scores", [1, 2])  # cell 1: `r = check(...)` shows the result once
    assert len(shown) == 1 and "correct" in shown[0]["text/plain"]
    r._ipython_display_()  # IPython's echo, were `check(...)` the cell's last line: skipped
    assert len(shown) == 1
    shell.execution_count = 2  # cell 2: `r` alone shows it, the first time and every time
    r._ipython_display_()
    r._ipython_display_()
    assert len(shown) == 3


def test_a_mask_of_other_numbers_is_not_truncated_into_a_pass():
    """1.9 / 0.2 is not a 0/1 mask, even though int() would make it one."""
    from lib.checks import check

    def fuzzy(n, c):
        return (torch.arange(n + c)[None] <= torch.arange(n)[:, None] + c) * 1.7 + 0.2

    def exact(n, c):
        return (torch.arange(n + c)[None] <= torch.arange(n)[:, None] + c).float()

    assert not check("6.decode-mask", fuzzy).correct
    assert check("6.decode-mask", exact).correct


def test_bfloat16_and_grad_tensors_are_read_as_numbers():
    from lib.checks import check

    assert check("1.equal-scores", torch.tensor([1.0, 2.0], dtype=torch.bfloat16)).correct
    assert check("1.equal-scores", [torch.tensor(1.0, requires_grad=True), torch.tensor(2.0)]).correct
    assert not check("1.equal-scores", torch.tensor([1.0, 2.5], dtype=torch.bfloat16)).correct


def test_exit_inside_a_function_is_caught_in_ipython(monkeypatch):
    """IPython's exit() asks the shell to quit instead of raising; grading turns it into SystemExit."""
    import IPython

    from lib.checks import check

    class FakeShell:
        asked = False

        def ask_exit(self):
            FakeShell.asked = True

    shell = FakeShell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)

    def learner(x):
        shell.ask_exit()  # what IPython's exit() does
        return x

    result = check("1.stable-softmax", learner)
    assert not result.correct and "SystemExit" in result.message + result.feedback
    assert not FakeShell.asked and "ask_exit" not in vars(shell)  # the shell is left as it was


# --- no hang and no crash on any value a learner types ---------------------------------------


class LoopingArray:
    """A learner's object whose conversion to an array never ends."""

    def __array__(self, dtype=None, copy=None):
        while True:
            pass


class LoopingLength:
    """A learner's object that reads as a sequence whose length never comes."""

    def __len__(self):
        while True:
            pass

    def __getitem__(self, index):
        return 1.0


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message for you")


class RaisesUnprintable:
    def __array__(self, dtype=None, copy=None):
        raise Unprintable


def test_a_value_whose_array_loops_is_stopped(capsys):
    result = check("1.equal-scores", LoopingArray())
    assert result.status == INCORRECT and "within 2 s" in result.message
    assert check("1.equal-scores", LoopingLength()).status == INCORRECT  # numpy gives up once interrupted
    result = check("1.stable-softmax", lambda x: LoopingLength())  # a function that returns one
    assert result.status == INCORRECT and "did not finish" in result.message


def test_an_exception_whose_str_raises_is_described_not_raised(capsys):
    result = check("1.equal-scores", RaisesUnprintable())
    assert result.status == INCORRECT and "Unprintable (its message could not be read)" in result.message

    def raises(x):
        raise Unprintable

    result = check("1.stable-softmax", raises)
    assert result.status == INCORRECT and "Unprintable (its message could not be read)" in result.message


def test_a_str_subclass_id_with_hostile_methods_is_read_as_text(capsys):
    class Sly(str):
        def __hash__(self):
            raise RuntimeError("no hash")

        def __eq__(self, other):
            raise RuntimeError("no eq")

    assert check(Sly("1.equal-scores"), [1, 2]).correct


def test_importing_the_grader_loads_no_chapter_and_a_check_loads_one():
    """`import lib.checks` loads no chapter's exercises (nor the ViT, the digits, the capstone, the
    tokenizer); check("1.x", ...) loads chapter 1 only; the listing sees every chapter."""
    import subprocess
    import sys

    heavy = ["lib.vit", "lib.digits", "lib.capstone", "lib.tokenizer"]
    script = f"""
import sys, json
import lib.checks
before = sorted(m for m in sys.modules if m.startswith("lib.exercises.ch") or m in {heavy!r})
lib.checks.check("1.equal-scores", [1, 2])
after = sorted(m for m in sys.modules if m.startswith("lib.exercises.ch") or m in {heavy!r})
n = len(lib.checks.exercises())
every = sorted(m for m in sys.modules if m.startswith("lib.exercises.ch"))
print(json.dumps([before, after, n, every]))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    before, after, n, every = __import__("json").loads(run.stdout.splitlines()[-1])
    assert before == []
    assert after == ["lib.exercises.ch01"]
    assert n == len(exercises()) and every == [f"lib.exercises.ch{i:02d}" for i in range(1, 10)]


def test_a_chapter_module_declaring_another_chapters_id_is_refused(monkeypatch):
    import types

    import lib.exercises as registry

    fake = types.ModuleType("lib.exercises.ch99")
    fake.EXERCISES = (ValueExercise(id="3.stray", question="?", expected=1, explanation="", whole=True),)
    monkeypatch.setitem(__import__("sys").modules, "lib.exercises.ch99", fake)
    monkeypatch.setattr(registry, "chapter_modules", lambda: {99: "ch99"})
    registry.chapter_exercises.cache_clear()
    try:
        with pytest.raises(ValueError, match="start with its number"):
            registry.chapter_exercises(99)
    finally:
        registry.chapter_exercises.cache_clear()

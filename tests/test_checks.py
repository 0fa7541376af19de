"""The autograder core: statuses, targeted feedback, and no crash on any learner input."""

import math
import threading

import numpy as np
import pytest
import torch

from lib import checks
from lib.checks import (
    CORRECT,
    INCORRECT,
    NOT_ATTEMPTED,
    Case,
    FunctionExercise,
    GradingTimeout,
    ValueExercise,
    WrongAnswer,
    call_with_timeout,
    check,
    exercises,
    grade,
)

PAIR = ValueExercise(
    id="t.pair",
    question="?",
    expected=[1.0, 2.0],
    explanation="because",
    hints=("think",),
    wrong_answers=(WrongAnswer([2.0, 0.0], "best match"),),
    atol=0.01,
)

DOUBLE = FunctionExercise(
    id="t.double",
    question="double it",
    reference=lambda x: 2 * x,
    cases=(
        Case("one", lambda: (torch.tensor([1.0]),), "multiply by two"),
        Case("many", lambda: (torch.tensor([[1.0, -3.0]]),), "keep the shape"),
    ),
    explanation="2x",
    wrong_answers=(WrongAnswer(lambda x: x + 2, "you added two"),),
    timeout_s=0.3,
)


def test_value_statuses_and_feedback():
    assert grade(PAIR, [1.0, 2.004]).status == CORRECT
    assert grade(PAIR, torch.tensor([[1.0, 2.0]])).status == CORRECT  # extra brackets are fine
    result = grade(PAIR, [2, 0])
    assert result.status == INCORRECT and result.feedback == "best match" and result.hint == "think"
    result = grade(PAIR, [1.5, 2.0])
    assert result.status == INCORRECT and result.feedback == ""
    assert grade(PAIR, ...).status == NOT_ATTEMPTED
    assert grade(PAIR, None).status == NOT_ATTEMPTED


@pytest.mark.parametrize(
    "garbage, words",
    [
        ("1, 2", "got the text"),
        (b"12", "got the text"),
        ([1, 2, 3], "expected 2 numbers"),
        ([[1, 2], [3]], "could not read"),
        ({"a": 1}, "got a dict"),
        ({1, 2}, "got a set"),
        (True, "got a bool"),
        ([float("nan"), 2.0], "NaN"),
        ([math.inf, 2.0], "NaN or inf"),
        (torch.zeros(3, 2), "shape (3, 2)"),
        (print, "got a builtin_function_or_method"),
        (object(), "could not read"),
        ([1, "x"], "could not read"),
    ],
)
def test_value_garbage_gets_a_clear_message(garbage, words):
    result = grade(PAIR, garbage)
    assert result.status == INCORRECT
    assert words in result.message


def test_function_statuses():
    assert grade(DOUBLE, lambda x: x * 2).status == CORRECT
    assert grade(DOUBLE, lambda x: (x * 2).tolist()).status == CORRECT  # lists are read as tensors
    result = grade(DOUBLE, lambda x: x + 2)
    assert result.status == INCORRECT and result.feedback == "you added two"
    result = grade(DOUBLE, lambda x: x * 5)
    assert result.feedback == "multiply by two" and "fails 2 of 2" in result.message


@pytest.mark.parametrize(
    "function, words",
    [
        (lambda x: 1 / 0, "raised ZeroDivisionError"),
        (lambda x: None, "returned None"),
        (lambda x: "text", "not a tensor of numbers"),
        (lambda x: torch.zeros(5), "returned shape (5,)"),
        (lambda x: x * float("nan"), "returned NaN"),
        (lambda: 1, "raised TypeError"),
        (lambda x: exit(), "raised SystemExit"),
        (42, "expected a function"),
    ],
)
def test_function_garbage_gets_a_clear_message(function, words):
    result = grade(DOUBLE, function)
    assert result.status == INCORRECT and words in result.message


def test_endless_loop_is_stopped_by_the_timeout():
    def spin(x):
        while True:
            pass

    result = grade(DOUBLE, spin)
    assert result.status == INCORRECT and "did not finish within 0.3 s" in result.message


def test_loop_that_swallows_exceptions_is_still_stopped():
    def stubborn(x):
        while True:
            try:
                pass
            except Exception:  # a learner's broad except must not eat the timeout
                pass

    assert "did not finish" in grade(DOUBLE, stubborn).message


def test_timeout_off_the_main_thread():
    outcome = {}
    release = threading.Event()  # a blocking wait, so the abandoned thread does not hog the GIL

    def worker():
        try:
            call_with_timeout(release.wait, (), 0.2)
        except GradingTimeout:
            outcome["timed out"] = True

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(5)
    release.set()
    assert outcome == {"timed out": True}
    assert call_with_timeout(lambda a: a + 1, (1,), 1.0) == 2


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


def test_html_and_text_show_status_and_escape():
    result = checks.CheckResult("t.x", INCORRECT, "<b>raw</b>", feedback="a < b")
    assert "a &lt; b" in result._repr_html_() and "<b>raw</b>" not in result._repr_html_()
    assert "incorrect" in result._repr_html_() and "Feedback: a < b" in str(result)


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


@pytest.mark.parametrize("answer", [[1 + 2j, 2.0], torch.tensor([1.0 + 0.5j, 2.0]), np.array([1.0, 2.0 + 1e-3j])])
def test_complex_with_an_imaginary_part_is_never_correct(answer):
    result = grade(PAIR, answer)
    assert result.status == INCORRECT and "imaginary" in result.message


def test_complex_with_zero_imaginary_part_reads_as_real():
    assert grade(PAIR, [1 + 0j, 2 + 0j]).status == CORRECT
    assert grade(PAIR, torch.tensor([1.0, 2.0], dtype=torch.complex64)).status == CORRECT


class Exits:
    """A learner's object whose conversion to an array calls exit()."""

    def __array__(self, dtype=None, copy=None):
        raise SystemExit(3)

    def __len__(self):
        raise SystemExit(4)


def test_system_exit_inside_array_is_caught(capsys):
    result = check("1.equal-scores", Exits())
    assert result.status == INCORRECT and "SystemExit" in result.message


def test_bool_arrays_read_as_zero_and_one():
    three = ValueExercise(id="t.keys", question="?", expected=[1.0, 1.0, 0.0], explanation="")
    assert grade(three, [True, True, False]).status == CORRECT


def test_half_precision_result_gets_dtype_feedback():
    softmax_exercise = exercises()["1.stable-softmax"]

    def half(x):
        return torch.softmax(x.half(), dim=-1)

    result = grade(softmax_exercise, half)
    assert result.status == INCORRECT
    assert "returned dtype float16, expected float32" in result.message
    assert result.feedback.startswith("Wrong dtype/precision")
    # bfloat16 too; a float64 result of the right values is fine
    assert grade(softmax_exercise, lambda x: _stable_softmax(x).bfloat16()).feedback.startswith("Wrong dtype")
    assert grade(softmax_exercise, lambda x: _stable_softmax(x.double())).status == CORRECT


def _stable_softmax(x):
    """A learner's stable softmax, written without lib.attention."""
    shift = torch.nan_to_num(x.amax(dim=-1, keepdim=True), neginf=0.0)
    exps = torch.exp(x - shift)
    total = exps.sum(dim=-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))


def test_complex_function_result_is_never_correct():
    result = grade(DOUBLE, lambda x: (2 * x).to(torch.complex64) + 1j)
    assert result.status == INCORRECT and "complex" in result.message


class FakeShell:
    """Just enough of an IPython kernel shell for check()'s display logic."""

    kernel = object()
    execution_count = 1


def test_result_kept_in_a_variable_shows_in_a_later_cell(monkeypatch):
    shell = FakeShell()
    shown = []
    monkeypatch.setattr(checks, "_kernel_shell", lambda: shell)
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


def test_function_exercise_with_a_boolean_reference():
    """A mask-valued exercise: a wrong mask is graded (entries counted), never a crash on bool arithmetic."""
    from lib.checks import Case, FunctionExercise, grade

    exercise = FunctionExercise(
        id="t.mask",
        question="causal mask",
        reference=lambda n: torch.ones(n, n, dtype=torch.bool).tril(),
        cases=(Case("n=3", lambda: (3,), "lower triangle"),),
        explanation="",
    )
    assert grade(exercise, lambda n: torch.ones(n, n, dtype=torch.bool).tril()).correct
    wrong = grade(exercise, lambda n: torch.ones(n, n, dtype=torch.bool).triu())
    assert not wrong.correct and "6 of 9" in (wrong.message + wrong.feedback)
    as_ints = grade(exercise, lambda n: torch.ones(n, n).tril())  # 0/1 floats read as the same mask
    assert as_ints.correct


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


# --- issue 19: the tolerance policy, the library guard, and no hang on any value ---------------


COUNT = ValueExercise(id="t.count", question="?", expected=577, explanation="", whole=True)
SHARE = ValueExercise(
    id="t.share", question="? Give it to 2 decimal places.", expected=0.22270, explanation="", decimals=2
)


@pytest.mark.parametrize("answer, status", [(577, CORRECT), (577.0, CORRECT), (577.4, INCORRECT), (576.9, INCORRECT)])
def test_a_count_is_a_whole_number(answer, status):
    result = grade(COUNT, answer)
    assert result.status == status
    assert (result.feedback == checks.WHOLE_FEEDBACK) == (status == INCORRECT)
    assert "a count is a whole number" in checks.WHOLE_FEEDBACK


@pytest.mark.parametrize(
    "answer, status, worded",
    [(0.22, CORRECT, False), (0.2227, CORRECT, False), (0.2249, CORRECT, False), (0.2, INCORRECT, True),
     (0.23, INCORRECT, False), (0.5, INCORRECT, False), (0.0, INCORRECT, False)],
)  # fmt: skip
def test_a_decimal_answer_passes_at_the_stated_precision(answer, status, worded):
    result = grade(SHARE, answer)
    assert result.status == status, result
    assert (result.feedback == checks.precision_feedback(2)) == worded, result.feedback


def test_mistake_records_the_feedback_that_fired():
    assert grade(PAIR, [2, 0]).mistake == "best match"
    assert grade(PAIR, [1.5, 2.0]).mistake == "" and grade(PAIR, [1, 2]).mistake == ""
    assert grade(DOUBLE, lambda x: x + 2).mistake == "you added two"
    assert grade(DOUBLE, lambda x: x * 5).mistake == "multiply by two"  # the failing case's feedback
    assert grade(COUNT, 577.4).mistake == checks.WHOLE_FEEDBACK


def test_a_grid_typed_as_a_flat_list_reads_row_after_row():
    exercise = exercises()["2.causal-alignment"]
    assert grade(exercise, [1, 1, 1, 1, 0, 0]).status == CORRECT
    assert grade(exercise, [[1, 1, 1], [1, 0, 0]]).status == CORRECT
    assert grade(exercise, [1, 0, 0, 1, 1, 1]).feedback.startswith("You swapped the two conventions")
    assert "expected 6 numbers" in grade(exercise, [1, 1, 1, 1, 0]).message


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


def test_library_guard_catches_every_route_and_restores_everything():
    """A call into the library function is refused by name, by module attribute, through a
    closure, a default argument, a helper, and even when the learner swallows the refusal;
    after a timeout or an exception, nothing is left patched."""
    import lib.attention
    from lib.attention import softmax

    exercise = exercises()["1.stable-softmax"]
    message = checks.LIBRARY_FEEDBACK.format(name="softmax")
    assert message == "your function calls the library's softmax: write it yourself"

    def helper(x):
        return softmax(x)

    def swallowing(x):
        try:
            return softmax(x)
        except BaseException:
            return _stable_softmax(x)

    def closure():
        inner = softmax
        return lambda x: inner(x)

    routes = [softmax, lambda x: softmax(x), lambda x: lib.attention.softmax(x), lambda x: helper(x), swallowing]
    routes += [closure(), lambda x, f=softmax: f(x)]
    for route in routes:
        result = grade(exercise, route)
        assert result.status == INCORRECT and result.feedback == message, route
    code = softmax.__code__

    def slow(x):
        softmax(x[..., :1])
        while True:
            pass

    assert "softmax" in grade(exercise, slow).feedback  # the refusal beats the loop
    assert lib.attention.softmax is softmax and softmax.__code__ is code
    assert not hasattr(lib.attention, "__lib_safe_call_refuse__")
    assert grade(exercise, _stable_softmax).status == CORRECT  # a learner's own function still passes
    torch.testing.assert_close(softmax(torch.tensor([0.0, 0.0])), torch.tensor([0.5, 0.5]))


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

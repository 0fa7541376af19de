"""lib.grading: the book's tolerance policy for values, hidden cases for functions, the library
guard, and a grade for every answer a learner could type (never a crash, never a hang)."""

import math
import threading

import numpy as np
import pytest
import torch

from lib import grading
from lib.exercises import find
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.grading import CORRECT, INCORRECT, NOT_ATTEMPTED, CheckResult, grade
from lib.safe_call import GradingTimeout, call_with_timeout

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


@pytest.mark.parametrize("answer", [[1 + 2j, 2.0], torch.tensor([1.0 + 0.5j, 2.0]), np.array([1.0, 2.0 + 1e-3j])])
def test_complex_with_an_imaginary_part_is_never_correct(answer):
    result = grade(PAIR, answer)
    assert result.status == INCORRECT and "imaginary" in result.message


def test_complex_with_zero_imaginary_part_reads_as_real():
    assert grade(PAIR, [1 + 0j, 2 + 0j]).status == CORRECT
    assert grade(PAIR, torch.tensor([1.0, 2.0], dtype=torch.complex64)).status == CORRECT


def test_bool_arrays_read_as_zero_and_one():
    three = ValueExercise(id="t.keys", question="?", expected=[1.0, 1.0, 0.0], explanation="")
    assert grade(three, [True, True, False]).status == CORRECT


def test_half_precision_result_gets_dtype_feedback():
    softmax_exercise = find("1.stable-softmax")

    def half(x):
        return _stable_softmax(x.half())

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


def test_function_exercise_with_a_boolean_reference():
    """A mask-valued exercise: a wrong mask is graded (entries counted), never a crash on bool arithmetic."""
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


COUNT = ValueExercise(id="t.count", question="?", expected=577, explanation="", whole=True)


SHARE = ValueExercise(
    id="t.share", question="? Give it to 2 decimal places.", expected=0.22270, explanation="", decimals=2
)


@pytest.mark.parametrize("answer, status", [(577, CORRECT), (577.0, CORRECT), (577.4, INCORRECT), (576.9, INCORRECT)])
def test_a_count_is_a_whole_number(answer, status):
    result = grade(COUNT, answer)
    assert result.status == status
    assert (result.feedback == grading.WHOLE_FEEDBACK) == (status == INCORRECT)
    assert "a count is a whole number" in grading.WHOLE_FEEDBACK


@pytest.mark.parametrize(
    "answer, status, worded",
    [(0.22, CORRECT, False), (0.2227, CORRECT, False), (0.2249, CORRECT, False), (0.2, INCORRECT, True),
     (0.23, INCORRECT, False), (0.5, INCORRECT, False), (0.0, INCORRECT, False)],
)  # fmt: skip
def test_a_decimal_answer_passes_at_the_stated_precision(answer, status, worded):
    result = grade(SHARE, answer)
    assert result.status == status, result
    assert (result.feedback == grading.precision_feedback(2)) == worded, result.feedback


def test_mistake_records_the_feedback_that_fired():
    assert grade(PAIR, [2, 0]).mistake == "best match"
    assert grade(PAIR, [1.5, 2.0]).mistake == "" and grade(PAIR, [1, 2]).mistake == ""
    assert grade(DOUBLE, lambda x: x + 2).mistake == "you added two"
    assert grade(DOUBLE, lambda x: x * 5).mistake == "multiply by two"  # the failing case's feedback
    assert grade(COUNT, 577.4).mistake == grading.WHOLE_FEEDBACK


def test_library_guard_catches_every_route_and_restores_everything():
    """A call into the library function is refused by name, by module attribute, through a
    closure, a default argument, a helper, and even when the learner swallows the refusal;
    after a timeout or an exception, nothing is left patched."""
    import lib.attention
    from lib.attention import softmax

    exercise = find("1.stable-softmax")
    message = grading.LIBRARY_FEEDBACK.format(name="lib.attention.softmax")
    assert message == "your function uses lib.attention.softmax, which does this exercise's work: write it yourself"
    hidden = "soft" + "max"  # a name the reading before the run cannot see: the guard refuses it while it runs

    def helper(x):
        return softmax(x)

    def swallowing(x):
        try:
            return getattr(lib.attention, hidden)(x)
        except BaseException:
            return _stable_softmax(x)

    def closure():
        inner = softmax
        return lambda x: inner(x)

    routes = [lambda x: softmax(x), lambda x: lib.attention.softmax(x), lambda x: helper(x), swallowing]
    routes += [closure(), lambda x, f=softmax: f(x), lambda x: getattr(lib.attention, hidden)(x)]
    for route in routes:
        result = grade(exercise, route)
        assert result.status == INCORRECT and result.feedback == message, route
    assert grade(exercise, swallowing).message.startswith("not graded: while the hidden case 'small scores' ran")
    assert "lib.attention.softmax itself" in grade(exercise, softmax).feedback
    code = softmax.__code__

    def slow(x):
        getattr(lib.attention, hidden)(x[..., :1])
        while True:
            pass

    assert "softmax" in grade(exercise, slow).feedback  # the refusal beats the loop
    assert lib.attention.softmax is softmax and softmax.__code__ is code
    assert not hasattr(lib.attention, "__lib_safe_call_refuse__")
    assert grade(exercise, _stable_softmax).status == CORRECT  # a learner's own function still passes
    torch.testing.assert_close(softmax(torch.tensor([0.0, 0.0])), torch.tensor([0.5, 0.5]))


def test_html_and_text_show_status_and_escape():
    result = CheckResult("t.x", INCORRECT, "<b>raw</b>", feedback="a < b")
    assert "a &lt; b" in result._repr_html_() and "<b>raw</b>" not in result._repr_html_()
    assert "incorrect" in result._repr_html_() and "Feedback: a < b" in str(result)


def test_a_grid_typed_as_a_flat_list_reads_row_after_row():
    exercise = find("2.causal-alignment")
    assert grade(exercise, [1, 1, 1, 1, 0, 0]).status == CORRECT
    assert grade(exercise, [[1, 1, 1], [1, 0, 0]]).status == CORRECT
    assert grade(exercise, [1, 0, 0, 1, 1, 1]).feedback.startswith("You swapped the two conventions")
    assert "expected 6 numbers" in grade(exercise, [1, 1, 1, 1, 0]).message

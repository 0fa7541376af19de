"""Every named mistake is caught at any precision (issue 30): each value exercise's known wrong
answers, rounded to the precision asked for and more coarsely (or cut off), get their own
feedback, with a word about the precision asked for when coarser; the mistakes the issue lists
are named one by one, as a learner would type them."""

import math

import numpy as np
import pytest
import torch

from lib.checks import INCORRECT, FunctionExercise, ValueExercise, exercises, grade
from lib.value_grading import precision_feedback, precision_note, tolerance, truncation_feedback

VALUES = [e for e in exercises().values() if isinstance(e, ValueExercise)]
DECIMAL = [e for e in VALUES if e.decimals is not None]


def _cut(value: np.ndarray, places) -> np.ndarray:
    return np.trunc(value * 10.0**places * (1 + 1e-12)) / 10.0**places


def _places(answer: np.ndarray) -> np.ndarray:
    """The decimals each entry of ``answer`` shows (a float does not keep trailing zeros: 0.80 is 0.8)."""
    return np.array([next(d for d in range(11) if d == 10 or math.isclose(x, round(x, d))) for x in answer.ravel()])


def _matches(answer: np.ndarray, other: np.ndarray, atol: float) -> bool:
    """Whether ``answer`` also reads as ``other``, rounded or cut off to the decimals each entry shows."""
    answer, other = answer.ravel(), other.ravel()
    places = _places(answer)
    half = np.maximum(atol, 0.5 * 10.0**-places) * (1 + 1e-6)
    rounded = np.abs(answer - other) <= half
    return bool(np.all(rounded | (np.abs(answer - _cut(other, places)) <= 1e-9)))


def _roundings(exercise: ValueExercise):
    """(wrong answer, places, how, answer) for each known mistake, rounded and cut off to the precision
    asked for and one and two places coarser, where that answer reads as this mistake alone."""
    expected = np.asarray(exercise.expected, dtype=np.float64)
    rule = tolerance(exercise)
    for index, wrong in enumerate(exercise.wrong_answers):
        value = np.asarray(wrong.value, dtype=np.float64)
        others = [w for i, w in enumerate(exercise.wrong_answers) if i != index]
        earlier = [expected] + [np.asarray(w.value, dtype=np.float64) for w in others]
        for places in range(max(exercise.decimals - 2, 0), exercise.decimals + 1):
            for how, answer in (("rounded", np.round(value, places)), ("cut off", _cut(value, places))):
                if np.any((answer == 0) & (np.abs(value) > rule.atol)):
                    continue  # a 0 carries no digit: it names nothing
                if any(_matches(answer, other, rule.atol) for other in earlier):
                    continue  # at this precision the answer reads as the right one or another mistake too
                yield wrong, places, how, answer


@pytest.mark.parametrize("exercise", DECIMAL, ids=lambda e: e.id)
def test_each_named_mistake_is_caught_rounded_as_asked_and_coarser(exercise):
    seen = 0
    for wrong, places, how, answer in _roundings(exercise):
        result = grade(exercise, answer.tolist())
        assert result.status == INCORRECT and result.mistake == wrong.feedback, (places, how, answer, result.feedback)
        far = np.abs(answer - np.asarray(wrong.value, dtype=np.float64)) > tolerance(exercise).atol
        coarser = bool(np.any(far.ravel() & (_places(answer) < exercise.decimals)))
        note = f" {precision_note(exercise.decimals)}" if coarser else ""
        assert result.feedback == wrong.feedback + note, (places, how, answer)
        seen += places == exercise.decimals
    assert seen >= len(exercise.wrong_answers), "every mistake is named at the precision asked for"


@pytest.mark.parametrize("exercise", DECIMAL, ids=lambda e: e.id)
def test_the_right_answer_too_coarse_or_cut_off_is_told_so(exercise):
    expected = np.asarray(exercise.expected, dtype=np.float64)
    d = exercise.decimals
    coarse = np.round(expected, d - 1)
    if not np.allclose(coarse, expected, atol=tolerance(exercise).atol) and not np.any(coarse == 0):
        assert grade(exercise, coarse.tolist()).feedback == precision_feedback(d), coarse
    cut = _cut(expected, d)
    if not np.allclose(cut, expected, atol=tolerance(exercise).atol):
        result = grade(exercise, cut.tolist())
        others = [w.feedback for w in exercise.wrong_answers]
        assert result.feedback == truncation_feedback(d) or result.mistake in others, (cut, result.feedback)


# The mistakes issue 30 lists, as a learner types them: (id, answer, words of the feedback it must get).
LISTED = [
    ("1.masked-read", [4, 1], "plain average of the two allowed values"),
    ("2.mask-after-softmax", 1, "best allowed key"),
    ("2.mask-after-softmax", 2.0, "plain average of the allowed values"),
    ("3.passes", [1, 10], "One pass too many"),
    ("3.permuted-outputs", [3, 1, 4, 2], "counted from 1"),
    ("4.block-weights", 2 * 320 * 320 + 2 * 320 * 80 + 3 * 320 * 853, "down to 853"),
    ("4.block-weights", 2 * 320 * 320 + 2 * 320 * 80 + 3 * 320 * 854, "whole 854"),
    ("4.postnorm-zero-branches", [-1.02, -0.34, 0.0, 1.36], "unbiased variance"),
    ("4.what-changes", [1, 2], "reads itself"),
    ("5.accumulator", [4, -0.73], "without rescaling acc"),
    ("5.accumulator", [4, -0.7], "without rescaling acc"),
    ("6.bandwidth-floor", 8.95, "cut off rather than rounded"),
    ("7.viterbi", 8, "Mind the sign"),
    ("7.viterbi", 8.0, "Mind the sign"),
    ("7.viterbi", math.exp(-8), "probability of the best segmentation"),
    ("7.viterbi", 0.0003, "probability of the best segmentation"),
    ("7.next-merge", [110, 117], "reversed"),
    ("8.projection-params", 1.57, "in millions"),
    ("8.projection-params", 1.6, "in millions"),
    ("8.projection-params", 1.573376, "in millions"),
    ("9.uniform-loss", -7.625, "log-probability of the target"),
    ("9.uniform-loss", -7.62, "log-probability of the target"),
    ("9.uniform-loss", -7.6, "log-probability of the target"),
    ("9.uniform-loss", 7.6, "not to the 3 decimal places"),
]


@pytest.mark.parametrize("exercise_id, answer, words", LISTED, ids=[f"{i}={a}" for i, a, _ in LISTED])
def test_the_listed_mistakes_are_named(exercise_id, answer, words):
    exercise = exercises()[exercise_id]
    result = grade(exercise, answer)
    assert result.status == INCORRECT and words in result.feedback, result.feedback
    if (exercise_id, answer) in COARSER:  # a mistake given more coarsely than asked: the precision is named too
        assert f"{exercise.decimals} decimal places the question asks for" in result.feedback, result.feedback


COARSER = [("5.accumulator", [4, -0.73]), ("5.accumulator", [4, -0.7]), ("9.uniform-loss", -7.6)]
COARSER += [("9.uniform-loss", 7.6), ("9.uniform-loss", -7.62)]


def test_the_unbiased_postnorm_answer_is_what_torch_gives():
    """The listed 4.6 answer above is post-norm with torch.std (d - 1), computed here by torch."""
    x = torch.tensor([1.0, 3.0, 4.0, 8.0])
    once = (x - x.mean()) / x.std()
    twice = (once - once.mean()) / once.std()
    assert np.allclose(twice.tolist(), [-1.02, -0.34, 0.0, 1.36], atol=0.005)


def _strict_causal_padding(lengths, n, m):  # a learner's mask with j < i + (m - n) instead of <=
    i, j = torch.arange(n)[:, None], torch.arange(m)[None, :]
    return (j < lengths[:, None, None, None]) & (j < i + (m - n))


def _each_tile_alone(m, l, block):  # a learner's update that normalises the tile as a row of its own
    top = block.max(dim=-1).values
    return torch.stack([top, (block - top[:, None]).exp().sum(-1)])


def _each_tile_sums_to_one(m, l, block):
    top = torch.maximum(m, block.max(dim=-1).values)
    return torch.stack([top, l * (m - top).exp() + torch.ones_like(l)])


@pytest.mark.parametrize(
    "exercise_id, function, words",
    [
        ("2.causal-padding-mask", _strict_causal_padding, "lost its own key"),
        ("5.online-softmax-update", _each_tile_alone, "normalised each tile on its own"),
        ("5.online-softmax-update", _each_tile_sums_to_one, "normalised each tile on its own"),
    ],
)
def test_function_mistakes_are_named(exercise_id, function, words):
    exercise = exercises()[exercise_id]
    assert isinstance(exercise, FunctionExercise)
    result = grade(exercise, function)
    assert result.status == INCORRECT and words in result.feedback, result.feedback
    assert "Return one tensor" not in result.feedback

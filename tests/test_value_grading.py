"""A value answer is read at the precision the learner gave it (lib/value_grading.py): a known
mistake rounded or cut off more coarsely than asked is still named, with a word about the
precision asked for; the right answer given too coarsely, or cut off, gets a word of its own."""

import numpy as np
import pytest

from lib.exercises.base import ValueExercise, WrongAnswer
from lib.value_grading import (
    WHOLE_FEEDBACK,
    given_decimals,
    judge_value,
    precision_feedback,
    precision_note,
    tolerance,
    truncation_feedback,
)

ACC = ValueExercise(
    id="t.acc",
    question="? Give each number to 3 decimal places.",
    expected=[2.10364, -0.09720],
    explanation="",
    wrong_answers=(WrongAnswer([4.0, -0.72933], "no rescale"), WrongAnswer([5.43656, -0.72933], "inverted")),
    decimals=3,
)
FLOOR = ValueExercise(
    id="t.floor", question="? Give it to 2 decimal places.", expected=30 / 3.35, explanation="", decimals=2
)
COUNT = ValueExercise(
    id="t.count",
    question="?",
    expected=1_573_376,
    explanation="",
    wrong_answers=(WrongAnswer(1.573376, "in millions"),),
    whole=True,
)


def judged(exercise, answer):
    expected = np.asarray(exercise.expected, dtype=np.float64)
    return judge_value(exercise, np.asarray(answer, dtype=np.float64).reshape(expected.shape))


@pytest.mark.parametrize("x, decimals", [(4.0, 0), (-0.73, 2), (7.625, 3), (146240.4, 1), (1 / 3, 10), (-8.0, 0)])
def test_given_decimals(x, decimals):
    assert given_decimals(x) == decimals


def test_right_answer_at_the_asked_precision_passes():
    assert judged(ACC, [2.104, -0.097]).correct and judged(ACC, [2.10364, -0.0972]).correct
    assert judged(FLOOR, 8.96).correct and not judged(FLOOR, 8.97).correct


@pytest.mark.parametrize("answer", [[4, -0.729], [4.0, -0.7293], [4, -0.73], [4, -0.7], [4.0, -0.72]])
def test_a_known_mistake_is_named_at_any_precision(answer):
    verdict = judged(ACC, answer)
    assert not verdict.correct and verdict.mistake == "no rescale"
    coarser = any(
        given_decimals(x) < 3 and abs(x - w) > tolerance(ACC).atol for x, w in zip(answer, [4, -0.72933], strict=True)
    )
    assert verdict.feedback == ("no rescale " + precision_note(3) if coarser else "no rescale"), answer
    assert "3 decimal places" in precision_note(3)


def test_the_right_answer_given_coarsely_or_cut_off_gets_a_word_about_it():
    assert judged(ACC, [2.1, -0.1]).feedback == precision_feedback(3)
    assert judged(FLOOR, 9.0).feedback == precision_feedback(2)
    assert judged(FLOOR, 8.95).feedback == truncation_feedback(2)  # 8.955 cut off, not rounded
    assert judged(ACC, [2.103, -0.097]).feedback == truncation_feedback(3)
    assert judged(FLOOR, 8.9).feedback == precision_feedback(2)  # cut off, and coarser than asked
    assert judged(FLOOR, 8.94).feedback == "" and judged(FLOOR, 8.8).feedback == ""


def test_a_zero_carries_no_digit():
    """0 is -0.0972 to no decimals, but a learner who types 0 has not rounded anything."""
    assert judged(ACC, [2, 0]).feedback == ""
    assert judged(ACC, [0, 0]).feedback == ""


def test_a_count_given_in_millions_is_named_and_a_fraction_is_not_a_count():
    assert judged(COUNT, 1.57).mistake == "in millions" and judged(COUNT, 1.6).mistake == "in millions"
    assert judged(COUNT, 1.573).feedback == "in millions"
    assert judged(COUNT, 2).feedback == ""  # a whole number is read at the precision asked for
    assert judged(COUNT, 1_573_376.5).feedback == WHOLE_FEEDBACK
    assert judged(COUNT, 1_573_376).correct

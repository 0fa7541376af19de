"""How a value answer is judged: the book's tolerance policy, read at the precision the learner gave.

``lib.grading.grade`` turns the verdict into a ``CheckResult``; the static page
(``book/_static/check-yourself.js``) applies the same rules to the data ``lib.checks`` exports.

One tolerance policy for the book (DESIGN.md):
    * a count, index or choice is declared ``whole``: only a whole number passes, and an answer
      with a fraction gets "a count is a whole number";
    * a decimal answer declares ``decimals``, which its question states ("Give it to 2 decimal
      places."): any answer within half a unit of that last place passes (so the answer rounded
      to that precision does).

A wrong answer is read at the precision it was given in, entry by entry: ``[4, -0.73]`` is
4 to 0 places and -0.73 to 2, so it is what a known mistake ``[4.0, -0.7293]`` gives, rounded
(or cut off) there. Such an answer gets that mistake's feedback, with a word about the
precision asked for when it was given more coarsely; the right answer given more coarsely
than asked gets the word about precision alone, and the right answer cut off instead of rounded
(8.95 for 8.955) gets a word about rounding. An entry given as 0 carries no digit and matches
no non-zero number more coarsely than asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Tolerance", "Verdict", "tolerance", "given_decimals", "judge_value", "precision_feedback"]
__all__ += ["precision_note", "truncation_feedback", "WHOLE_FEEDBACK", "WHOLE_ATOL"]

WHOLE_FEEDBACK = "This answer counts, indexes or chooses, and a count is a whole number: no fractions."
WHOLE_ATOL = 1e-6  # a whole answer computed in floats (384 / 16 * 24) may carry rounding noise
MOST_DECIMALS = 10  # a number with more decimals than this is read as given in full


def _places(decimals: int) -> str:
    return f"{decimals} decimal place" + ("" if decimals == 1 else "s")


def precision_feedback(decimals: int) -> str:
    places = _places(decimals)
    return f"Close, but not to the {places} the question asks for: keep more digits while you work, then round."


def precision_note(decimals: int) -> str:
    """What a known mistake's feedback gains when the answer was given more coarsely than asked."""
    return f"And give each number to the {_places(decimals)} the question asks for: you gave fewer."


def truncation_feedback(decimals: int) -> str:
    return (
        f"Close, but cut off rather than rounded: to {_places(decimals)}, a next digit of 5 or more "
        "raises the last digit you keep by one."
    )


@dataclass(frozen=True)
class Tolerance:
    """How a value exercise compares answers (the policy in the module docstring): ``atol`` and
    ``rtol`` decide a match with the expected or a known wrong answer at the precision asked for;
    ``whole`` asks for whole numbers, ``decimals`` for that many places; ``rule`` is the word about
    the policy (a count is whole; the precision asked for)."""

    atol: float
    rtol: float
    whole: bool = False
    decimals: int | None = None
    rule: str = ""


def tolerance(exercise: Any) -> Tolerance:
    """The tolerance of a ``ValueExercise`` (lib.exercises.base)."""
    if exercise.whole:
        return Tolerance(WHOLE_ATOL, 0.0, whole=True, rule=WHOLE_FEEDBACK)
    if exercise.decimals is not None:
        atol = 0.5 * 10.0**-exercise.decimals * (1 + 1e-6)  # half a unit in the last place asked for
        return Tolerance(atol, 0.0, decimals=exercise.decimals, rule=precision_feedback(exercise.decimals))
    return Tolerance(exercise.atol, exercise.rtol)  # an exercise outside the book's policy (tests, ad hoc)


def given_decimals(x: float) -> int:
    """How many decimals ``x`` was given with: 4 -> 0, -0.73 -> 2, 7.625 -> 3 (at most ``MOST_DECIMALS``).

    >>> [given_decimals(x) for x in (4.0, -0.73, 7.625, 1 / 3)]
    [0, 2, 3, 10]
    """
    for decimals in range(MOST_DECIMALS):
        if abs(x - round(x, decimals)) <= 1e-11 * max(1.0, abs(x)):
            return decimals
    return MOST_DECIMALS


@dataclass(frozen=True)
class Verdict:
    """The judgement of one value answer: right or not, the feedback shown, and the mistake
    counted (a known wrong answer's own feedback, or the rule that fired; "" when none did)."""

    correct: bool
    feedback: str = ""
    mistake: str = ""


def _truncated(value: np.ndarray, decimals: np.ndarray) -> np.ndarray:
    scale = 10.0**decimals
    return np.trunc(value * scale * (1 + 1e-12)) / scale


def _read_as_given(numbers: np.ndarray, target: np.ndarray, rule: Tolerance, given: np.ndarray) -> tuple[bool, bool]:
    """(rounded, cut off): whether ``numbers`` is ``target`` rounded, or cut off, to the decimals
    each entry was ``given`` with, where those are fewer than asked (or, for a whole answer, any)."""
    if rule.whole:
        coarse = given > 0  # a fraction given for a count: read it at its own precision (0.59 million)
    elif rule.decimals is not None:
        coarse = given < rule.decimals
    else:
        return False, False
    half = 0.5 * 10.0**-given * (1 + 1e-6)
    asked = np.abs(numbers - target) <= rule.atol
    digit = (numbers != 0) | (np.abs(target) <= rule.atol)  # a 0 carries no digit to round
    rounded = asked | (coarse & digit & (np.abs(numbers - target) <= half))
    if rule.whole:
        return bool(rounded.all()), False
    cut = np.abs(numbers - _truncated(target, given)) <= 1e-9 * np.maximum(1.0, np.abs(numbers))
    cut_off = rounded | (digit & cut & (given <= rule.decimals))
    return bool(rounded.all()), bool(cut_off.all())


def judge_value(exercise: Any, numbers: np.ndarray) -> Verdict:
    """Judge ``numbers`` (float64, already in the expected answer's shape) for ``exercise``."""
    rule = tolerance(exercise)
    expected = np.asarray(exercise.expected, dtype=np.float64)

    def close(value: Any) -> bool:
        return bool(np.allclose(numbers, np.asarray(value, dtype=np.float64), atol=rule.atol, rtol=rule.rtol))

    if close(expected):
        return Verdict(True)
    for known in exercise.wrong_answers:
        if close(known.value):
            return Verdict(False, known.feedback, known.feedback)
    given = np.vectorize(given_decimals, otypes=[int])(numbers) if numbers.size else np.zeros(0, int)

    def coarser(target: np.ndarray) -> bool:
        """Whether an entry given with fewer decimals than asked is needed to read the answer as ``target``."""
        asked = np.abs(numbers - target) <= rule.atol
        return rule.decimals is not None and bool(((given < rule.decimals) & ~asked).any())

    right_rounded, right_cut = _read_as_given(numbers, expected, rule, given)
    if rule.decimals is not None and np.all(np.abs(numbers - _truncated(expected, rule.decimals)) <= 1e-9):
        return Verdict(False, truncation_feedback(rule.decimals), truncation_feedback(rule.decimals))  # 8.95 for 8.955
    if right_rounded and coarser(expected):
        return Verdict(False, rule.rule, rule.rule)
    for known in exercise.wrong_answers:
        value = np.asarray(known.value, dtype=np.float64)
        if any(_read_as_given(numbers, value, rule, given)):
            note = f" {precision_note(rule.decimals)}" if coarser(value) else ""
            return Verdict(False, known.feedback + note, known.feedback)
    if right_cut:
        feedback = rule.rule if coarser(expected) else truncation_feedback(rule.decimals)
        return Verdict(False, feedback, feedback)
    if rule.whole and not np.all(np.abs(numbers - np.round(numbers)) <= WHOLE_ATOL):
        return Verdict(False, rule.rule, rule.rule)
    return Verdict(False)

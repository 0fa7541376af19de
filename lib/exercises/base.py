"""The shapes of a check-yourself exercise, as plain data (see ``lib/grading.py`` for grading).

A chapter's module (``lib/exercises/chNN.py``) declares its exercises with these classes;
the grader reads them. Nothing here imports the grader, so the two never import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["WrongAnswer", "ValueExercise", "Case", "FunctionExercise", "Exercise"]


@dataclass(frozen=True)
class WrongAnswer:
    """A wrong answer the chapter warns about, and what it tells us about the mistake."""

    value: Any
    feedback: str


@dataclass(frozen=True)
class ValueExercise:
    id: str
    question: str
    expected: Any  # a number or a (nested) list of numbers
    explanation: str
    hints: tuple[str, ...] = ()
    wrong_answers: tuple[WrongAnswer, ...] = ()
    atol: float = 5e-3
    rtol: float = 0.0
    # The book's tolerance policy (DESIGN.md): a count, index or choice is declared whole and
    # only a whole number passes; a decimal answer's question states its precision (`decimals`
    # places) and any answer rounded to that precision passes.
    whole: bool = False
    decimals: int | None = None
    # Numbers of one's own (lib.variants): the numbers of the question, each a lib.variants.Param
    # with the book's value and the values a student's variant may take, and ``make(**values)``,
    # which builds this exercise (answer, named mistakes, question) for any choice of them.
    params: tuple[Any, ...] = ()
    make: Callable[..., ValueExercise] | None = None
    points: float = 1  # what it is worth in the gradebook (python -m lib.student grade)


@dataclass(frozen=True)
class Case:
    """One hidden input for a function exercise, and what failing it usually means."""

    name: str
    args: Callable[[], tuple]  # builds fresh inputs, so a function that mutates them harms nothing
    feedback: str


@dataclass(frozen=True)
class FunctionExercise:
    id: str
    question: str
    reference: Callable
    cases: tuple[Case, ...]
    explanation: str
    hints: tuple[str, ...] = ()
    # Known wrong functions: a learner's function that behaves like one of these on a
    # failing case gets its feedback, which beats the case's general one.
    wrong_answers: tuple[WrongAnswer, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-4
    timeout_s: float = 2.0
    # The library functions this exercise asks the learner to write, as dotted names
    # ("lib.attention.softmax"): handing one in, or calling one from the learner's function,
    # is refused with a message that says so.
    stands_for: tuple[str, ...] = ()
    # Everything else that does the exercise's work and may not be used (dotted names: torch's
    # functions, methods such as "torch.Tensor.softmax", classes, the library's near relatives).
    # The learner's function is read before it runs (lib.code_policy) and these refuse while the
    # hidden cases run. An exercise that declares neither this nor ``stands_for`` checks nothing.
    forbids: tuple[str, ...] = ()
    # Draws one input from the exercise's domain with the torch.Generator it is given (shapes and
    # values): each grading adds a few such cases to the declared ones (lib.drawn_cases).
    draw: Callable[[Any], tuple] | None = None
    # What a result in a lower precision than the inputs' means for this exercise, where the
    # general message (float16's 3 digits, its exp overflowing past 11) would not fit.
    dtype_feedback: str = ""
    points: float = 1  # what it is worth in the gradebook; --partial gives the share of cases passed


Exercise = ValueExercise | FunctionExercise

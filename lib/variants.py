"""Numbers of one's own: each student's variant of the value exercises (issue 30 item 4).

A value exercise whose answer is computed from the numbers in its question declares those
numbers as ``Param``s (a name, the book's default, and the values a variant may take) and a
``make`` that builds the exercise, answer and named mistakes, from any choice of them
(``lib.exercises.base.ValueExercise``). The book shows the defaults; a student's variant is
drawn from their name alone:

* ``variant_for(name)`` -> {exercise id: {param: value}}: the same name always draws the
  same numbers, and two names differ in most exercises. The teacher's grader calls it with
  the roster name (``exercises_for(name)`` gives the graded exercises), never with anything a
  notebook says about itself.
* ``substitutions(name)`` -> the MyST substitutions a chapter's questions use
  (``{{ ex_1_4_a }}``), the defaults when ``name`` is None: the book's notebooks carry the
  defaults in their metadata, and a student copy has them written into the text.
* A student copy's folder holds ``VARIANT_FILE`` with the student's name; ``check()`` run
  from that folder grades against that student's numbers (``active_variant``).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Param", "VARIANT_FILE", "variant_for", "exercise_in", "exercises_for", "substitutions"]
__all__ += ["active_variant", "substitution_key", "render"]

VARIANT_FILE = ".book-variant"  # beside a student's copies: the name their numbers are drawn from
VARIANT_ENV = "BOOK_VARIANT"  # overrides the file, for a terminal run


@dataclass(frozen=True)
class Param:
    """One number of a question: its name in ``make``, the book's value, the values a variant may take."""

    name: str
    default: Any
    choices: tuple[Any, ...]
    shown: Callable[[Any], str] = str  # how the question writes it

    def __post_init__(self) -> None:
        if self.default not in self.choices:
            raise ValueError(f"param {self.name!r}: the default {self.default!r} is not among its choices")
        if len(set(self.choices)) < 2:
            raise ValueError(f"param {self.name!r} needs at least two distinct choices, got {self.choices!r}")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a variant name must be non-empty text, got {name!r}")
    return name.strip()


def _varied() -> list[Any]:
    from lib.exercises import every_exercise

    return [exercise for exercise in every_exercise() if getattr(exercise, "params", ())]


def draw(exercise: Any, name: str) -> dict[str, Any]:
    """The values of ``exercise``'s params for the student ``name``: the same name, the same values,
    drawn among the choices whose answer is not the book's (a hostile batch handed in the book's
    answers and scored where another student's numbers gave the same one)."""
    seed = hashlib.sha256(f"{_check_name(name)}\0{exercise.id}".encode()).digest()
    if exercise.id not in _OWN_ANSWERS:
        _OWN_ANSWERS[exercise.id] = _own_answers(exercise)
    return dict(random.Random(seed).choice(_OWN_ANSWERS[exercise.id]))


_OWN_ANSWERS: dict[str, tuple[tuple[tuple[str, Any], ...], ...]] = {}


def _own_answers(exercise: Any) -> tuple[tuple[tuple[str, Any], ...], ...]:
    """Every choice of ``exercise``'s params whose answer differs from the book's, in a fixed order."""
    import numpy as np

    book = np.asarray(exercise.expected, dtype=np.float64)
    names = [param.name for param in exercise.params]
    own = []
    for values in itertools.product(*(param.choices for param in exercise.params)):
        answer = np.asarray(exercise.make(**dict(zip(names, values, strict=True))).expected, dtype=np.float64)
        if answer.shape != book.shape or not np.allclose(answer, book, rtol=0, atol=1e-9):
            own.append(tuple(zip(names, values, strict=True)))
    if not own:
        raise ValueError(f"{exercise.id}: every choice of its params gives the book's answer")
    return tuple(own)


def variant_for(name: str) -> dict[str, dict[str, Any]]:
    """{exercise id: {param: value}} for the student ``name``, over every exercise that has params."""
    return {exercise.id: draw(exercise, name) for exercise in _varied()}


def defaults(exercise: Any) -> dict[str, Any]:
    return {param.name: param.default for param in exercise.params}


def exercise_in(exercise: Any, values: dict[str, Any]) -> Any:
    """``exercise`` with its params set to ``values`` (the book's exercise when it has no params)."""
    if not getattr(exercise, "params", ()):
        return exercise
    unknown = set(values) - {param.name for param in exercise.params}
    if unknown:
        raise ValueError(f"{exercise.id} has no param {sorted(unknown)[0]!r}")
    chosen = {**defaults(exercise), **values}
    for param in exercise.params:
        if chosen[param.name] not in param.choices:
            raise ValueError(f"{exercise.id}: {param.name}={chosen[param.name]!r} is not one of {param.choices}")
    return exercise.make(**chosen)


def exercises_for(name: str) -> dict[str, Any]:
    """Every exercise in the book by id, as the student ``name`` sees it (for the grader)."""
    from lib.exercises import every_exercise

    drawn = variant_for(name)
    return {e.id: exercise_in(e, drawn[e.id]) if e.id in drawn else e for e in every_exercise()}


def substitution_key(exercise_id: str, param: str) -> str:
    """The MyST substitution a question writes a param as: ('1.new-values', 'a') -> 'ex_1_new_values_a'."""
    return "ex_" + "".join(c if c.isalnum() else "_" for c in f"{exercise_id}_{param}")


def substitutions(name: str | None = None) -> dict[str, str]:
    """Every varied question's substitutions, with the student ``name``'s numbers (the book's when None)."""
    out = {}
    for exercise in _varied():
        values = defaults(exercise) if name is None else draw(exercise, name)
        for param in exercise.params:
            out[substitution_key(exercise.id, param.name)] = param.shown(values[param.name])
    return out


def render(text: str, values: dict[str, str]) -> str:
    """``text`` with each ``{{ key }}`` of ``values`` written out (other braces left alone).

    >>> render("q = [{{ ex_1_a }}, 0], {{ other }}", {"ex_1_a": "3"})
    'q = [3, 0], {{ other }}'
    """
    import re

    def one(match: re.Match) -> str:
        return values.get(match.group(1), match.group(0))

    return re.sub(r"\{\{\s*(\w+)\s*\}\}", one, text)


def active_variant(folder: Path | None = None) -> str | None:
    """The student name whose numbers ``check()`` grades: $BOOK_VARIANT, else the ``VARIANT_FILE``
    in ``folder`` (the working directory: a student copy's folder); None in the book."""
    name = os.environ.get(VARIANT_ENV, "").strip()
    if name:
        return name
    path = (folder or Path.cwd()) / VARIANT_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None

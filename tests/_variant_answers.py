"""Independent answers for every variant of a chapter's varied exercises (issue 30 item 4).

``tests/test_exercises_answers.py`` checks the book's numbers against a computation that does
not use the declaring code; a student's variant computes its answer from other numbers, so each
chapter's ``tests/test_variant_answers_chNN.py`` gives, for every exercise with params, a
function of those params computed another way (a hand-derived formula, a brute force, a peer
library) and ``variant_answer_tests`` checks it on every choice of the params.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from lib import variants
from lib.checks import CORRECT, exercises, grade
from lib.value_grading import tolerance


def varied_in_chapter(chapter: int) -> list[Any]:
    return [e for e in exercises().values() if getattr(e, "params", ()) and e.id.split(".")[0] == str(chapter)]


def every_choice(exercise: Any):
    names = [p.name for p in exercise.params]
    for values in itertools.product(*(p.choices for p in exercise.params)):
        yield dict(zip(names, values, strict=True))


def variant_answer_tests(chapter: int, answers: dict[str, Callable[..., Any]]):
    """Two tests: every varied exercise of ``chapter`` has an entry in ``answers``, and on every
    choice of its params the variant's expected answer equals ``answers[id](**values)``."""
    varied = varied_in_chapter(chapter)

    def test_every_varied_exercise_has_an_independent_answer():
        assert sorted(answers) == sorted(e.id for e in varied)

    @pytest.mark.parametrize("exercise", varied, ids=lambda e: e.id)
    def test_every_variant_agrees_with_an_independent_computation(exercise):
        for values in every_choice(exercise):
            variant = variants.exercise_in(exercise, values)
            answer = answers[exercise.id](**values)
            answer = answer.tolist() if isinstance(answer, torch.Tensor) else answer
            assert grade(variant, answer).status == CORRECT, (values, answer, variant.expected)
            precise = 1e-6 if variant.whole else tolerance(variant).atol / 50
            expected = np.asarray(variant.expected, dtype=np.float64)
            # the answer's length may depend on the params: a shape that differs is a different answer
            assert expected.shape == np.shape(answer), (values, answer, variant.expected)
            assert np.allclose(expected, answer, atol=precise, rtol=0), (values, answer, variant.expected)

    return (
        test_every_varied_exercise_has_an_independent_answer,
        test_every_variant_agrees_with_an_independent_computation,
    )

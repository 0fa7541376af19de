"""lib.drawn_cases: the hidden cases drawn afresh on every call, and the same from one seed."""

import dataclasses

import pytest
import torch

from lib.drawn_cases import DRAWN, describe, drawn_cases, integer, normal, sizes
from lib.exercises import find


def test_the_helpers_stay_in_their_range_and_refuse_an_empty_one():
    generator = torch.Generator().manual_seed(0)
    drawn = [integer(generator, 2, 4) for _ in range(200)]
    assert set(drawn) == {2, 3, 4}
    assert all(1 <= n <= 3 for n in sizes(generator, 5, 1, 3)) and len(sizes(generator, 5, 1, 3)) == 5
    x = normal(generator, (50,), scale=10.0, dtype=torch.float64)
    assert x.dtype == torch.float64 and bool((x != x.round()).all())  # not whole: a rounding shows
    with pytest.raises(ValueError, match="low=3, high=2"):
        integer(generator, 3, 2)
    assert describe((torch.zeros(2, 3), 4, None)) == "a float32 tensor of shape (2, 3), 4, None"


def test_each_call_draws_afresh_and_a_seed_draws_alike():
    exercise = find("6.decode-mask")  # integer inputs: drawn too
    first, second = drawn_cases(exercise), drawn_cases(exercise)
    assert len(first) == len(second) == DRAWN
    assert all(case.name.startswith("drawn at random") for case in first)
    draws = {repr([case.args() for case in drawn_cases(exercise)]) for _ in range(5)}
    assert len(draws) > 1  # 4 pairs of sizes, drawn 5 times: not all alike
    assert repr([c.args() for c in drawn_cases(exercise, 3)]) == repr([c.args() for c in drawn_cases(exercise, 3)])
    assert drawn_cases(dataclasses.replace(exercise, draw=None)) == ()


def test_a_drawn_case_hands_out_fresh_copies():
    case = drawn_cases(find("1.stable-softmax"), 1)[0]
    (x,) = case.args()
    x.fill_(0.0)  # a function that changes its input harms the next case nothing
    assert not bool((case.args()[0] == 0).all())

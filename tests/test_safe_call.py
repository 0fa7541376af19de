"""Reading a learner's answer and running a learner's function (lib.safe_call) directly."""

import numpy as np
import pytest
import torch

from lib.safe_call import GradingTimeout, as_numbers, call_with_timeout, describe_error, plain_numbers


@pytest.mark.parametrize(
    "answer",
    [
        [1.0, 2.0],
        (1, 2),
        np.array([1.0, 2.0]),
        torch.tensor([1.0, 2.0], requires_grad=True),
        torch.tensor([1.0, 2.0], dtype=torch.bfloat16),
        [torch.tensor(1.0), 2],
        [[1.0, 2.0]],  # extra brackets around the same numbers
        np.array([1 + 0j, 2 + 0j]),
    ],
)
def test_answers_that_are_the_numbers_one_two(answer):
    numbers, problem = as_numbers(answer, (2,))
    assert problem == "" and numbers.dtype == np.float64
    np.testing.assert_array_equal(numbers, [1.0, 2.0])


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("[1, 2]", "without quotes"),
        ([1.0, 2.0, 3.0], "expected 2 numbers"),
        ([1.0, [2.0, 3.0]], "could not read"),
        ([1 + 1j, 2], "imaginary"),
        ({1: 2}, "dict"),
        (lambda: 1, "function"),
    ],
)
def test_answers_that_are_not_two_numbers_say_why(answer, words):
    numbers, problem = as_numbers(answer, (2,))
    assert numbers is None and words in problem


def test_plain_numbers_leaves_non_tensors_alone():
    assert plain_numbers(3) == 3 and plain_numbers("x") == "x"
    assert isinstance(plain_numbers([torch.ones(1)])[0], np.ndarray)


def test_timeout_and_error_description():
    with pytest.raises(GradingTimeout):
        call_with_timeout(lambda: [None for _ in iter(int, 1)], (), 0.2)  # endless
    assert describe_error(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert describe_error(SystemExit()) == "SystemExit"

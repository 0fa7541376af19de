"""Reading a learner's answer and running a learner's function (lib.safe_call) directly."""

import sys

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


def test_timeout_interrupts_again_when_the_first_interruption_is_swallowed():
    """numpy swallows an exception raised in a learner's __len__ and asks again: the timer keeps firing."""

    def swallows_twice():
        for _ in range(2):
            try:
                while True:
                    pass
            except GradingTimeout:
                pass
        while True:
            pass

    with pytest.raises(GradingTimeout):
        call_with_timeout(swallows_twice, (), 0.2)
    assert call_with_timeout(lambda: sum(range(10**6)), (), 5.0) == sum(range(10**6))  # and then stops firing
    import time

    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # a stray alarm would raise here
        pass


def test_an_exception_whose_message_raises_is_still_described():
    class Sulky(Exception):
        def __str__(self):
            raise RuntimeError("no")

    class Odd(Exception):
        def __str__(self):
            return 42

    assert describe_error(Sulky()) == "Sulky (its message could not be read)"
    assert describe_error(Odd()) == "Odd (its message could not be read)"


def test_forbid_calls_refuses_and_puts_everything_back_even_after_an_error():
    from lib.safe_call import ForbiddenCall, forbid_calls

    def library(x):
        return x + 1

    namespace = {"library": library}
    exec("def learner(x):\n    return library(x)\n", namespace)
    code = library.__code__
    with pytest.raises(ValueError), forbid_calls(namespace["learner"], [(library, "library")]) as fired:
        with pytest.raises(ForbiddenCall):
            namespace["learner"](1)
        raise ValueError("the block fails")
    assert fired == ["library"]
    assert library.__code__ is code and namespace["library"] is library and namespace["learner"](1) == 2


def test_resolve_dotted_finds_functions_and_methods_and_names_what_it_cannot_import():
    from lib.attention import MultiHeadAttention, softmax
    from lib.safe_call import resolve_dotted

    assert resolve_dotted("lib.attention.softmax") == (softmax, sys.modules["lib.attention"], "softmax")
    method, owner, name = resolve_dotted("lib.attention.MultiHeadAttention.merge_heads")
    assert method is MultiHeadAttention.merge_heads and owner is MultiHeadAttention and name == "merge_heads"
    with pytest.raises(ImportError, match="stands_for names 'nowhere.softmax'"):
        resolve_dotted("nowhere.softmax")


def test_handed_in_sees_the_function_itself_a_bound_method_and_a_partial():
    import functools

    from lib.safe_call import handed_in

    class Library:
        def softmax(self, x):
            return x

    forbidden = [(Library.softmax, "softmax")]
    assert handed_in(Library.softmax, forbidden) == "softmax"
    assert handed_in(Library().softmax, forbidden) == "softmax"  # a bound method of it
    assert handed_in(functools.partial(Library.softmax, None), forbidden) == "softmax"
    assert handed_in(lambda x: Library.softmax(None, x), forbidden) is None  # a wrapper is the guard's job


def test_forbid_calls_shadows_an_inherited_method_and_removes_the_shadow():
    """Tensor.softmax lives on torch._C.TensorBase: the guard shadows it on torch.Tensor while the
    block runs, and afterwards torch.Tensor holds no attribute of its own by that name again."""
    from lib.safe_call import ForbiddenCall, forbid_calls

    def learner(x):
        return x.softmax(-1)

    assert "softmax" not in vars(torch.Tensor)
    with forbid_calls(learner, [(torch.Tensor.softmax, "torch.Tensor.softmax")], [(torch.Tensor, "softmax")]) as fired:
        with pytest.raises(ForbiddenCall):
            learner(torch.zeros(2))
    assert fired == ["torch.Tensor.softmax"] and "softmax" not in vars(torch.Tensor)
    torch.testing.assert_close(learner(torch.zeros(2)), torch.tensor([0.5, 0.5]))

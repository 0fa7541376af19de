"""Hidden cases drawn afresh, so that a table of the declared ones cannot pass (``lib.grading``).

A function exercise declares its edge cases (``cases``) and how to draw an input from its
domain (``draw``: a function of a ``torch.Generator`` that returns the arguments, shapes and
values alike). Each grading adds ``DRAWN`` drawn cases to the declared ones: ``check()`` draws
from a seed of its own on every call, the teacher's grader (``lib.answer_grading``) from the
batch's recorded seed, so that a rerun with that seed grades alike. The helpers below are what
the chapters' ``draw`` functions are written with.
"""

from __future__ import annotations

import secrets
import zlib

import torch

from lib.exercises.base import Case, FunctionExercise

__all__ = ["DRAWN", "DRAWN_FEEDBACK", "drawn_cases", "integer", "sizes", "normal", "describe"]

DRAWN = 4
DRAWN_FEEDBACK = (
    "On inputs drawn at random from the exercise's domain your function gives something else than the "
    "reference: it has to work for any input, not only for the cases listed."
)


def integer(generator: torch.Generator, low: int, high: int) -> int:
    """A whole number in [low, high], both included."""
    if high < low:
        raise ValueError(f"integer needs low <= high, got low={low}, high={high}")
    return int(torch.randint(low, high + 1, (), generator=generator))


def sizes(generator: torch.Generator, count: int, low: int, high: int) -> tuple[int, ...]:
    """``count`` sizes, each in [low, high]."""
    return tuple(integer(generator, low, high) for _ in range(count))


def normal(generator: torch.Generator, shape: tuple[int, ...], scale: float = 1.0, dtype=torch.float32) -> torch.Tensor:
    """Standard normal entries times ``scale``: distinct and not whole, so a mix-up or a rounding shows."""
    return torch.randn(shape, generator=generator, dtype=torch.float64).mul(scale).to(dtype)


def describe(args: tuple) -> str:
    """The arguments in a few words: shapes for tensors, values for the rest."""
    parts = []
    for value in args:
        if isinstance(value, torch.Tensor):
            parts.append(f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}")
        else:
            parts.append(repr(value))
    return ", ".join(parts)


def _copied(args):
    """Fresh copies of the inputs, so that a function that changes its inputs harms nothing."""
    if isinstance(args, (tuple, list)):
        return type(args)(_copied(item) for item in args)
    return args.clone() if isinstance(args, torch.Tensor) else args


def drawn_cases(exercise: FunctionExercise, seed: int | None = None, count: int = DRAWN) -> tuple[Case, ...]:
    """``count`` cases drawn with ``exercise.draw``: from ``seed`` (the same seed draws the same
    inputs), or, without one, from a seed of its own, new on every call. None without ``draw``."""
    if exercise.draw is None:
        return ()
    if seed is None:
        seed = secrets.randbits(62)
    cases = []
    for number in range(count):
        generator = torch.Generator().manual_seed(zlib.crc32(f"{seed}/{exercise.id}/{number}".encode()))
        args = tuple(exercise.draw(generator))
        name = f"drawn at random {number + 1}: {describe(args)}"
        cases.append(Case(name, lambda args=args: _copied(args), DRAWN_FEEDBACK))
    return tuple(cases)

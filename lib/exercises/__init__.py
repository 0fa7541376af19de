"""Every check-yourself exercise in the book, one module per chapter (``ch01.py``, ``ch02.py``, ...).

Each chapter module declares a tuple ``EXERCISES`` with the classes of ``lib.exercises.base``,
and every id it declares starts with its chapter's number ("8.patchify" lives in ``ch08``).
A chapter's module is imported the first time one of its ids is asked for (``find``), so
``check("1.equal-scores", ...)`` in chapter 1 never loads the ViT, the capstone or the
tokenizer that later chapters' exercises are built from; ``every_exercise()`` (the listing
and the static page's export) loads them all, in chapter order. Adding a chapter's exercises
means adding its module; nothing here needs editing.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re

from lib.exercises.base import Exercise

__all__ = ["chapter_modules", "chapter_exercises", "find", "every_exercise"]


@functools.cache
def chapter_modules() -> dict[int, str]:
    """The chapter modules by chapter number, {1: "ch01", ...}, found without importing them."""
    names = [info.name for info in pkgutil.iter_modules(__path__) if re.fullmatch(r"ch\d\d", info.name)]
    return {int(name[2:]): name for name in sorted(names)}


@functools.cache
def chapter_exercises(chapter: int) -> tuple[Exercise, ...]:
    """Chapter ``chapter``'s exercises, importing its module on the first call."""
    name = chapter_modules()[chapter]
    declared = importlib.import_module(f"{__name__}.{name}").EXERCISES
    seen: set[str] = set()
    for exercise in declared:
        if exercise.id.split(".")[0] != str(chapter):
            raise ValueError(
                f"exercise id {exercise.id!r} is declared in lib/exercises/{name}.py: "
                f"a chapter's ids start with its number ({chapter}.)"
            )
        if exercise.id in seen:
            raise ValueError(f"exercise id {exercise.id!r} is declared twice in lib/exercises/{name}.py")
        seen.add(exercise.id)
    return tuple(declared)


def find(exercise_id: str) -> Exercise | None:
    """The exercise called ``exercise_id``, loading only its chapter; None when there is none."""
    chapter = exercise_id.split(".")[0]
    if not (chapter.isascii() and chapter.isdigit()) or int(chapter) not in chapter_modules():
        return None
    for exercise in chapter_exercises(int(chapter)):
        if exercise.id == exercise_id:
            return exercise
    return None


def every_exercise() -> tuple[Exercise, ...]:
    """Every exercise in the book, in chapter order (this imports every chapter's module)."""
    return tuple(exercise for chapter in chapter_modules() for exercise in chapter_exercises(chapter))


def __getattr__(name: str):
    # ``EXERCISES`` reads as the whole registry, as it did when the package loaded it eagerly.
    if name == "EXERCISES":
        return every_exercise()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Every check-yourself exercise in the book, one module per chapter (``ch01.py``, ``ch02.py``, ...).

Each chapter module declares a tuple ``EXERCISES`` with the classes of ``lib.exercises.base``.
This package gathers them, in chapter order, into the one registry the grader reads
(``lib.checks.exercises()``). Adding a chapter's exercises means adding its module; nothing
here needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from lib.exercises.base import Exercise


def _chapter_modules() -> list[str]:
    names = [info.name for info in pkgutil.iter_modules(__path__) if re.fullmatch(r"ch\d\d", info.name)]
    return sorted(names)


def _collect() -> tuple[Exercise, ...]:
    collected: list[Exercise] = []
    seen: set[str] = set()
    for name in _chapter_modules():
        module = importlib.import_module(f"{__name__}.{name}")
        for exercise in module.EXERCISES:
            if exercise.id in seen:
                raise ValueError(f"exercise id {exercise.id!r} is declared twice (again in lib/exercises/{name}.py)")
            seen.add(exercise.id)
            collected.append(exercise)
    return tuple(collected)


EXERCISES: tuple[Exercise, ...] = _collect()

"""Grading a notebook's recorded answers outside its sandbox, with the answer key the sandbox never saw.

A graded notebook's ``check()`` calls record each answer as data (``lib.answer_records``);
this module turns those records into grades:

* **Which answer counts.** An exercise's own cell is the first code cell whose source calls
  ``check("<its id>", ...)``, as a student copy has it. The answer that counts is the last one
  that cell recorded; one recorded by any other cell, or for another chapter's exercise, is
  ignored, and the notebook's line says so (``counted_answers``).
* **Values** are compared with the expected value and the known wrong answers here, by the
  book's tolerance policy (``lib.grading.grade`` on the recorded numbers).
* **Functions** are read and refused as ``check()`` reads them (``lib.code_policy``), then run
  in a fresh sandbox of their own (``lib.hidden_runs``) on the declared hidden cases and on
  ``lib.drawn_cases.DRAWN`` inputs drawn from the exercise's domain with the batch's seed, so
  a table of the declared cases fails and a rerun with the same seed grades alike. The outputs come back as
  arrays and are judged here against the references (``lib.grading.judge_function``).

Nothing here runs the learner's code or unpickles anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from lib.drawn_cases import drawn_cases
from lib.exercises.base import Case, FunctionExercise
from lib.grading import (
    INCORRECT,
    CheckResult,
    compare_case,
    grade,
    judge_function,
    not_a_function,
    refused,
)
from lib.hidden_runs import FunctionRun, run_functions

__all__ = ["CHECK_CALL", "own_cells", "counted_answers", "drawn_cases", "grade_answers", "cases_passed"]

CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")


def own_cells(sources: Sequence[str | None]) -> dict[str, int]:
    """Each exercise id a code cell calls check() for, with the index of the first such cell
    (``sources``: each cell's source, None for a markdown cell)."""
    own: dict[str, int] = {}
    for index, source in enumerate(sources):
        for exercise_id in CHECK_CALL.findall(source or ""):
            own.setdefault(exercise_id, index)
    return own


def counted_answers(
    records: Sequence[dict], own: dict[str, int], cell_of_request: dict[str, int], chapter: str | None
) -> tuple[dict[str, dict], list[str]]:
    """The record that counts for each exercise (the last from its own cell), and a problem
    line for each kind of record that does not count. ``cell_of_request`` maps the id of the
    request that ran a cell to the cell's index; ``chapter`` is the notebook's chapter number
    (as text), when it is a chapter's notebook."""
    counted: dict[str, dict] = {}
    elsewhere: dict[str, list[int]] = {}
    other_chapter: dict[str, list[int]] = {}
    for entry in records:
        cell = cell_of_request.get(entry["request"])
        exercise_id = entry["id"]
        if chapter is not None and exercise_id.split(".")[0] != chapter:
            other_chapter.setdefault(exercise_id, []).append(-1 if cell is None else cell)
        elif cell is not None and own.get(exercise_id) == cell:
            counted[exercise_id] = entry
        else:
            elsewhere.setdefault(exercise_id, []).append(-1 if cell is None else cell)
    problems = []
    for exercise_id, cells in elsewhere.items():
        where = _where(cells)
        own_cell = f"not in its own cell {own[exercise_id] + 1}" if exercise_id in own else "no cell of its own"
        problems.append(f"an answer to {exercise_id} given {where}, {own_cell}: not counted")
    for exercise_id, cells in other_chapter.items():
        problems.append(f"an answer to {exercise_id}, another chapter's exercise, given {_where(cells)}: not counted")
    return counted, problems


def _where(cells: list[int]) -> str:
    numbered = sorted({cell + 1 for cell in cells if cell >= 0})
    places = [f"in cell{'s' if len(numbered) > 1 else ''} {', '.join(map(str, numbered))}"] if numbered else []
    return " and ".join(places + ["outside any cell"] * (-1 in cells))


def _forbids(exercise: FunctionExercise) -> list[str]:
    """Dotted names of what the learner's function may neither be, use nor copy besides what it
    stands for: the exercise's ``forbids`` and its reference, when that lives outside ``lib.exercises``
    (the sandbox has no ``lib.exercises`` to import it from)."""
    names = list(exercise.forbids)
    reference = exercise.reference
    module, qualname = getattr(reference, "__module__", ""), getattr(reference, "__qualname__", "")
    if exercise.stands_for and module and not module.startswith("lib.exercises") and "<" not in qualname:
        names.append(f"{module}.{qualname}")
    return names


def cases_passed(exercise: FunctionExercise, cases: Sequence[Case], outcomes: Sequence) -> int:
    """How many of ``cases`` the learner's function passed (``outcomes`` as for
    ``lib.grading.judge_function``; a case with no outcome, after one that stopped the run, fails)."""
    passed = 0
    for case, (problem, got, typed) in zip(cases, outcomes, strict=False):
        passed += not problem and not compare_case(exercise, exercise.reference(*case.args()), got, typed)[0]
    return passed


def grade_answers(
    exercises: dict,
    answers: dict[str, dict],
    seed: int,
    run: Callable = run_functions,
    passed: dict[str, tuple[int, int]] | None = None,
    **run_options,
) -> dict[str, CheckResult]:
    """Grade each counted answer (``answers``: id -> record) against ``exercises`` (the book's,
    by id). Functions go to ``run`` (``lib.hidden_runs.run_functions``) all at once; ``passed``,
    when given, receives each function's (hidden cases passed, cases), for partial credit."""
    results: dict[str, CheckResult] = {}
    functions: list[tuple[FunctionExercise, tuple[Case, ...]]] = []
    runs: list[FunctionRun] = []
    for exercise_id, entry in answers.items():
        exercise = exercises[exercise_id]
        kind, hint = entry["answer"], exercise.hints[0] if exercise.hints else ""
        if kind == "none":
            results[exercise_id] = grade(exercise, None)
        elif kind == "problem":
            results[exercise_id] = CheckResult(exercise_id, INCORRECT, entry.get("problem", "")[:300], hint=hint)
        elif not isinstance(exercise, FunctionExercise):
            if kind == "numbers":
                results[exercise_id] = grade(exercise, entry["numbers"])
            else:
                results[exercise_id] = CheckResult(exercise_id, INCORRECT, "expected numbers", hint=hint)
        elif kind == "function":
            cases = exercise.cases + drawn_cases(exercise, seed)
            functions.append((exercise, cases))
            runs.append(
                FunctionRun(
                    entry["pickle"], [c.args() for c in cases], _forbids(exercise),
                    list(exercise.stands_for), exercise.timeout_s,
                )
            )  # fmt: skip
        else:
            results[exercise_id] = not_a_function(exercise, entry.get("type", kind))
    if runs:
        for (exercise, cases), found in zip(functions, run(runs, **run_options), strict=True):
            if passed is not None:  # a refused function, or a run that failed, passes none
                passed[exercise.id] = (
                    0 if isinstance(found, tuple) else cases_passed(exercise, cases, found),
                    len(cases),
                )
            if isinstance(found, tuple) and found[0] == "refused":
                results[exercise.id] = refused(exercise, found[1])
            elif isinstance(found, tuple):
                hint = exercise.hints[0] if exercise.hints else ""
                results[exercise.id] = CheckResult(exercise.id, INCORRECT, found[1], hint=hint)
            else:
                results[exercise.id] = judge_function(exercise, cases, found)
    return results

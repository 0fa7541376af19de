"""The check-yourself autograder: ``check("1.equal-scores", answer)`` grades on the spot.

An exercise is declared once (see ``lib/exercises/``, one module per chapter) as plain data:
    * a ``ValueExercise`` has an expected value, a tolerance, and the known wrong answers
      with the feedback each one earns ("that is the best-matching value, not the read");
    * a ``FunctionExercise`` has a reference function and hidden cases; each case says
      what a function that fails it has probably got wrong.
``lib.grading`` holds how an answer is graded (the book's tolerance policy, the hidden cases);
this module finds the exercise and shows the result: the learner's immediate feedback.

In a grading run (``python -m lib.student grade``) ``check`` is no grader: the answer key is
not in the sandbox the notebook runs in. It records the answer as data for the grader
(``lib.answer_records``), which grades it outside (``lib.answer_grading``), and shows "recorded".

``check`` never raises on what a learner types, and never hangs: a placeholder ``...`` reads
"not attempted", text or a list of the wrong length gets a message that says what was expected,
an unknown id gets the closest existing one, and a function that raises (even ``SystemExit``),
returns garbage or loops is caught; reading a value or a function's result runs under the same
time limit as the function, so an ``__array__`` that loops is stopped too. Nor does it pass a
wrong answer: a complex number with an imaginary part, or a function result in a lower precision
than asked (float16 for float32), is marked incorrect and says why.
In a notebook the result shows as a coloured box; in a terminal as plain text.

Only the chapter of the id asked for is loaded (``check("8.patchify", ...)`` imports
``lib/exercises/ch08.py``, and with it the ViT, and nothing else); ``exercises()``, the listing
and the static page's export load them all. Run ``python -m lib.checks --list`` for every
exercise in the book.
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lib import answer_records, grading, variants
from lib.exercises import every_exercise, find
from lib.exercises.base import Case, Exercise, FunctionExercise, ValueExercise, WrongAnswer
from lib.grading import (
    CORRECT,
    INCORRECT,
    NOT_ATTEMPTED,
    RECORDED,
    WHOLE_ATOL,
    CheckResult,
    grade,
    tolerance,
)
from lib.safe_call import GradingTimeout, describe_error
from lib.value_grading import precision_note, truncation_feedback

# The exercise author's API: check, and what lib.grading and lib.exercises.base define for it.
__all__ = ["check", "grade", "exercises", "CheckResult", "CORRECT", "INCORRECT", "NOT_ATTEMPTED"]
__all__ += ["Case", "FunctionExercise", "ValueExercise", "WrongAnswer"]


def exercises() -> dict[str, Exercise]:
    """Every exercise in the book, by id (this loads every chapter's exercises)."""
    return {exercise.id: exercise for exercise in every_exercise()}


def check(exercise_id: str, answer: Any) -> CheckResult:
    """Grade ``answer`` for the exercise ``exercise_id``, show the result, and return it.

    Never raises on what a learner passes (only a KeyboardInterrupt, the learner's own
    stop button, goes through): a wrong id, an answer whose conversion raises, even
    ``SystemExit``, all come back as an "incorrect" result with a message.
    """
    try:
        folder = answer_records.recording_folder()
        result = _check(exercise_id, answer) if folder is None else _record(folder, exercise_id, answer)
    except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # never crash on learner input
        result = CheckResult(_id_text(exercise_id), INCORRECT, f"could not grade this ({describe_error(error)})")
    try:
        _show(result)
    except (Exception, SystemExit):  # a display problem must not hide the result
        print(result)
    return result


def _check(exercise_id: Any, answer: Any) -> CheckResult:
    exercise_id, wrong_type = _id_or_problem(exercise_id)
    if wrong_type is not None:
        return wrong_type
    exercise = find(exercise_id)
    if exercise is None:
        return CheckResult(exercise_id, INCORRECT, _unknown_id_message(exercise_id, list(exercises())))
    name = variants.active_variant() if getattr(exercise, "params", ()) else None
    if name is not None:  # a student copy: their own numbers (lib.variants)
        exercise = variants.exercise_in(exercise, variants.draw(exercise, name))
    try:
        return grade(exercise, answer)
    except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # the learner's objects may raise anything
        return CheckResult(exercise.id, INCORRECT, f"could not grade this answer ({describe_error(error)})")


def _record(folder: Path, exercise_id: Any, answer: Any) -> CheckResult:
    """In a grading run: record the answer for the grader (``lib.answer_records``), grade nothing."""
    exercise_id, wrong_type = _id_or_problem(exercise_id)
    if wrong_type is not None:
        return wrong_type
    kinds = answer_records.exercise_kinds(folder)
    if exercise_id not in kinds:
        return CheckResult(exercise_id, INCORRECT, _unknown_id_message(exercise_id, list(kinds)))
    shell = grading.kernel_shell()
    request = str((getattr(shell, "parent_header", None) or {}).get("header", {}).get("msg_id", ""))
    answer_records.record(folder, exercise_id, answer, kinds[exercise_id], request)
    return CheckResult(exercise_id, RECORDED, "recorded for the grader, which grades it once the notebook has run.")


def _id_or_problem(exercise_id: Any) -> tuple[str, CheckResult | None]:
    """The id as a plain str, or a result that says why it is not one."""
    # Only exact types are trusted here: a str or list subclass may override the very
    # methods (__hash__, __eq__, __len__) that reading it would call.
    if type(exercise_id) is not str:
        if isinstance(exercise_id, str):
            exercise_id = str.__add__("", exercise_id)  # a str subclass: its characters, as a plain str
        else:
            hint = ""
            if type(exercise_id) in (list, tuple) and len(exercise_id) == 1 and type(exercise_id[0]) is str:
                hint = f': write check("{exercise_id[0]}", answer), without the brackets'
            return "", CheckResult(
                _id_text(exercise_id),
                INCORRECT,
                f'the exercise id must be text such as "1.equal-scores", got a {type(exercise_id).__name__}{hint}',
            )
    return exercise_id, None


def _id_text(exercise_id: Any) -> str:
    """The id as text for a result: itself when it is a str, a short repr for plain builtins, else its type."""
    if type(exercise_id) is str:
        return exercise_id
    plain = (int, float, bool, type(None))
    if type(exercise_id) in plain or (
        type(exercise_id) in (list, tuple)
        and len(exercise_id) <= 8
        and all(type(i) in (str, *plain) for i in exercise_id)
    ):
        return repr(exercise_id)[:60]
    return f"<{type(exercise_id).__name__}>"


def _unknown_id_message(exercise_id: str, ids: list[str]) -> str:
    """'there is no exercise called ...', with the closest of ``ids`` when there is one."""
    close = difflib.get_close_matches(exercise_id, ids, n=1, cutoff=0.6)
    if not close:  # also compare ignoring case and spaces: "1.Equal scores"
        folded = {i.lower().replace(" ", "-"): i for i in ids}
        match = difflib.get_close_matches(exercise_id.lower().strip().replace(" ", "-"), list(folded), n=1, cutoff=0.6)
        close = [folded[m] for m in match]
    message = f"there is no exercise called {exercise_id!r}"
    if close:
        return f"{message}; did you mean {close[0]!r}?"
    chapter = exercise_id.split(".")[0]
    in_chapter = [i for i in ids if i.split(".")[0] == chapter]
    if in_chapter:
        return f"{message}; chapter {chapter} has {', '.join(in_chapter)}"
    return f"{message} (python -m lib.checks --list shows them all)"


# --- showing and listing ----------------------------------------------------------------


def _show(result: CheckResult) -> None:
    """Show the result: a coloured box in a notebook, text elsewhere."""
    if grading.kernel_shell() is not None:
        from IPython.display import display

        display(result.mime_bundle(), raw=True)
        result.mark_shown(grading.current_cell())
    else:
        print(result)


def placeholder(exercise: ValueExercise) -> str:
    """What the static page's answer box shows before anything is typed: the shape of the
    expected answer (how many numbers, whole or to how many decimals), never its value."""
    shape = np.shape(np.asarray(exercise.expected, dtype=np.float64))
    size = int(np.prod(shape))
    if exercise.whole:
        kind, samples = "whole number", ["12", "7", "30", "5"]
    elif exercise.decimals is not None:
        places = f"{exercise.decimals} decimal" + ("" if exercise.decimals == 1 else "s")
        kind, samples = f"number to {places}", [f"{x:.{exercise.decimals}f}" for x in (0.1234, 5.6789, 0.4321, 8.765)]
    else:
        kind, samples = "number", ["0.5", "1.5", "2.5", "3.5"]
    if size == 1:
        return f"one {kind}, e.g. {samples[0]}"
    count = f"{size} {kind}s" if kind.endswith("number") else f"{size} {kind.replace('number', 'numbers', 1)}"
    if len(shape) > 1:
        return f"{count}, row after row ({shape[0]} rows of {int(np.prod(shape[1:]))})"
    if size <= 4:
        return f"{count}, e.g. {', '.join((samples * 2)[:size])}"
    return f"{count}, separated by spaces or commas"


def static_page_data() -> list[dict]:
    """The value exercises as JSON-ready data, for grading in the static book without a kernel
    (book/_static/check-yourself.js), with the grader's own tolerance (``tolerance``) so that the
    page and the kernel grade alike. Function exercises need Python and are left out."""
    data = []
    for exercise in exercises().values():
        if not isinstance(exercise, ValueExercise):
            continue
        rule = tolerance(exercise)
        data.append(
            {
                "id": exercise.id,
                "question": exercise.question,
                "expected": np.asarray(exercise.expected, dtype=np.float64).tolist(),
                "atol": rule.atol,
                "rtol": rule.rtol,
                "whole": rule.whole,
                "whole_atol": WHOLE_ATOL,
                "decimals": rule.decimals,
                "rule": rule.rule,
                "truncated_rule": "" if rule.decimals is None else truncation_feedback(rule.decimals),
                "coarse_note": "" if rule.decimals is None else precision_note(rule.decimals),
                "placeholder": placeholder(exercise),
                "hints": list(exercise.hints),
                "explanation": exercise.explanation,
                "wrong_answers": [
                    {"value": np.asarray(w.value, dtype=np.float64).tolist(), "feedback": w.feedback}
                    for w in exercise.wrong_answers
                ],
            }
        )
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.checks", description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list every exercise with its question")
    parser.add_argument("--export-js", metavar="PATH", help="write the value exercises for the static book")
    args = parser.parse_args(argv)
    if args.export_js:
        payload = json.dumps(static_page_data(), ensure_ascii=False, indent=1)
        Path(args.export_js).write_text(
            f"// Written by `python -m lib.checks --export-js`.\nwindow.BOOK_EXERCISES = {payload};\n"
        )
        return 0
    if args.list:
        for exercise in exercises().values():
            kind = "function" if isinstance(exercise, FunctionExercise) else "value"
            print(f"{exercise.id:28} {kind:8} {exercise.question}")
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

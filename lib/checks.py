"""The check-yourself autograder: ``check("1.equal-scores", answer)`` grades on the spot.

An exercise is declared once (see ``lib/exercises/``, one module per chapter) as plain data:
    * a ``ValueExercise`` has an expected value, a tolerance, and the known wrong answers
      with the feedback each one earns ("that is the best-matching value, not the read");
    * a ``FunctionExercise`` has a reference function and hidden cases; each case says
      what a function that fails it has probably got wrong.

``check`` never raises on what a learner types: a placeholder ``...`` reads "not attempted",
text or a list of the wrong length gets a message that says what was expected, an unknown
id gets the closest existing one, and a function that raises (even ``SystemExit``), returns
garbage or loops is caught (loops by a timeout). Nor does it pass a wrong answer: a complex
number with an imaginary part, or a function result in a lower precision than asked
(float16 for float32), is marked incorrect and says why.
In a notebook the result shows as a coloured box; in a terminal as plain text.

Run ``python -m lib.checks --list`` for every exercise in the book.
"""

from __future__ import annotations

import argparse
import difflib
import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.exercises import EXERCISES
from lib.exercises.base import Case, Exercise, FunctionExercise, ValueExercise, WrongAnswer
from lib.safe_call import GradingTimeout, as_numbers, call_with_timeout, describe_error, exit_raises

__all__ = ["check", "grade", "exercises", "CheckResult", "Case", "FunctionExercise", "ValueExercise", "WrongAnswer"]

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not attempted"
RESULT_KEY = "lib.checks"  # display metadata under which a notebook records each result (lib.student grades it)


@dataclass
class CheckResult:
    exercise_id: str
    status: str  # CORRECT, INCORRECT or NOT_ATTEMPTED
    message: str  # one line: what happened
    feedback: str = ""  # the targeted part: which mistake this looks like
    hint: str = ""
    explanation: str = ""  # shown once the answer is right
    # The notebook cell (IPython execution count) in which check() already showed this
    # result: IPython's echo of the cell's last expression is skipped there, and only there.
    _shown_in_cell: int | None = field(default=None, repr=False, compare=False)

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __str__(self) -> str:
        mark = {CORRECT: "✓", INCORRECT: "✗", NOT_ATTEMPTED: "·"}[self.status]
        lines = [f"[{self.exercise_id}] {mark} {self.status}: {self.message}"]
        lines += [f"  {label}: {text}" for label, text in self._parts()]
        return "\n".join(lines)

    def _parts(self) -> list[tuple[str, str]]:
        parts = [("Feedback", self.feedback), ("Hint", self.hint), ("Why", self.explanation)]
        return [(label, text) for label, text in parts if text]

    def _repr_html_(self) -> str:
        colour = {CORRECT: "#1a7f37", INCORRECT: "#cf222e", NOT_ATTEMPTED: "#6e7781"}[self.status]
        body = "".join(f"<div><b>{label}:</b> {html.escape(text)}</div>" for label, text in self._parts())
        return (
            f'<div class="check-result" style="border-left:4px solid {colour};padding:4px 10px;margin:4px 0">'
            f'<b style="color:{colour}">{html.escape(self.exercise_id)}: {self.status}</b> '
            f"{html.escape(self.message)}{body}</div>"
        )

    def _mime_bundle(self) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": str(self)}

    def _ipython_display_(self) -> None:
        # check() has shown this result already in the running cell: skip IPython's echo of
        # the return value there. In any later cell (`r = check(...)`, then `r`) it shows.
        if self._shown_in_cell is not None and self._shown_in_cell == _current_cell():
            return
        from IPython.display import display

        display(self._mime_bundle(), raw=True)


def exercises() -> dict[str, Exercise]:
    """Every exercise in the book, by id."""
    return {exercise.id: exercise for exercise in EXERCISES}


def check(exercise_id: str, answer: Any) -> CheckResult:
    """Grade ``answer`` for the exercise ``exercise_id``, show the result, and return it.

    Never raises on what a learner passes (only a KeyboardInterrupt, the learner's own
    stop button, goes through): a wrong id, an answer whose conversion raises, even
    ``SystemExit``, all come back as an "incorrect" result with a message.
    """
    try:
        result = _check(exercise_id, answer)
    except (Exception, SystemExit, GeneratorExit) as error:  # noqa: BLE001 - never crash on learner input
        result = CheckResult(_id_text(exercise_id), INCORRECT, f"could not grade this ({describe_error(error)})")
    try:
        _show(result)
    except (Exception, SystemExit):  # noqa: BLE001 - a display problem must not hide the result
        print(result)
    return result


def _check(exercise_id: Any, answer: Any) -> CheckResult:
    if not isinstance(exercise_id, str):
        hint = ""
        if isinstance(exercise_id, (list, tuple)) and len(exercise_id) == 1 and isinstance(exercise_id[0], str):
            hint = f': write check("{exercise_id[0]}", answer), without the brackets'
        return CheckResult(
            _id_text(exercise_id),
            INCORRECT,
            f'the exercise id must be text such as "1.equal-scores", got a {type(exercise_id).__name__}{hint}',
        )
    exercise = exercises().get(exercise_id)
    if exercise is None:
        return CheckResult(exercise_id, INCORRECT, _unknown_id_message(exercise_id))
    try:
        return grade(exercise, answer)
    except (Exception, SystemExit, GeneratorExit) as error:  # noqa: BLE001 - the learner's objects may raise anything
        return CheckResult(exercise.id, INCORRECT, f"could not grade this answer ({describe_error(error)})")


def _id_text(exercise_id: Any) -> str:
    try:
        return exercise_id if isinstance(exercise_id, str) else repr(exercise_id)[:60]
    except (Exception, SystemExit):  # noqa: BLE001 - even its repr may raise
        return "?"


def _unknown_id_message(exercise_id: str) -> str:
    """'there is no exercise called ...', with the closest existing id when there is one."""
    ids = list(exercises())
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


def grade(exercise: Exercise, answer: Any) -> CheckResult:
    if answer is ... or answer is None:
        return CheckResult(exercise.id, NOT_ATTEMPTED, "replace the `...` with your answer and run the cell again")
    if isinstance(exercise, FunctionExercise):
        return _grade_function(exercise, answer)
    return _grade_value(exercise, answer)


# --- values ---------------------------------------------------------------------------


def _grade_value(exercise: ValueExercise, answer: Any) -> CheckResult:
    expected = np.asarray(exercise.expected, dtype=np.float64)
    numbers, problem = as_numbers(answer, expected.shape)
    hint = exercise.hints[0] if exercise.hints else ""
    if numbers is None:
        return CheckResult(exercise.id, INCORRECT, problem, hint=hint)

    def close(value: Any) -> bool:
        return bool(np.allclose(numbers, np.asarray(value, dtype=np.float64), atol=exercise.atol, rtol=exercise.rtol))

    shown = np.array2string(numbers, precision=4, suppress_small=True, separator=", ")
    if close(exercise.expected):
        return CheckResult(exercise.id, CORRECT, f"{shown} is right.", explanation=exercise.explanation)
    for wrong in exercise.wrong_answers:
        if close(wrong.value):
            return CheckResult(exercise.id, INCORRECT, f"{shown} is not it.", feedback=wrong.feedback, hint=hint)
    return CheckResult(exercise.id, INCORRECT, f"{shown} is not it.", hint=hint)


# --- functions ------------------------------------------------------------------------


def _grade_function(exercise: FunctionExercise, answer: Any) -> CheckResult:
    hint = exercise.hints[0] if exercise.hints else ""
    if not callable(answer):
        return CheckResult(
            exercise.id, INCORRECT, f"expected a function, but the answer is of type {type(answer).__name__}", hint=hint
        )
    failed: list[tuple[Case, str, torch.Tensor | None]] = []
    for case in exercise.cases:
        problem, got = _run_case(exercise, answer, case)
        if problem:
            failed.append((case, problem, got))
        if problem.startswith("did not finish"):
            break  # one timeout is enough: don't make the learner wait for every case
    if not failed:
        n = len(exercise.cases)
        return CheckResult(exercise.id, CORRECT, f"passes all {n} hidden cases.", explanation=exercise.explanation)
    case, problem, got = failed[0]
    names = ", ".join(case.name for case, _, _ in failed)
    message = f"fails {len(failed)} of {len(exercise.cases)} hidden cases ({names}). First: {case.name}: {problem}."
    if problem.startswith("did not finish"):
        feedback = "Look for a loop whose condition never changes, or work that grows without bound."
    elif problem.startswith(WRONG_DTYPE):
        feedback = (
            "Wrong dtype/precision: the result must keep the input's floating-point dtype. float16 keeps "
            "about 3 significant digits and its exp overflows past 11; bfloat16 keeps about 2. Compute "
            "in the input's dtype, or convert back before returning."
        )
    else:
        feedback = _known_mistake(exercise, case, got) or case.feedback
    return CheckResult(exercise.id, INCORRECT, message, feedback=feedback, hint=hint)


def _known_mistake(exercise: FunctionExercise, case: Case, got: torch.Tensor | None) -> str:
    """The feedback of the first known wrong function that gives what the learner's gave."""
    if got is None:
        return ""
    for wrong in exercise.wrong_answers:
        try:
            theirs = torch.as_tensor(wrong.value(*case.args())).to(got.dtype)
        except Exception:  # noqa: BLE001 - a wrong function may well fail on this case
            continue
        if theirs.shape == got.shape and torch.allclose(
            theirs, got, atol=exercise.atol, rtol=exercise.rtol, equal_nan=True
        ):
            return wrong.feedback
    return ""


WRONG_DTYPE = "returned dtype"


def _less_precise(got: torch.dtype, expected: torch.dtype) -> bool:
    """True when a float result of dtype ``got`` is less precise than the reference's
    (float16 or bfloat16 for float32). A more precise float (float64 for float32) is fine;
    integers are compared by value."""
    if not (got.is_floating_point and expected.is_floating_point):
        return False
    return torch.finfo(got).eps > torch.finfo(expected).eps


def _run_case(exercise: FunctionExercise, function: Callable, case: Case) -> tuple[str, torch.Tensor | None]:
    """('', output) when ``function`` agrees with the reference on this case, else what went
    wrong and the output, when there was one that reads as a tensor of the right shape."""
    expected = exercise.reference(*case.args())
    try:
        with exit_raises():
            got = call_with_timeout(function, case.args(), exercise.timeout_s)
    except GradingTimeout:
        return f"did not finish within {exercise.timeout_s:g} s (an endless loop?)", None
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the learner's code may raise anything, even exit()
        return f"raised {describe_error(error)}", None
    if got is None:
        return "returned None (a missing `return`?)", None
    typed = isinstance(got, (torch.Tensor, np.ndarray))  # the learner chose its dtype (a list's is ours)
    try:
        got = torch.as_tensor(got).detach().cpu()
    except (Exception, SystemExit, GeneratorExit) as error:  # noqa: BLE001 - a learner's object may raise anything
        return f"returned a {type(got).__name__} that is not a tensor of numbers ({describe_error(error)})", None
    if got.is_complex() and not expected.is_complex():
        return f"returned complex numbers ({got.dtype}) where real ones were expected", None
    if got.shape != expected.shape:
        return f"returned shape {tuple(got.shape)}, expected {tuple(expected.shape)}", None
    if typed and _less_precise(got.dtype, expected.dtype):
        got_name, expected_name = (str(dtype).removeprefix("torch.") for dtype in (got.dtype, expected.dtype))
        return f"{WRONG_DTYPE} {got_name}, expected {expected_name}", None
    if not expected.dtype.is_floating_point:
        # A mask or integer reference: every entry must match exactly. Compare as float64, so a
        # learner's 1.9 is not truncated to 1 (or True) and passed.
        got = got.to(torch.float64)
        wrong = int((got != expected.to(torch.float64)).sum())
        return (f"differs from the reference in {wrong} of {expected.numel()} entries", got) if wrong else ("", got)
    got = got.to(expected.dtype)
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        return "returned NaN", got
    if not torch.allclose(got, expected, atol=exercise.atol, rtol=exercise.rtol):
        gap = (got - expected).abs().max().item()
        return f"differs from the reference by up to {gap:.3g}", got
    return "", got


# --- showing and listing ----------------------------------------------------------------


def _kernel_shell():
    """The IPython shell when running in a notebook kernel, else None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def _current_cell() -> int | None:
    shell = _kernel_shell()
    return None if shell is None else getattr(shell, "execution_count", None)


def _show(result: CheckResult) -> None:
    """Show the result; in a kernel, with the record lib.student grades under RESULT_KEY:
    which exercise, its status, the cell (its execution count, and the id of the request
    that ran it), which known wrong answer fired and what the learner was told, signed with
    the grader's key for this run (see ``record_signature``)."""
    shell = _kernel_shell()
    if shell is not None:
        from IPython.display import display

        cell = _current_cell()
        parent = getattr(shell, "parent_header", None) or {}
        record = {
            "id": result.exercise_id,
            "status": result.status,
            "cell": cell,
            "request": str(parent.get("header", {}).get("msg_id", "")),
            "mistake": getattr(result, "mistake", ""),
            "message": result.message,
            "feedback": result.feedback,
            "hint": result.hint,
        }
        if _RUN_KEY:
            record["sig"] = record_signature(record, _RUN_KEY)
        display(result._mime_bundle(), raw=True, metadata={RESULT_KEY: record})
        result._shown_in_cell = cell
    else:
        print(result)


RUN_KEY_ENV = "LIB_CHECKS_RUN_KEY"  # lib.student grade hands each kernel a fresh key through this variable


def _take_run_key() -> bytes:
    """The grader's key for this run, read once, at import, and removed from the environment
    (so that the learner's code and the processes it starts do not find it there). Empty
    outside grading: the records are then unsigned, and a grader counts none of them."""
    import os

    return os.environ.pop(RUN_KEY_ENV, "").encode()


_RUN_KEY = _take_run_key()


def record_signature(record: dict, key: bytes) -> str:
    """HMAC-SHA256 of every field of a result record but "sig", under ``key``: the grader,
    which made the key, recomputes it to know a record came from check() in its run."""
    import hashlib
    import hmac

    fields = {name: value for name, value in record.items() if name != "sig"}
    text = json.dumps(fields, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def static_page_data() -> list[dict]:
    """The value exercises as JSON-ready data, for grading in the static book without a kernel
    (book/_static/check-yourself.js). Function exercises need Python and are left out."""
    return [
        {
            "id": exercise.id,
            "question": exercise.question,
            "expected": np.asarray(exercise.expected, dtype=np.float64).tolist(),
            "atol": exercise.atol,
            "rtol": exercise.rtol,
            "hints": list(exercise.hints),
            "explanation": exercise.explanation,
            "wrong_answers": [
                {"value": np.asarray(w.value, dtype=np.float64).tolist(), "feedback": w.feedback}
                for w in exercise.wrong_answers
            ],
        }
        for exercise in exercises().values()
        if isinstance(exercise, ValueExercise)
    ]


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

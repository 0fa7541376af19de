"""The check-yourself autograder: ``check("1.equal-scores", answer)`` grades on the spot.

An exercise is declared once (see ``lib/exercises/``, one module per chapter) as plain data:
    * a ``ValueExercise`` has an expected value, a tolerance, and the known wrong answers
      with the feedback each one earns ("that is the best-matching value, not the read");
    * a ``FunctionExercise`` has a reference function and hidden cases; each case says
      what a function that fails it has probably got wrong.

One tolerance policy for the book (DESIGN.md):
    * a count, index or choice is declared ``whole``: only a whole number passes, and an answer
      with a fraction gets "a count is a whole number";
    * a decimal answer declares ``decimals``, which its question states ("Give it to 2 decimal
      places."): any answer within half a unit of that last place passes (so the answer rounded
      to that precision does), and one that is close but coarser gets a word about precision;
    * a function exercise declares the library functions it ``stands_for`` (the ones the learner
      is asked to write): handing one in, or calling one while the hidden cases run, is refused
      with "your function calls the library's softmax: write it yourself".

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
import functools
import html
import importlib
import json
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lib.exercises import every_exercise, find
from lib.exercises.base import Case, Exercise, FunctionExercise, ValueExercise, WrongAnswer
from lib.safe_call import (
    ForbiddenCall,
    GradingTimeout,
    as_numbers,
    call_with_timeout,
    describe_error,
    exit_raises,
    forbid_calls,
)

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
    # The feedback of the known mistake that fired (a declared wrong answer, a failing hidden
    # case, a rule of the tolerance policy), "" otherwise: what a class summary counts.
    mistake: str = ""
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
    """Every exercise in the book, by id (this loads every chapter's exercises)."""
    return {exercise.id: exercise for exercise in every_exercise()}


def check(exercise_id: str, answer: Any) -> CheckResult:
    """Grade ``answer`` for the exercise ``exercise_id``, show the result, and return it.

    Never raises on what a learner passes (only a KeyboardInterrupt, the learner's own
    stop button, goes through): a wrong id, an answer whose conversion raises, even
    ``SystemExit``, all come back as an "incorrect" result with a message.
    """
    try:
        result = _check(exercise_id, answer)
    except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # never crash on learner input
        result = CheckResult(_id_text(exercise_id), INCORRECT, f"could not grade this ({describe_error(error)})")
    try:
        _show(result)
    except (Exception, SystemExit):  # a display problem must not hide the result
        print(result)
    return result


def _check(exercise_id: Any, answer: Any) -> CheckResult:
    # Only exact types are trusted here: a str or list subclass may override the very
    # methods (__hash__, __eq__, __len__) that reading it would call.
    if type(exercise_id) is not str:
        if isinstance(exercise_id, str):
            exercise_id = str.__add__("", exercise_id)  # a str subclass: its characters, as a plain str
        else:
            hint = ""
            if type(exercise_id) in (list, tuple) and len(exercise_id) == 1 and type(exercise_id[0]) is str:
                hint = f': write check("{exercise_id[0]}", answer), without the brackets'
            return CheckResult(
                _id_text(exercise_id),
                INCORRECT,
                f'the exercise id must be text such as "1.equal-scores", got a {type(exercise_id).__name__}{hint}',
            )
    exercise = find(exercise_id)
    if exercise is None:
        return CheckResult(exercise_id, INCORRECT, _unknown_id_message(exercise_id))
    try:
        return grade(exercise, answer)
    except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # the learner's objects may raise anything
        return CheckResult(exercise.id, INCORRECT, f"could not grade this answer ({describe_error(error)})")


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
    try:  # reading a value runs the learner's code too (__array__, __len__, __float__): time it
        return call_with_timeout(_grade_value, (exercise, answer), VALUE_TIMEOUT_S)
    except GradingTimeout:
        return CheckResult(
            exercise.id,
            INCORRECT,
            f"could not read the answer as numbers within {VALUE_TIMEOUT_S:g} s (does its __array__ or __len__ loop?)",
        )


# --- values ---------------------------------------------------------------------------

VALUE_TIMEOUT_S = 2.0
WHOLE_FEEDBACK = "This answer counts, indexes or chooses, and a count is a whole number: no fractions."
WHOLE_ATOL = 1e-6  # a whole answer computed in floats (384 / 16 * 24) may carry rounding noise


def precision_feedback(decimals: int) -> str:
    places = f"{decimals} decimal place" + ("" if decimals == 1 else "s")
    return f"Close, but not to the {places} the question asks for: keep more digits while you work, then round."


@dataclass(frozen=True)
class Tolerance:
    """How a value exercise compares answers (the policy in the module docstring): ``atol`` and
    ``rtol`` decide a match with the expected or a known wrong answer; ``whole`` asks for whole
    numbers; a miss within ``near_atol`` given with fewer than ``decimals`` places earns ``rule``
    (a word about precision)."""

    atol: float
    rtol: float
    whole: bool = False
    decimals: int | None = None
    near_atol: float | None = None
    rule: str = ""


def _coarser(numbers: np.ndarray, decimals: int | None) -> bool:
    """True when every number has fewer decimals than ``decimals`` (7.6 when 2 are asked for)."""
    if decimals is None:
        return False
    return bool(np.all(np.abs(numbers - np.round(numbers, decimals - 1)) <= 1e-9))


def tolerance(exercise: ValueExercise) -> Tolerance:
    if exercise.whole:
        return Tolerance(WHOLE_ATOL, 0.0, whole=True, rule=WHOLE_FEEDBACK)
    if exercise.decimals is not None:
        atol = 0.5 * 10.0**-exercise.decimals * (1 + 1e-6)  # half a unit in the last place asked for
        return Tolerance(
            atol, 0.0, decimals=exercise.decimals, near_atol=10 * atol, rule=precision_feedback(exercise.decimals)
        )
    return Tolerance(exercise.atol, exercise.rtol)  # an exercise outside the book's policy (tests, ad hoc)


def _grade_value(exercise: ValueExercise, answer: Any) -> CheckResult:
    expected = np.asarray(exercise.expected, dtype=np.float64)
    numbers, problem = as_numbers(answer, expected.shape)
    hint = exercise.hints[0] if exercise.hints else ""
    if numbers is None:
        return CheckResult(exercise.id, INCORRECT, problem, hint=hint)
    rule = tolerance(exercise)

    def close(value: Any, atol: float = rule.atol) -> bool:
        return bool(np.allclose(numbers, np.asarray(value, dtype=np.float64), atol=atol, rtol=rule.rtol))

    shown = np.array2string(numbers, precision=4, suppress_small=True, separator=", ")
    if close(exercise.expected):
        return CheckResult(exercise.id, CORRECT, f"{shown} is right.", explanation=exercise.explanation)

    def wrong(feedback: str = "") -> CheckResult:
        return CheckResult(
            exercise.id, INCORRECT, f"{shown} is not it.", feedback=feedback, hint=hint, mistake=feedback
        )

    for known in exercise.wrong_answers:
        if close(known.value):
            return wrong(known.feedback)
    if rule.whole and not np.all(np.abs(numbers - np.round(numbers)) <= WHOLE_ATOL):
        return wrong(rule.rule)
    if rule.near_atol is not None and close(exercise.expected, rule.near_atol) and _coarser(numbers, rule.decimals):
        return wrong(rule.rule)
    return wrong()


# --- functions ------------------------------------------------------------------------


LIBRARY_FEEDBACK = "your function calls the library's {name}: write it yourself"
CALLS_LIBRARY = "calls the library's"


@functools.cache
def _resolve(dotted: str) -> tuple[Any, Any, str]:
    """(the object, the module or class that defines it, its attribute there) for a dotted name
    such as "lib.attention.softmax" or "lib.attention.MultiHeadAttention.merge_heads"."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:-1]:
            owner = getattr(owner, attribute)
        return getattr(owner, parts[-1]), owner, parts[-1]
    raise ImportError(f"stands_for names {dotted!r}, which is not an importable module's attribute")


def _forbidden(exercise: FunctionExercise) -> list[tuple[Any, str]]:
    """The (object, short name) pairs a learner's function may neither be nor call: the library
    functions the exercise stands for, and its reference (which may be a wrapper of them)."""
    pairs = [(_resolve(dotted)[0], dotted.split(".")[-1]) for dotted in exercise.stands_for]
    if pairs:
        pairs.append((exercise.reference, pairs[0][1]))
    return pairs


def _handed_in(answer: Any, forbidden: list[tuple[Any, str]]) -> str | None:
    """The short name when ``answer`` is one of the forbidden functions itself (or a bound
    method or partial of one), else None."""
    inner = answer
    if type(inner) is types.MethodType:
        inner = inner.__func__
    elif type(inner) is functools.partial:
        inner = inner.func
    for obj, name in forbidden:
        if answer is obj or inner is obj:
            return name
    return None


def _grade_function(exercise: FunctionExercise, answer: Any) -> CheckResult:
    hint = exercise.hints[0] if exercise.hints else ""
    if not callable(answer):
        return CheckResult(
            exercise.id, INCORRECT, f"expected a function, but the answer is of type {type(answer).__name__}", hint=hint
        )
    forbidden = _forbidden(exercise)
    own = _handed_in(answer, forbidden)
    if own is not None:
        feedback = LIBRARY_FEEDBACK.format(name=own)
        return CheckResult(
            exercise.id,
            INCORRECT,
            f"that is the library's own {own}, not a function of yours.",
            feedback=feedback,
            hint=hint,
            mistake=feedback,
        )
    failed: list[tuple[Case, str, torch.Tensor | None]] = []
    for case in exercise.cases:
        problem, got = _run_case(exercise, answer, case, forbidden)
        if problem:
            failed.append((case, problem, got))
        if problem.startswith(("did not finish", CALLS_LIBRARY)):
            break  # one timeout (or one call into the library) is enough: don't run every case
    if not failed:
        n = len(exercise.cases)
        return CheckResult(exercise.id, CORRECT, f"passes all {n} hidden cases.", explanation=exercise.explanation)
    case, problem, got = failed[0]
    if problem.startswith(CALLS_LIBRARY):
        feedback = LIBRARY_FEEDBACK.format(name=problem.removeprefix(CALLS_LIBRARY).strip())
        message = f"not graded: while the hidden case {case.name!r} ran, your function {problem}."
        return CheckResult(exercise.id, INCORRECT, message, feedback=feedback, hint=hint, mistake=feedback)
    names = ", ".join(case.name for case, _, _ in failed)
    message = f"fails {len(failed)} of {len(exercise.cases)} hidden cases ({names}). First: {case.name}: {problem}."
    if problem.startswith("did not finish"):
        feedback = "Look for a loop whose condition never changes, or work that grows without bound."
    elif problem.startswith(WRONG_DTYPE):
        feedback = exercise.dtype_feedback or (
            "Wrong dtype/precision: the result must keep the input's floating-point dtype. float16 keeps "
            "about 3 significant digits and its exp overflows past 11; bfloat16 keeps about 2. Compute "
            "in the input's dtype, or convert back before returning."
        )
    else:
        feedback = _known_mistake(exercise, case, got)
        if not feedback and problem.startswith(ROUNDED):
            feedback = (
                "The inputs hold fractions, and so must the result: .long(), .int() or uint8 throws them "
                "away. Keep the input's floating-point dtype."
            )
        feedback = feedback or case.feedback
    return CheckResult(exercise.id, INCORRECT, message, feedback=feedback, hint=hint, mistake=feedback)


def _known_mistake(exercise: FunctionExercise, case: Case, got: torch.Tensor | None) -> str:
    """The feedback of the first known wrong function that gives what the learner's gave."""
    if got is None:
        return ""
    for wrong in exercise.wrong_answers:
        try:
            theirs = torch.as_tensor(wrong.value(*case.args())).to(got.dtype)
        except Exception:  # a wrong function may well fail on this case
            continue
        if theirs.shape == got.shape and torch.allclose(
            theirs, got, atol=exercise.atol, rtol=exercise.rtol, equal_nan=True
        ):
            return wrong.feedback
    return ""


WRONG_DTYPE = "returned dtype"
ROUNDED = "returned whole numbers"


def _less_precise(got: torch.dtype, expected: torch.dtype) -> bool:
    """True when a float result of dtype ``got`` is less precise than the reference's
    (float16 or bfloat16 for float32). A more precise float (float64 for float32) is fine;
    integers are compared by value."""
    if not (got.is_floating_point and expected.is_floating_point):
        return False
    return torch.finfo(got).eps > torch.finfo(expected).eps


def _call_and_read(function: Callable, args: tuple) -> tuple[str, Any, bool]:
    """Run the learner's function and read its result as a CPU tensor, all of it learner code
    (the call, then the result's __array__ or __len__): ('', tensor, typed) or (problem, None, False).
    ``typed`` says the learner chose the result's dtype (a tensor or array; a list's is ours)."""
    try:
        got = function(*args)
    except (Exception, SystemExit, GeneratorExit) as error:  # the learner's code may raise anything, even exit()
        return f"raised {describe_error(error)}", None, False
    if got is None:
        return "returned None (a missing `return`?)", None, False
    typed = isinstance(got, (torch.Tensor, np.ndarray))
    try:
        return "", torch.as_tensor(got).detach().cpu(), typed
    except (Exception, SystemExit, GeneratorExit) as error:  # a learner's object may raise anything
        return f"returned a {type(got).__name__} that is not a tensor of numbers ({describe_error(error)})", None, False


def _run_case(
    exercise: FunctionExercise, function: Callable, case: Case, forbidden: Sequence[tuple[Any, str]] = ()
) -> tuple[str, torch.Tensor | None]:
    """('', output) when ``function`` agrees with the reference on this case, else what went
    wrong and the output, when there was one that reads as a tensor of the right shape."""
    expected = exercise.reference(*case.args())
    args = case.args()
    homes = [_resolve(dotted)[1:] for dotted in exercise.stands_for]
    try:
        with exit_raises(), forbid_calls(function, forbidden, homes) as fired:
            try:
                problem, got, typed = call_with_timeout(_call_and_read, (function, args), exercise.timeout_s)
            except ForbiddenCall:
                pass
    except GradingTimeout:
        return f"did not finish within {exercise.timeout_s:g} s (an endless loop?)", None
    if fired:  # even when the learner's own `except BaseException` swallowed the refusal
        return f"{CALLS_LIBRARY} {fired[0]}", None
    if problem:
        return problem, None
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
    integers = not (got.dtype.is_floating_point or got.is_complex())
    got = got.to(expected.dtype)
    if torch.isnan(got).any() and not torch.isnan(expected).any():
        return "returned NaN", got
    if not torch.allclose(got, expected, atol=exercise.atol, rtol=exercise.rtol):
        gap = (got - expected).abs().max().item()
        if typed and integers and bool((expected != expected.round()).any()):
            return f"{ROUNDED} where the reference keeps fractions (off by up to {gap:.3g})", got
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
                "near_atol": rule.near_atol,
                "rule": rule.rule,
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

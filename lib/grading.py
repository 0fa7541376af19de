"""How one answer is graded: the book's tolerance policy for values, hidden cases for functions.

``lib.checks.check`` finds the exercise (declared as data in ``lib/exercises/``) and shows the
result; ``grade`` here decides it.

One tolerance policy for the book (DESIGN.md):
    * a count, index or choice is declared ``whole``: only a whole number passes, and an answer
      with a fraction gets "a count is a whole number";
    * a decimal answer declares ``decimals``, which its question states ("Give it to 2 decimal
      places."): any answer within half a unit of that last place passes (so the answer rounded
      to that precision does); a wrong answer is read at the precision it was given in, so a
      known mistake rounded more coarsely is still named (``lib.value_grading``);
    * a function exercise is judged by what the function is (``lib.code_policy``): one that is,
      uses or copies what does the exercise's work is refused, naming what was found; the rest
      run on the declared hidden cases and a few drawn afresh (``lib.drawn_cases``).

Everything a learner's object does while it is read (``__array__``, ``__len__``, the function
itself) runs under a time limit, with ``exit()`` turned into an exception (``lib.safe_call``).
In a grading run (``lib.answer_grading``) the two halves of a function exercise run apart:
``run_learner_case`` runs the learner's function in a sandbox of its own (``lib.hidden_runs``),
and ``judge_function`` compares what came back with the references, here.
A result is a ``CheckResult``: one line of what happened, the targeted feedback, a hint, and
the explanation once it is right; it shows as a coloured box in a notebook, as text elsewhere.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lib.code_policy import USES_FEEDBACK, exercise_policy, read_before_running
from lib.drawn_cases import drawn_cases
from lib.exercises.base import Case, Exercise, FunctionExercise, ValueExercise
from lib.safe_call import (
    ForbiddenCall,
    GradingTimeout,
    as_numbers,
    call_with_timeout,
    describe_error,
    exit_raises,
    forbid_calls,
)
from lib.value_grading import WHOLE_ATOL, WHOLE_FEEDBACK, Tolerance, judge_value, precision_feedback, tolerance

__all__ = ["grade", "tolerance", "Tolerance", "CheckResult", "CORRECT", "INCORRECT", "NOT_ATTEMPTED", "RECORDED"]
__all__ += ["run_learner_case", "compare_case", "judge_function", "Outcome", "refused"]

CORRECT, INCORRECT, NOT_ATTEMPTED = "correct", "incorrect", "not attempted"
RECORDED = "recorded"  # in a grading run: check() records the answer, and the grader grades it outside


@dataclass
class CheckResult:
    exercise_id: str
    status: str  # CORRECT, INCORRECT, NOT_ATTEMPTED (or RECORDED, in a grading run)
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
        mark = {CORRECT: "✓", INCORRECT: "✗", NOT_ATTEMPTED: "·", RECORDED: "→"}[self.status]
        lines = [f"[{self.exercise_id}] {mark} {self.status}: {self.message}"]
        lines += [f"  {label}: {text}" for label, text in self._parts()]
        return "\n".join(lines)

    def _parts(self) -> list[tuple[str, str]]:
        parts = [("Feedback", self.feedback), ("Hint", self.hint), ("Why", self.explanation)]
        return [(label, text) for label, text in parts if text]

    def _repr_html_(self) -> str:
        colour = {CORRECT: "#1a7f37", INCORRECT: "#cf222e", NOT_ATTEMPTED: "#6e7781", RECORDED: "#0969da"}[self.status]
        body = "".join(f"<div><b>{label}:</b> {html.escape(text)}</div>" for label, text in self._parts())
        return (
            f'<div class="check-result" style="border-left:4px solid {colour};padding:4px 10px;margin:4px 0">'
            f'<b style="color:{colour}">{html.escape(self.exercise_id)}: {self.status}</b> '
            f"{html.escape(self.message)}{body}</div>"
        )

    def mime_bundle(self) -> dict[str, str]:
        return {"text/html": self._repr_html_(), "text/plain": str(self)}

    def mark_shown(self, cell: int | None) -> None:
        """check() showed this result in notebook cell ``cell``: IPython's echo of it is skipped there."""
        self._shown_in_cell = cell

    def _ipython_display_(self) -> None:
        # check() has shown this result already in the running cell: skip IPython's echo of
        # the return value there. In any later cell (`r = check(...)`, then `r`) it shows.
        if self._shown_in_cell is not None and self._shown_in_cell == current_cell():
            return
        from IPython.display import display

        display(self.mime_bundle(), raw=True)


# --- which notebook cell is running -------------------------------------------------


def kernel_shell():
    """The IPython shell when running in a notebook kernel, else None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def current_cell() -> int | None:
    shell = kernel_shell()
    return None if shell is None else getattr(shell, "execution_count", None)


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
__all__ += ["WHOLE_ATOL", "WHOLE_FEEDBACK", "precision_feedback"]  # the policy's words, from lib.value_grading


def _grade_value(exercise: ValueExercise, answer: Any) -> CheckResult:
    expected = np.asarray(exercise.expected, dtype=np.float64)
    numbers, problem = as_numbers(answer, expected.shape)
    hint = exercise.hints[0] if exercise.hints else ""
    if numbers is None:
        return CheckResult(exercise.id, INCORRECT, problem, hint=hint)
    shown = np.array2string(numbers, precision=4, suppress_small=True, separator=", ")
    verdict = judge_value(exercise, numbers)
    if verdict.correct:
        return CheckResult(exercise.id, CORRECT, f"{shown} is right.", explanation=exercise.explanation)
    return CheckResult(
        exercise.id, INCORRECT, f"{shown} is not it.", feedback=verdict.feedback, hint=hint, mistake=verdict.mistake
    )


# --- functions ------------------------------------------------------------------------


# What a learner's function did on a case: (problem or "", output as a CPU tensor, dtype chosen by the learner)
Outcome = tuple[str, "torch.Tensor | None", bool]
LIBRARY_FEEDBACK = USES_FEEDBACK
CALLS_LIBRARY = "called what it may not use:"


def _grade_function(exercise: FunctionExercise, answer: Any) -> CheckResult:
    if not callable(answer):
        return not_a_function(exercise, type(answer).__name__)
    rules = exercise_policy(exercise)
    found = read_before_running(answer, rules) if rules is not None else ""
    if found:  # the function is, uses or copies what does the exercise's work
        return refused(exercise, found)
    guarded, homes = (rules.guarded, rules.homes) if rules is not None else ([], [])
    cases = exercise.cases + drawn_cases(exercise)  # drawn afresh on every call: a table cannot pass
    outcomes: list[Outcome] = []
    for case in cases:
        outcomes.append(run_learner_case(answer, case.args(), guarded, homes, exercise.timeout_s))
        if stops_the_cases(outcomes[-1][0]):
            break
    return judge_function(exercise, cases, outcomes)


def refused(exercise: FunctionExercise, feedback: str) -> CheckResult:
    """The learner's function, read before it ran, is (or uses, or copies) what it may not."""
    message, hint = f"not graded: {feedback}.", exercise.hints[0] if exercise.hints else ""
    return CheckResult(exercise.id, INCORRECT, message, feedback=feedback, hint=hint, mistake=feedback)


def not_a_function(exercise: FunctionExercise, type_name: str) -> CheckResult:
    hint = exercise.hints[0] if exercise.hints else ""
    return CheckResult(exercise.id, INCORRECT, f"expected a function, but the answer is of type {type_name}", hint=hint)


def stops_the_cases(problem: str) -> bool:
    """One timeout (or one call into the library) is enough: the other cases are not run."""
    return problem.startswith(("did not finish", CALLS_LIBRARY))


def judge_function(exercise: FunctionExercise, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> CheckResult:
    """The result for a learner's function, from what it did on each hidden case (``outcomes``,
    in the order of ``cases``, as ``run_learner_case`` reports them; fewer when a case stopped
    the run). The references and the known wrong functions run here, never beside the learner's."""
    hint = exercise.hints[0] if exercise.hints else ""
    failed: list[tuple[Case, str, torch.Tensor | None]] = []
    for case, (problem, got, typed) in zip(cases, outcomes, strict=False):  # fewer outcomes: a case stopped the run
        if not problem:
            problem, got = compare_case(exercise, exercise.reference(*case.args()), got, typed)
        if problem:
            failed.append((case, problem, got))
    if not failed:
        n = len(cases)
        return CheckResult(exercise.id, CORRECT, f"passes all {n} hidden cases.", explanation=exercise.explanation)
    case, problem, got = failed[0]
    if problem.startswith(CALLS_LIBRARY):
        feedback = LIBRARY_FEEDBACK.format(name=problem.removeprefix(CALLS_LIBRARY).strip())
        message = f"not graded: while the hidden case {case.name!r} ran, your function {problem}."
        return CheckResult(exercise.id, INCORRECT, message, feedback=feedback, hint=hint, mistake=feedback)
    names = ", ".join(case.name for case, _, _ in failed)
    message = f"fails {len(failed)} of {len(cases)} hidden cases ({names}). First: {case.name}: {problem}."
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
        same = theirs.shape == got.shape and torch.allclose(theirs, got, exercise.rtol, exercise.atol, equal_nan=True)
        if same:
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
    if isinstance(got, torch.Tensor) and type(got) not in (torch.Tensor, torch.nn.Parameter):
        # its own __torch_function__ would run again when the grader reads it, after the watch
        return f"returned a {type(got).__name__}, a subclass of torch.Tensor: return a plain tensor", None, False
    try:
        tensor = torch.as_tensor(got).detach().cpu()
    except (Exception, SystemExit, GeneratorExit) as error:  # a learner's object may raise anything
        return f"returned a {type(got).__name__} that is not a tensor of numbers ({describe_error(error)})", None, False
    if type(tensor) is not torch.Tensor:
        return f"returned a {type(got).__name__} that reads as a {type(tensor).__name__}: return a tensor", None, False
    return "", tensor, typed


_WATCHES: dict[tuple, Any] = {}


def _watch_of(forbidden: Sequence) -> Any:
    """The runtime watch (lib.call_watch) of these forbidden callables, built once per exercise."""
    from lib.call_watch import Watch

    key = tuple((id(obj), name) for obj, name in forbidden)
    if key not in _WATCHES:
        _WATCHES[key] = (Watch(forbidden), list(forbidden))  # the objects kept alive: their ids stay theirs
    return _WATCHES[key][0]


def _watched_call(function: Callable, args: tuple, watch: Any, fired: list[str]) -> tuple[str, Any, bool]:
    """``_call_and_read`` with the watch on, in the thread that runs the learner's function."""
    import gc

    from lib.call_watch import watch_calls

    with watch_calls(watch, fired):
        read = _call_and_read(function, args)
        gc.collect(1)  # the learner's young garbage is finalized while the watch is on, not in the grader's code
        return read


def run_learner_case(
    function: Callable, args: tuple, forbidden: Sequence, homes: Sequence, timeout_s: float
) -> Outcome:
    """Run the learner's ``function`` on one case's ``args``: under the time limit, with exit()
    raising and the ``forbidden`` library functions refusing. What it did, as an ``Outcome``."""
    watch = _watch_of(forbidden)  # read before forbid_calls swaps the forbidden functions' code
    try:
        with exit_raises(), forbid_calls(function, forbidden, homes) as fired:
            try:
                problem, got, typed = call_with_timeout(_watched_call, (function, args, watch, fired), timeout_s)
            except ForbiddenCall:
                pass
    except GradingTimeout:
        return f"did not finish within {timeout_s:g} s (an endless loop?)", None, False
    if fired:  # even when the learner's own `except BaseException` swallowed the refusal
        return f"{CALLS_LIBRARY} {fired[0]}", None, False
    return problem, got, typed


def compare_case(
    exercise: FunctionExercise, expected: torch.Tensor, got: torch.Tensor, typed: bool
) -> tuple[str, torch.Tensor | None]:
    """('', output) when the learner's output ``got`` agrees with the reference's ``expected``
    on a case, else what went wrong and the output, when it reads as a tensor of the right shape."""
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

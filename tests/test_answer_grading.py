"""lib.answer_grading: which recorded answer counts (the last its own cell recorded), values
graded with the key, functions read by check()'s code policy and judged on the declared hidden
cases and a few drawn from the batch's seed, so that a table of the declared cases fails and one
seed grades alike."""

import json

import cloudpickle
import numpy as np
import torch

from lib.answer_grading import counted_answers, drawn_cases, grade_answers, own_cells
from lib.checks import exercises
from lib.drawn_cases import DRAWN
from lib.hidden_runs import run_functions

BOOK = exercises()


def test_the_answer_that_counts_is_the_last_its_own_cell_recorded():
    own = own_cells([None, "from lib.checks import check", "check('1.equal-scores', a)", 'check("2.x", b)'])
    assert own == {"1.equal-scores": 2, "2.x": 3}
    requests = {"r2": 2, "r3": 3, "r4": 4}
    records = [
        {"id": "1.equal-scores", "request": "r2", "answer": "none"},
        {"id": "1.equal-scores", "request": "r2", "answer": "numbers", "numbers": np.array([1.0, 2.0])},
        {"id": "1.equal-scores", "request": "r4", "answer": "none"},
        {"id": "1.masked-read", "request": "zz", "answer": "none"},
        {"id": "2.x", "request": "r3", "answer": "none"},
    ]
    counted, problems = counted_answers(records, own, requests, chapter="1")
    assert list(counted) == ["1.equal-scores"] and counted["1.equal-scores"]["answer"] == "numbers"
    assert problems == [
        "an answer to 1.equal-scores given in cell 5, not in its own cell 3: not counted",
        "an answer to 1.masked-read given outside any cell, no cell of its own: not counted",
        "an answer to 2.x, another chapter's exercise, given in cell 4: not counted",
    ]
    results = grade_answers(BOOK, counted, seed=1)
    assert results["1.equal-scores"].status == "correct"


def test_drawn_cases_come_from_the_batch_seed_and_integer_inputs_are_drawn_too():
    for exercise_id in ("1.stable-softmax", "2.causal-padding-mask", "6.decode-mask"):
        exercise = BOOK[exercise_id]
        first, again, other = drawn_cases(exercise, 5), drawn_cases(exercise, 5), drawn_cases(exercise, 6)
        assert len(first) == DRAWN and all(case.name.startswith("drawn at random") for case in first)
        assert repr([c.args() for c in first]) == repr([c.args() for c in again])  # the seed draws alike
        assert repr([c.args() for c in first]) != repr([c.args() for c in other])
        for case in first:
            exercise.reference(*case.args())  # in the exercise's domain


def _in_process(runs, **options):
    """The hidden runs without a sandbox (lib.hidden_runs runs them in one; see its tests)."""
    return run_functions(runs, sandboxed=False)


def test_a_table_of_the_declared_cases_fails_the_drawn_ones_and_a_seed_grades_alike():
    exercise = BOOK["1.stable-softmax"]
    table = {json.dumps(c.args()[0].tolist()): exercise.reference(*c.args()).tolist() for c in exercise.cases}

    def stable_softmax(scores):
        key = json.dumps(scores.tolist())
        return torch.tensor(table[key]) if key in table else torch.zeros_like(scores)

    entry = {"answer": "function", "pickle": cloudpickle.dumps(stable_softmax)}
    first = grade_answers(BOOK, {exercise.id: entry}, seed=11, run=_in_process)[exercise.id]
    again = grade_answers(BOOK, {exercise.id: entry}, seed=11, run=_in_process)[exercise.id]
    assert first.status == "incorrect" and first.message == again.message
    assert first.message.startswith(f"fails {DRAWN} of {len(exercise.cases) + DRAWN} hidden cases")
    assert "drawn at random" in first.message

    def honest_softmax(scores):  # defined here, so that cloudpickle sends it by value, as a notebook's
        shift = torch.nan_to_num(scores.amax(dim=-1, keepdim=True), neginf=0.0)
        exps = torch.exp(scores - shift)
        total = exps.sum(dim=-1, keepdim=True)
        return exps / torch.where(total > 0, total, torch.ones_like(total))

    honest = {"answer": "function", "pickle": cloudpickle.dumps(honest_softmax)}
    assert grade_answers(BOOK, {exercise.id: honest}, seed=11, run=_in_process)[exercise.id].correct
    library = {"answer": "function", "pickle": cloudpickle.dumps(lambda s: torch.softmax(s, -1).nan_to_num(0.0))}
    refused = grade_answers(BOOK, {exercise.id: library}, seed=11, run=_in_process)[exercise.id]
    assert refused.feedback == "your function uses torch.softmax, which does this exercise's work: write it yourself"
    problems = {
        "1.equal-scores": {"answer": "problem", "problem": "expected numbers but got a dict"},
        "1.masked-read": {"answer": "function", "pickle": b""},
        "1.stable-softmax": {"answer": "not a function", "type": "list"},
    }
    results = grade_answers(BOOK, problems, seed=11, run=_in_process)
    assert results["1.equal-scores"].message == "expected numbers but got a dict"
    assert results["1.masked-read"].message == "expected numbers"
    assert results["1.stable-softmax"].message == "expected a function, but the answer is of type list"

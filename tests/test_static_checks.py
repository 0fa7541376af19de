"""The static book's grader (book/_static/check-yourself.js) agrees with lib.checks.

It runs the page script under Node with a stand-in window and document, on the data that
`python -m lib.checks --export-js` writes, and grades the same answers both ways: every
expected and wrong answer, as JSON and as a flat list separated by spaces or commas, each
policy rule (a whole answer plus 0.4, an answer rounded to the stated decimals, one short of
them), and the spellings people type on a page (146,240, 8/3, −8, a grid as a flat list),
each beside the Python value it stands for. Status and feedback must be the same.
"""

import functools
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
from _requirements import require

from lib.checks import exercises, grade, static_page_data

SCRIPT = Path(__file__).parent.parent / "book" / "_static" / "check-yourself.js"
HARNESS = """
const fs = require("fs");
const input = JSON.parse(fs.readFileSync(0, "utf8"));
global.window = { BOOK_EXERCISES: input.exercises };
global.document = { addEventListener() {} };
eval(fs.readFileSync(process.argv[1], "utf8"));
const byId = new Map(input.exercises.map((exercise) => [exercise.id, exercise]));
const out = input.cases.map(([id, text]) => window.BookChecks.grade(byId.get(id), text));
process.stdout.write(JSON.stringify(out));
"""


def needs_node(test):
    """Run ``test`` only where Node.js is installed; in CI a missing Node.js fails it."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        require("Node.js", shutil.which("node") is not None, "apt-get install nodejs")
        return test(*args, **kwargs)

    return run


# Spellings a page reader types that Python writes another way: (id, page text, Python value).
SPELLINGS = [
    ("9.parameters", "146,240", 146240),
    ("9.parameters", "146,240.4", 146240.4),
    ("9.parameters", "[146,240]", 146240),
    ("9.parameters", "146240", 146240),
    ("5.total-doubling", "8/3", 8 / 3),
    ("5.total-doubling", "8 / 3", 8 / 3),
    ("5.total-doubling", "2.67", 2.67),
    ("5.total-doubling", "2.7", 2.7),
    ("7.viterbi", "−8", -8),
    ("7.viterbi", "−8.5", -8.5),
    ("7.viterbi", "−9", -9),
    ("3.gap-score", "−0.87", -0.87),
    ("3.gap-score", "0.87", 0.87),
    ("2.causal-alignment", "1 1 1 1 0 0", [1, 1, 1, 1, 0, 0]),
    ("2.causal-alignment", "1, 1, 1, 1, 0, 0", [1, 1, 1, 1, 0, 0]),
    ("2.causal-alignment", "[[1, 1, 1], [1, 0, 0]]", [[1, 1, 1], [1, 0, 0]]),
    ("2.causal-alignment", "1 0 0 1 1 1", [1, 0, 0, 1, 1, 1]),
    ("2.causal-alignment", "1 1 1 1 0.4 0", [1, 1, 1, 1, 0.4, 0]),
    ("7.encode-word", "257 261", [257, 261]),
    ("7.encode-word", "257, 261", [257, 261]),
    ("7.next-merge", "117, 110", [117, 110]),
    ("1.wider-variance", "1024, 1/32", [1024, 1 / 32]),
    ("9.uniform-loss", "7.625", 7.625),
    ("9.uniform-loss", "7.62", 7.62),
    ("9.top-k-two", "0.310", 0.310),
    ("9.top-k-two", "0.31", 0.31),
    ("9.top-k-two", "0.311", 0.311),  # close, at the stated precision, but wrong: no word about precision
    ("9.uniform-loss", "7.63", 7.63),
    ("6.blocks-needed", "126.5", 126.5),
    ("6.weights-gb", "26", 26),
    # A mistake or the right answer read at the precision typed (issue 30): rounded coarser, cut off.
    ("5.accumulator", "4, -0.73", [4, -0.73]),
    ("5.accumulator", "4, -0.7", [4, -0.7]),
    ("5.accumulator", "2.1, -0.1", [2.1, -0.1]),
    ("5.accumulator", "2, 0", [2, 0]),
    ("6.bandwidth-floor", "8.95", 8.95),
    ("6.bandwidth-floor", "9", 9),
    ("9.uniform-loss", "7.6", 7.6),
    ("9.uniform-loss", "-7.62", -7.62),
    ("8.projection-params", "1.57", 1.57),
    ("7.viterbi", "0.0003", 0.0003),
]


def _text(values) -> str:
    return " ".join(repr(float(x)) for x in np.ravel(values))


def _answers():
    """(id, page text, Python value) for every exercise: its answers and each policy rule."""
    answers = list(SPELLINGS)
    for exercise in exercises().values():
        if not hasattr(exercise, "whole"):
            continue
        expected = np.asarray(exercise.expected, dtype=np.float64)
        points = [expected] + [np.asarray(w.value, dtype=np.float64) for w in exercise.wrong_answers]
        if exercise.whole:
            points += [expected + 0.4, expected - 0.4]
        else:
            d = exercise.decimals
            points += [np.round(p, d) for p in points] + [np.round(expected, d - 1), expected + 0.6 * 10.0 ** -(d - 1)]
        for point in points:
            answers.append((exercise.id, json.dumps(point.tolist()), point.tolist()))
            answers.append((exercise.id, _text(point), point.ravel().tolist()))
            answers.append((exercise.id, ", ".join(repr(float(x)) for x in point.ravel()), point.ravel().tolist()))
        wrong_size = expected.size + 1
        answers.append((exercise.id, ", ".join(["1"] * wrong_size), [1.0] * wrong_size))
    return answers


def _page(cases) -> list[dict]:
    run = subprocess.run(
        ["node", "-e", HARNESS, str(SCRIPT)],
        input=json.dumps({"exercises": static_page_data(), "cases": [[i, text] for i, text, _ in cases]}),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout)


@needs_node
def test_page_and_kernel_agree_on_every_answer_both_can_express():
    cases = _answers()
    registry = exercises()
    page = _page(cases)
    assert len(page) == len(cases)
    n_correct = 0
    for (exercise_id, text, value), on_page in zip(cases, page, strict=True):
        in_kernel = grade(registry[exercise_id], value)
        assert on_page["status"] == in_kernel.status, (exercise_id, text, on_page, in_kernel.message)
        assert (on_page.get("feedback") or "") == in_kernel.feedback, (exercise_id, text, on_page, in_kernel.feedback)
        n_correct += in_kernel.correct
    assert n_correct > len(registry)  # the agreement covers right answers, not only wrong ones


@needs_node
def test_page_reads_the_spellings_people_type():
    registry = exercises()
    page = _page(SPELLINGS)
    by_text = {text: result for (_, text, _), result in zip(SPELLINGS, page, strict=True)}
    for text in [
        "146,240",
        "[146,240]",
        "8/3",
        "8 / 3",
        "−8",
        "1 1 1 1 0 0",
        "1, 1, 1, 1, 0, 0",
        "1024, 1/32",
        "7.625",
    ]:
        assert by_text[text]["status"] == "correct", text
    assert "a count is a whole number" in by_text["146,240.4"]["feedback"]
    assert "decimal places the question asks for" in by_text["7.62"]["feedback"]
    assert by_text["−8.5"]["feedback"] == registry["7.viterbi"].wrong_answers[1].feedback


@needs_node
def test_junk_on_the_page_gets_a_message():
    cases = [(e["id"], junk, None) for e in static_page_data() for junk in ["", "abc", "[1, x]", "1/0"]]
    for (_, junk, _), result in zip(cases, _page(cases), strict=True):
        assert result["status"] == ("not attempted" if junk == "" else "incorrect"), (junk, result)


def test_placeholders_are_shaped_like_the_answer():
    """Each answer box says how many numbers to type, whole or to how many decimals, never a generic example."""
    for item in static_page_data():
        size = int(np.size(item["expected"]))
        placeholder = item["placeholder"]
        assert placeholder.startswith("one " if size == 1 else f"{size} "), placeholder
        assert ("whole number" in placeholder) == item["whole"], placeholder
        if item["decimals"] is not None:
            assert f"to {item['decimals']} decimal" in placeholder, placeholder
        assert "0.5, 0.5" not in placeholder


@needs_node
def test_parse_accepts_the_usual_spellings():
    texts = ["[1, 2]", "1 2", "(1,2)", "1;2", "64", "1e-3", "one", "8/3", "−8", "1,000"]
    harness = (
        "global.window = {}; global.document = { addEventListener() {} };"
        'eval(require("fs").readFileSync(process.argv[1], "utf8"));'
        f"process.stdout.write(JSON.stringify([{json.dumps(texts)}.map((t) => window.BookChecks.parseNumbers(t)),"
        ' window.BookChecks.parseNumbers("146,240", true), window.BookChecks.parseNumbers("1,2345", true)]));'
    )
    run = subprocess.run(["node", "-e", harness, str(SCRIPT)], capture_output=True, text=True, check=True)
    lists, thousands, not_thousands = json.loads(run.stdout)
    assert lists[:7] == [[1, 2], [1, 2], [1, 2], [1, 2], [64], [0.001], None]
    assert math.isclose(lists[7][0], 8 / 3) and lists[8] == [-8]
    assert lists[9] == [1, 0]  # in a list answer, a comma separates numbers
    assert thousands == [146240] and not_thousands == [1, 2345]

"""The live playgrounds of the built book (book/_static/playgrounds.js) print what the notebook prints.

The page's pure functions run under Node (the script exports them to ``module.exports``, as
tests/test_static_checks.py runs check-yourself.js) on a grid of thousands of control
settings, and each printed text must equal, character for character, what the Python
function behind the notebook's widget prints for the same setting (``lib.playgrounds``):

* self-attention: both tokens, mask on and off, every scaling, every temperature the
  slider holds, and queries from tiny to the largest doubles (Python writes every digit of
  1e300 with ``:.4f``; JavaScript's toFixed would write "1e+300");
* RoPE: every query position, gaps from -12 to 12, every frequency on the slider's grid of
  π/64, π included;
* complexity: every pattern and N, windows and global-token counts at and around the edges
  and the recorded windows, with the recorded CPU times (chapters/results/*.csv) and the
  note on what was not measured.

A text box holding no number (blank, "-", "1e", "1e400") is read as the notebook's widget
reads it: as no number, never as 0.
"""

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest
from _requirements import require

from lib.playgrounds import complexity, rope, self_attention

SCRIPT = Path(__file__).parent.parent / "book" / "_static" / "playgrounds.js"
HARNESS = """
const fs = require("fs");
const P = require(process.argv[1]);
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const out = {};
out.attention = input.attention.map(([qx, qy, position, scaling, exponent, causal]) => {
  // the page's temperature: 10 ** (the slider's value), √2 until the slider moves
  const temperature = exponent === null ? Math.SQRT2 : Math.pow(10, Number(exponent));
  const read = P.selfAttentionRead([qx, qy], position, scaling, temperature, causal);
  return [temperature, P.describeRead(read)];
});
out.rope = input.rope.map(([m, n, steps]) => {
  const frequency = P.frequencyAt(steps);
  const read = P.ropeRead(m, n, frequency);
  return [frequency, P.describeRope(read), read.score, read.scoreFromGap];
});
out.complexity = input.complexity.map(([pattern, n, window, nGlobal]) => {
  const curves = P.complexityCurves(pattern, n, window, nGlobal, input.data);
  return [P.describeComplexity(curves), curves.pairs, curves.flops, curves.measured];
});
out.boxes = input.boxes.map((text) => P.boxNumber(text));
// the numbers to format travel as Python's repr: JSON has no NaN or infinity
const number = (text) => ({ nan: NaN, inf: Infinity, "-inf": -Infinity })[text] ?? Number(text);
out.fixed = input.fixed.map(([x, digits]) => P.fixed(number(x), digits));
out.steps = P.FREQUENCY_STEPS;
process.stdout.write(JSON.stringify(out));
"""

QUERY_COORDINATES = [0.0, 1.0, -1.0, 0.1, -0.1, 0.3, -1.2, 0.5, 2.0, 3.5, 10.0, 37.25, 1e-9, -5e-5, 4.5e-5, 123456.789,
                     1e21, -1e21, 1e300, 1.7e308, -1.7e308]  # fmt: skip
FEW_COORDINATES = [0.0, 1.0, -1.0, 0.3, -1.2, 2.0, 10.0, 1e-9, 1e21, 1.7e308]
EXPONENTS = [f"{-1 + 0.05 * k:.2f}" for k in range(41)]  # the temperature slider: 10 ** (-1 .. 1), step 0.05
WINDOWS = [1, 2, 17, 64, 128, 255, 256, 257, 512, 1000, 2048, 4095, 4096]
N_GLOBALS = [0, 1, 16, 17, 100, 256]
# What a number box can hold (Chromium drops letters as they are typed): its value is the text,
# or "" where the text is no finite number (validity.badInput then).
BOX_TEXTS = ["", " ", "-", "+", ".", "-.", "1e", "1e-", "1e400", "-1e400", "1.7976931348623159e308", "-0", "0",
             "0.3", "-1.2", " 2 ", "1e3", "1E-2", "1e+3", ".5", "5.", "1e308", "-1e308"]  # fmt: skip
FIXED = [(x, d) for x in (0.0, -0.0, 0.5, 1.5, 2.5, 0.125, 0.375, -0.00005, 0.00015, 2.675, 1e20, 9.99e20, 1e21,
                          -1e21, 2.5e22, 1e300, -1.7e308, 5e-324, float("nan"), float("inf"), float("-inf"))
         for d in (0, 1, 2, 4, 8)]  # fmt: skip


def _grid() -> dict:
    attention = []
    for qx in QUERY_COORDINATES:
        for qy in QUERY_COORDINATES:
            for position in (0, 1):
                for causal in (False, True):
                    attention += [[qx, qy, position, scaling, None, causal] for scaling in ("1/√d_k", "none")]
    for qx in FEW_COORDINATES:
        for qy in FEW_COORDINATES[:4]:
            for position in (0, 1):
                for causal in (False, True):
                    attention += [[qx, qy, position, "temperature", e, causal] for e in EXPONENTS]
    rope_cases = [  # n = m + gap, within the key slider's 0 .. 52
        [m, min(max(m + gap, 0), 52), steps] for m in range(41) for gap in range(-12, 13) for steps in range(0, 65, 8)
    ]
    rope_cases += [[m, m + gap, steps] for m in (0, 1, 5, 33, 40) for gap in (-1, 0, 1, 2, 7) for steps in range(65)]
    complexity_cases = [
        [pattern, n, window, n_global]
        for pattern in complexity.PATTERNS
        for n in complexity.SIZES
        for window in WINDOWS
        for n_global in (N_GLOBALS if pattern == "global+local" else [16])
    ]
    return {
        "attention": attention,
        "rope": rope_cases,
        "complexity": complexity_cases,
        "boxes": BOX_TEXTS,
        "data": complexity.page_data(),
    }


@pytest.fixture(scope="module")
def page():
    """The page's answers on the whole grid, from one Node process (every test here reads them)."""
    require("Node.js", shutil.which("node") is not None, "apt-get install nodejs")
    grid = _grid()
    run = subprocess.run(
        ["node", "-e", HARNESS, str(SCRIPT.resolve())],
        input=json.dumps({**grid, "fixed": [[repr(x), digits] for x, digits in FIXED]}),
        capture_output=True,
        text=True,
        check=True,
    )
    return grid, json.loads(run.stdout)


def test_self_attention_prints_what_the_notebook_prints(page):
    grid, out = page
    assert len(grid["attention"]) > 3000
    differ = []
    for (qx, qy, position, scaling, _, causal), (temperature, text) in zip(grid["attention"], out["attention"],
                                                                           strict=True):  # fmt: skip
        read = self_attention.self_attention_read(
            (qx, qy), position, scaling=scaling, temperature=temperature, causal=causal
        )
        if text != self_attention.describe(read):
            differ.append(((qx, qy, position, scaling, temperature, causal), text, self_attention.describe(read)))
    assert not differ, f"{len(differ)} of {len(grid['attention'])} settings print otherwise, e.g. {differ[:3]}"


def test_self_attention_huge_queries_are_not_in_exponent_form(page):
    grid, out = page
    cases = zip(grid["attention"], out["attention"], strict=True)
    by_setting = {tuple(case[:4]) + (case[5],): text for case, (_, text) in cases}
    huge = by_setting[(1e300, 0.0, 0, "none", False)]
    assert "e+" not in huge and f"dot products [{1e300:.4f}, 0.0000]" in huge
    assert by_setting[(1e21, 1.0, 0, "none", False)].startswith("dot products [1000000000000000000000.0000, 1.0000]")


def test_rope_prints_what_the_notebook_prints_up_to_pi(page):
    grid, out = page
    assert out["steps"] == 64
    frequencies = {frequency for frequency, *_ in out["rope"]}
    assert max(frequencies) == math.pi and min(frequencies) == 0.0  # the notebook's slider reaches π
    assert rope.EXAMPLE_FREQUENCY in frequencies
    differ = []
    for (m, n, _), (frequency, text, score, from_gap) in zip(grid["rope"], out["rope"], strict=True):
        read = rope.rope_read(m, n, frequency=frequency)
        expected = rope.describe_rope_read(read)
        if text != expected:
            differ.append(((m, n, frequency), text, expected))
        assert score == pytest.approx(read.score, abs=1e-12)
        assert from_gap == pytest.approx(read.score_from_gap, abs=1e-12)
    assert len(grid["rope"]) > 10000
    assert not differ, f"{len(differ)} of {len(grid['rope'])} settings print otherwise, e.g. {differ[:3]}"


def test_complexity_prints_what_the_notebook_prints_with_the_recorded_times(page):
    grid, out = page
    differ = []
    notes = set()
    for (pattern, n, window, n_global), (text, pairs, flops, measured) in zip(grid["complexity"], out["complexity"],
                                                                              strict=True):  # fmt: skip
        curves = complexity.complexity_curves(pattern, n, window=window, n_global=n_global)
        expected = complexity.describe(curves)
        if text != expected:
            differ.append(((pattern, n, window, n_global), text, expected))
        assert pairs == (None if curves.pairs is None else list(curves.pairs)) and flops == list(curves.flops)
        assert [[label, [list(p) for p in points]] for label, points in curves.measured.items()] == measured
        notes.add(curves.note)
    assert len(grid["complexity"]) > 1000
    assert not differ, f"{len(differ)} of {len(grid['complexity'])} settings print otherwise, e.g. {differ[:3]}"
    assert len(notes) >= 3  # none, the sparse/global pattern's, and a window with no recorded run


def test_complexity_without_recorded_results_says_so(page, tmp_path):
    empty = complexity.page_data(tmp_path / "results")
    harness = (
        "const P = require(process.argv[1]);"
        f"const data = {json.dumps(empty)};"
        'process.stdout.write(JSON.stringify(["dense", "window", "linear"].map((p) =>'
        " P.describeComplexity(P.complexityCurves(p, 4096, 256, 16, data)))));"
    )
    run = subprocess.run(["node", "-e", harness, str(SCRIPT.resolve())], capture_output=True, text=True, check=True)
    for pattern, text in zip(["dense", "window", "linear"], json.loads(run.stdout), strict=True):
        curves = complexity.complexity_curves(pattern, 4096, window=256, n_global=16, results=tmp_path / "results")
        assert text == complexity.describe(curves)
    assert "no CPU results under results/" in json.loads(run.stdout)[0]


def test_a_box_without_a_number_is_no_number(page):
    """What the widget's FloatText sends the kernel for a box's text: parseFloat of a number
    input's value, which is "" (NaN, so the widget keeps its last number) for text that is no
    finite number; -0 arrives as 0."""
    _, out = page

    def kernel_gets(text):
        try:
            value = float(text)
        except ValueError:
            return None  # the widget keeps its last number
        return value + 0.0 if math.isfinite(value) else None  # + 0.0: -0 arrives as 0

    for text, on_page in zip(BOX_TEXTS, out["boxes"], strict=True):
        assert on_page == kernel_gets(text), (text, on_page)
    assert out["boxes"][BOX_TEXTS.index("-")] is None and out["boxes"][BOX_TEXTS.index("")] is None
    assert out["boxes"][BOX_TEXTS.index("1e400")] is None and out["boxes"][BOX_TEXTS.index("5.")] == 5


def test_numbers_print_as_python_prints_them(page):
    _, out = page
    for (x, digits), text in zip(FIXED, out["fixed"], strict=True):
        assert text == f"{x:.{digits}f}", (x, digits)

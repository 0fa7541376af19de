"""The static book's grader (book/_static/check-yourself.js) agrees with lib.checks.

It runs the page script under Node with a stand-in window and document, on the data that
`python -m lib.checks --export-js` writes, and grades every expected and wrong answer.
"""

import json
import shutil
import subprocess
from pathlib import Path

from _requirements import require

from lib.checks import static_page_data

SCRIPT = Path(__file__).parent.parent / "book" / "_static" / "check-yourself.js"
HARNESS = """
const fs = require("fs");
global.window = { BOOK_EXERCISES: JSON.parse(fs.readFileSync(0, "utf8")) };
global.document = { addEventListener() {} };
eval(fs.readFileSync(process.argv[1], "utf8"));
const out = [];
for (const exercise of window.BOOK_EXERCISES) {
  const asText = (value) => JSON.stringify(value);
  out.push({ id: exercise.id, kind: "expected", result: window.BookChecks.grade(exercise, asText(exercise.expected)) });
  for (const wrong of exercise.wrong_answers) {
    out.push({ id: exercise.id, kind: wrong.feedback, result: window.BookChecks.grade(exercise, asText(wrong.value)) });
  }
  for (const junk of ["", "abc", "1, 2, 3, 4, 5", "[1, x]"]) {
    out.push({ id: exercise.id, kind: "junk:" + junk, result: window.BookChecks.grade(exercise, junk) });
  }
}
process.stdout.write(JSON.stringify(out));
"""


def test_static_grader_agrees_with_python():
    require("Node.js", shutil.which("node") is not None, "apt-get install nodejs")
    data = static_page_data()
    assert data, "no value exercises to export"
    run = subprocess.run(
        ["node", "-e", HARNESS, str(SCRIPT)], input=json.dumps(data), capture_output=True, text=True, check=True
    )
    graded = json.loads(run.stdout)
    for item in graded:
        result = item["result"]
        if item["kind"] == "expected":
            assert result["status"] == "correct", item
        elif item["kind"].startswith("junk:"):
            expected = "not attempted" if item["kind"] == "junk:" else "incorrect"
            assert result["status"] == expected, item
        else:
            assert result["status"] == "incorrect" and result["feedback"] == item["kind"], item
    n_wrong = sum(len(exercise["wrong_answers"]) for exercise in data)
    assert len(graded) == len(data) * 5 + n_wrong


def test_parse_accepts_the_usual_spellings():
    require("Node.js", shutil.which("node") is not None, "apt-get install nodejs")
    harness = (
        "global.window = {}; global.document = { addEventListener() {} };"
        'eval(require("fs").readFileSync(process.argv[1], "utf8"));'
        'process.stdout.write(JSON.stringify(["[1, 2]", "1 2", "(1,2)", "1;2", "64", "1e-3", "one"]'
        ".map(window.BookChecks.parseNumbers)));"
    )
    run = subprocess.run(["node", "-e", harness, str(SCRIPT)], capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == [[1, 2], [1, 2], [1, 2], [1, 2], [64], [0.001], None]

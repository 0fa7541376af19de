"""Issue 29: no hand-in can change any grade but its own.

A class is graded twice by ``python -m lib.student grade`` run as a subprocess on a copy of
the library, never on this checkout: the honest hand-ins alone (chapter 1 solved, one named
mistake, blank: small notebooks, as tests/test_batch_grading.py grades the whole chapter),
then the same with seven hostile hand-ins (eleven attacks), each written as a student would,
knowing only what is public of the grader (the class folder's path, as the teacher's command
line shows it). After the batch: each honest grade
is what it was alone, every file outside the grader's output folder is byte-identical, no
process the batch started is alive, the table, CSV and JSON list every notebook, and each
hostile hand-in scores only what its own work earns.
"""

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _notebooks import CHAPTER_1, ROOT, sandboxed_processes, write_notebook

from lib.drawn_cases import DRAWN
from lib.exercises import find

pytestmark = pytest.mark.usefixtures("needs_sandbox")

NAME = CHAPTER_1.name  # every hand-in is a chapter 1 notebook: graded on chapter 1's six exercises
SECRET = "teacher-secret-4471"  # in the grader's environment: no notebook may print it
SOLVED_SOFTMAX = (
    "import torch\n"
    "def stable_softmax(scores):\n"
    "    row_max = scores.amax(dim=-1, keepdim=True)\n"
    "    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))\n"
    "    exps = torch.exp(scores - row_max)\n"
    "    total = exps.sum(dim=-1, keepdim=True)\n"
    "    return exps / torch.where(total > 0, total, torch.ones_like(total))\n"
    "check('1.stable-softmax', stable_softmax)"
)
BLANK = [f"answer = ...\ncheck('{i}', answer)" for i in ("1.longer-query", "1.equal-scores", "1.masked-read")]


def _hostile(class_dir: Path, repo: Path) -> dict[str, list[str]]:
    """Each hostile hand-in's cells (after the import of check), by student."""
    classmate = class_dir / "ada_solved" / NAME
    walk_frames = (
        "import sys\n"
        "def found():\n"
        "    frame = sys._getframe(1)\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()):\n"
        "            if hasattr(value, 'expected'):\n"
        "                return value.expected\n"
        "        if 'expected' in frame.f_locals:\n"
        "            return frame.f_locals['expected']\n"
        "        frame = frame.f_back\n"
    )
    table = {
        json.dumps(case.args()[0].tolist()): find("1.stable-softmax").reference(*case.args()).tolist()
        for case in find("1.stable-softmax").cases
    }
    return {
        "h_key_thief": [
            "import lib.checks, lib.grading\n"
            "for module in (lib.checks, lib.grading):\n"
            "    with open(module.__file__, 'a') as file:\n"
            "        file.write('\\ngrade = lambda e, a: CheckResult(e.id, CORRECT, \"ok\")\\n')",
            "import os, lib.exercises\nfrom lib.exercises import find\n"
            "ids = ('1.longer-query', '1.equal-scores', '1.masked-read')\n"
            "key = {i: getattr(find(i), 'expected', None) for i in ids}\n"
            "cases = getattr(find('1.stable-softmax'), 'cases', None)\n"
            "try:\n    source = open(os.path.join(os.path.dirname(lib.exercises.__file__), 'ch01.py')).read()\n"
            "except OSError:\n    source = ''\nprint(len(source), key, cases)",
            "answer = key['1.longer-query']\ncheck('1.longer-query', answer)",
            "answer = key['1.equal-scores']\ncheck('1.equal-scores', answer)",
            "answer = key['1.masked-read']\ncheck('1.masked-read', answer)",
            walk_frames + "import torch\ndef stable_softmax(scores):\n    value = found()\n"
            "    return torch.as_tensor(value) if value is not None else torch.zeros_like(scores)\n"
            "check('1.stable-softmax', stable_softmax)",
        ],
        "h_vandal": [
            "import os\nhits = []\n"
            f"for path in ({str(classmate)!r}, '../../ada_solved/{NAME}', {str(class_dir / 'bo_mistake' / NAME)!r}):\n"
            "    try:\n        open(path, 'w').write('{}'); hits.append(path)\n    except OSError: pass\n"
            f"for path in ({str(class_dir / 'cy_blank' / NAME)!r},):\n"
            "    try:\n        os.remove(path); hits.append(path)\n    except OSError: pass\n"
            f"for path in ({str(class_dir.parent / 'outside.txt')!r}, '/tmp/outside.txt', "
            f"{str(repo / 'lib' / 'outside.py')!r}, os.path.expanduser('~/outside.txt'), '../outside.txt'):\n"
            "    try:\n        open(path, 'w').write('x'); hits.append(path)\n    except OSError: pass\n"
            f"for link, target in (('feedback', {str(class_dir.parent / 'teacher.txt')!r}),):\n"
            "    try:\n        os.remove(link) if os.path.lexists(link) else None; os.symlink(target, link)\n"
            "    except OSError: pass\n"
            "print(hits)",
            "check('1.equal-scores', [1, 2])",
        ],
        "h_kills_all": [
            "check('1.equal-scores', [1, 2])",
            "import os, signal\n"
            "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
            "    if pid != os.getpid():\n"
            "        try:\n            os.kill(pid, signal.SIGKILL)\n        except OSError:\n            pass",
            "check('1.wider-variance', [1024, 1 / 32])",
        ],
        "h_parricide": [
            "check('1.equal-scores', [1, 2])",
            "import os, signal\nparent = os.getppid()\n"
            "grandparent = int(open(f'/proc/{parent}/stat').read().rsplit(')', 1)[1].split()[1])\n"
            "print(open(f'/proc/{grandparent}/cmdline').read())\n"
            "for pid in (grandparent, parent):\n    os.kill(pid, signal.SIGKILL)",
            "check('1.wider-variance', [1024, 1 / 32])",
        ],
        "h_setsid": [
            "import subprocess, sys\n"
            "code = 'import time\\nwhile True:\\n'\n"
            f"for path in ('still-here.txt', {str(class_dir.parent / 'still-here.txt')!r}):\n"
            '    code += f\'    try:\\n        open({path!r}, "a").write("x")\\n\'\n'
            "    code += '    except OSError:\\n        pass\\n'\n"
            "code += '    time.sleep(0.05)\\n'\n"
            "subprocess.Popen([sys.executable, '-c', code], start_new_session=True)",
            "check('1.equal-scores', [1, 2])",
        ],
        "h_snoop": [
            "import os\nseen = [str(dict(os.environ))]\n"
            "for pid in ['self', *[p for p in os.listdir('/proc') if p.isdigit()]]:\n"
            "    for what in ('environ', 'cmdline'):\n"
            "        try:\n            seen.append(open(f'/proc/{pid}/{what}', 'rb').read().decode(errors='replace'))\n"
            "        except OSError:\n            pass\n"
            "print('\\n'.join(seen))",
            "import lib.checks, lib.grading\nfrom lib.grading import CheckResult, CORRECT\n"
            "right = lambda *args: CheckResult(str(args[-2]), CORRECT, 'ok')\n"
            "lib.grading.grade = lib.checks.grade = right\n"
            "lib.checks._check = lib.checks._record = right",
            *BLANK,
            "check('1.stable-softmax', lambda scores: scores)",
        ],
        "h_cheats": [
            walk_frames + "class Sneaky:\n    def __array__(self, dtype=None, copy=None):\n"
            "        import numpy\n        value = found()\n"
            "        return numpy.asarray(value if value is not None else [0.0, 0.0], dtype=float)\n"
            "check('1.longer-query', Sneaky())",
            "for candidate in ([1, 2], [2, 1], [0, 0], [1, 1]):\n"
            "    if check('1.equal-scores', candidate).correct:\n        break",
            f"import json, torch\ntable = json.loads({json.dumps(table)!r})\n"
            "def stable_softmax(scores):\n    key = json.dumps(scores.tolist())\n"
            "    return torch.tensor(table[key]) if key in table else torch.zeros_like(scores)\n"
            "check('1.stable-softmax', stable_softmax)",
        ],
    }


# What each hostile hand-in's own work earns: its correct answers, its statuses where they matter.
EARNED = {
    "h_key_thief": 0, "h_vandal": 1, "h_kills_all": 1, "h_parricide": 1, "h_setsid": 1,
    "h_snoop": 0, "h_cheats": 0,
}  # fmt: skip


def _hashes(folder: Path, skip: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        for path in sorted(folder.rglob("*"))
        if skip not in path.parents and path != skip and "__pycache__" not in path.parts
    }


def _grade(repo: Path, notebooks: list[Path], out: Path, owner: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """``python -m lib.student grade`` on ``notebooks``, its temporary folders under ``owner``."""
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(repo), "GRADER_SECRET": SECRET, "TMPDIR": str(owner)}
    command = [sys.executable, "-m", "lib.student", "grade", *map(str, notebooks), "--jobs", "2", "--seed", "7"]
    command += ["--time-limit", "60", "--json", str(out / "grades.json"), "--csv", str(out / "grades.csv")]
    command += ["--feedback", str(out / "feedback")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads((out / "grades.json").read_text())


def test_no_hand_in_changes_any_grade_but_its_own(tmp_path, sandbox_owner):
    repo, class_dir = tmp_path / "repo", tmp_path / "class"
    shutil.copytree(ROOT / "lib", repo / "lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "chapters" / "results", repo / "chapters" / "results")
    (tmp_path / "teacher.txt").write_text("the teacher's own file\n")
    mistake = next(w for w in find("1.longer-query").wrong_answers if list(w.value) == [2.0, 0.0])
    solved = [  # the right answers, as the chapter's solutions compute them
        f"check({exercise_id!r}, {find(exercise_id).expected!r})"
        for exercise_id in ("1.longer-query", "1.equal-scores", "1.masked-read", "1.new-values", "1.wider-variance")
    ]
    honest = [
        write_notebook(class_dir / "ada_solved" / NAME, *solved, SOLVED_SOFTMAX),
        write_notebook(
            class_dir / "bo_mistake" / NAME,
            "answer = [2.0, 0.0]\ncheck('1.longer-query', answer)",
            "check('1.equal-scores', [1, 2])",
            SOLVED_SOFTMAX,
        ),  # fmt: skip
        write_notebook(class_dir / "cy_blank" / NAME, *BLANK),
    ]
    outputs = tmp_path / "out"
    outputs.mkdir()
    _, alone = _grade(repo, honest, outputs / "alone", sandbox_owner)
    alone_grades = {row["student"]: (row["exercises"], row["problems"]) for row in alone}
    assert alone[0]["correct"] == alone[0]["total"] == 6 and alone[0]["problems"] == []
    assert alone[1]["exercises"]["1.longer-query"] == "incorrect" and alone[1]["correct"] == 2
    assert alone[1]["details"]["1.longer-query"]["mistake"] == mistake.feedback
    assert alone[2]["correct"] == 0 and set(alone[2]["exercises"].values()) == {"not attempted"}

    hostile = [
        write_notebook(class_dir / student / NAME, *cells) for student, cells in _hostile(class_dir, repo).items()
    ]
    before = _hashes(tmp_path, outputs)
    start = time.monotonic()
    done, batch = _grade(repo, honest + hostile, outputs / "batch", sandbox_owner)
    seconds = time.monotonic() - start
    _wait = time.monotonic() + 10
    while sandboxed_processes(sandbox_owner) and time.monotonic() < _wait:
        time.sleep(0.2)
    assert sandboxed_processes(sandbox_owner) == []  # nothing the batch started is alive, setsid children included
    assert _hashes(tmp_path, outputs) == before  # every file outside the output folder is byte-identical
    graded = {row["student"]: row for row in batch}
    students = [path.parent.name for path in honest + hostile]
    assert sorted(graded) == sorted(students)
    with open(outputs / "batch" / "grades.csv", newline="", encoding="utf-8") as file:
        assert sorted(row["student"] for row in csv.DictReader(file)) == sorted(students)
    table = done.stdout[done.stdout.index("student ") : done.stdout.index("Class summary")]
    assert all(student in table for student in students)
    for student, (exercises, problems) in alone_grades.items():
        assert (graded[student]["exercises"], graded[student]["problems"]) == (exercises, problems), student
    earned = {student: graded[student]["correct"] for student in EARNED}
    assert earned == EARNED, {student: graded[student]["problems"] for student in EARNED}
    assert graded["h_vandal"]["exercises"]["1.equal-scores"] == "correct"
    assert graded["h_cheats"]["details"]["1.equal-scores"]["message"].startswith("[1., 1.] is not it")
    lookup = graded["h_cheats"]["details"]["1.stable-softmax"]["message"]
    assert lookup.startswith(f"fails {DRAWN} of {6 + DRAWN} hidden cases") and "drawn at random" in lookup
    assert graded["h_key_thief"]["exercises"]["1.longer-query"] == "not attempted"
    walker = graded["h_key_thief"]["details"]["1.stable-softmax"]["message"]
    # The grader's sealed child (lib.sealed_run) holds the inputs, never an expected value: the walk finds none.
    assert graded["h_key_thief"]["exercises"]["1.stable-softmax"] == "incorrect"
    assert walker.startswith(f"fails {6 + DRAWN} of {6 + DRAWN} hidden cases"), walker
    for student in ("h_kills_all", "h_parricide"):
        assert graded[student]["exercises"]["1.wider-variance"] == "not run"
        assert graded[student]["problems"][-1].startswith(("grading process killed", "kernel died")), student
    executed = (outputs / "batch" / "feedback" / "h_snoop" / NAME).read_text()
    assert SECRET not in executed and "teacher-secret" not in executed
    print(f"\nbatch of {len(students)} notebooks graded in {seconds:.0f} s")
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith("graded ")))

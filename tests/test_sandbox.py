"""lib.sandbox: what a graded notebook sees (the project read-only, no answer key, its own
/proc, no network, an empty environment, limits), and the grader's refusal to grade without a
sandbox unless --no-sandbox says so. The command line runs as a subprocess on small code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _notebooks import ROOT, SOLVED, write_notebook

from lib import sandbox

PROBE = """
import json, os, resource, socket, sys
seen = {"proc": sorted(p for p in os.listdir('/proc') if p.isdigit()), "env": sorted(os.environ)}
seen["exercises"] = sorted(os.listdir(sys.argv[1] + '/lib/exercises'))
for name, path in (("lib", sys.argv[1] + '/lib/x.py'), ("shared", sys.argv[2] + '/x.txt'), ("tmp", '/tmp/x')):
    try:
        open(path, 'w').write('x')
        seen[name] = 'written'
    except OSError as error:
        seen[name] = error.strerror
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
    seen['network'] = 'reached'
except OSError as error:
    seen['network'] = 'unreachable'
seen['data'] = resource.getrlimit(resource.RLIMIT_DATA)[0]
try:  # /dev/shm is a small tmpfs of its own, not bwrap's unlimited one
    for name in ('fill1', 'fill2'):  # 80 MB in two files, each under the file-size limit
        with open('/dev/shm/' + name, 'wb') as file:
            for _ in range(40):
                file.write(b'x' * 1024**2)
    seen['shm'] = 'filled'
except OSError as error:
    seen['shm'] = error.strerror
seen['beside'] = os.listdir(os.path.dirname(sys.argv[1]))
seen['project'] = os.listdir(sys.argv[1])
print(json.dumps(seen))
"""


@pytest.mark.usefixtures("needs_sandbox")
def test_the_sandbox_shows_the_project_read_only_without_the_answer_key(tmp_path):
    limits = sandbox.Limits(memory_bytes=3 * 1024**3)
    command = sandbox.command(
        [sys.executable, "-c", PROBE, str(sandbox.LIBRARY_ROOT), str(sandbox.INSIDE)], tmp_path, limits=limits
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=sandbox.OUTSIDE_ENV)
    seen = json.loads(done.stdout)
    assert len(seen["proc"]) <= 3  # bwrap's init and the probe: no parent, no classmate
    assert seen["exercises"] == ["__init__.py", "base.py"]  # the chapters' modules (the key) are not there
    assert seen["lib"] == "Read-only file system" and seen["shared"] == "written" and seen["tmp"] == "written"
    assert (tmp_path / "x.txt").read_text() == "x" and not (ROOT / "lib" / "x.py").exists()
    assert seen["network"] == "unreachable" and seen["data"] == 3 * 1024**3
    assert seen["shm"] == "No space left on device"  # 80 MB past the 64 MB /dev/shm
    # nothing beside the project: no other checkout, no hand-in (a checkout under /tmp sits in
    # the sandbox's own /tmp, beside its shared folder, its home and the probe's file)
    own = {"x", sandbox.INSIDE.name, "home"} if ROOT.parent == Path("/tmp") else set()
    assert set(seen["beside"]) - own == {ROOT.name}
    assert set(seen["project"]) <= {"lib", "chapters", ".venv", ".cache"}  # no tests, no student/ folder
    # only what the command line sets (bwrap adds PWD, Python's locale coercion LC_CTYPE)
    allowed = {"PATH", "HOME", "PYTHONPATH", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR", "PYTHONDONTWRITEBYTECODE"}
    assert set(seen["env"]) <= allowed | {"PWD", "LC_CTYPE"}


def test_a_hand_in_is_copied_without_its_links_or_subfolders(tmp_path):
    folder = tmp_path / "ada"
    (folder / "sub").mkdir(parents=True)
    (folder / "ch.ipynb").write_text("{}")
    (folder / "classmate.ipynb").write_text("{}")  # a class handed in as one folder: not this notebook's
    (folder / "data.csv").write_text("1,2")
    (folder / "big.bin").write_bytes(b"x" * 2000)
    (folder / "link").symlink_to(tmp_path / "teacher.txt")
    left_out = sandbox.copy_hand_in(folder / "ch.ipynb", tmp_path / "copy", max_bytes=1000)
    assert sorted(path.name for path in (tmp_path / "copy").iterdir()) == ["ch.ipynb", "data.csv"]
    assert left_out == ["big.bin (the folder's files pass 0 MB)"]


def _grade(args: list[str], path_variable: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path_variable, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "lib.student", "grade", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


def test_without_bwrap_the_grader_refuses_unless_told_no_sandbox(tmp_path):
    path = write_notebook(tmp_path / "ada" / "ch.ipynb", SOLVED[0])
    no_bwrap = str(Path(sys.executable).parent)  # a PATH on which there is no bwrap
    refused = _grade([str(path)], no_bwrap)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "apt-get install bubblewrap" in refused.stderr and "no `bwrap` on the PATH" in refused.stderr
    assert "--no-sandbox grades anyway" in refused.stderr
    out = tmp_path / "grades.json"
    graded = _grade([str(path), "--no-sandbox", "--json", str(out), "--seed", "3"], no_bwrap)
    assert graded.returncode == 0, graded.stderr
    assert "graded WITHOUT a sandbox (--no-sandbox)" in graded.stdout
    row = json.loads(out.read_text())[0]
    assert row["exercises"] == {"1.equal-scores": "correct"} and row["seed"] == 3

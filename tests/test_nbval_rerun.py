"""tests/nbval_rerun.py: `make test` reruns, once, a notebook in which a cell timed out, and
says so; a notebook that fails otherwise is not rerun."""

import subprocess
import sys
from pathlib import Path

import nbformat
from nbval_rerun import rerun_arguments

ROOT = Path(__file__).parent.parent
TIMEOUT_S = 4  # a cell's limit here: the stalling cell sleeps far past it

# The first run of this cell sleeps past the cell timeout, as a stalled kernel would; the
# rerun finds the flag file and goes on.
STALLS_ONCE = """\
import pathlib, time
flag = pathlib.Path("first-run-done")
if not flag.exists():
    flag.touch()
    time.sleep(120)
"""


def write_notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def run_pytest(*paths: Path, workers: int = 0) -> subprocess.CompletedProcess:
    args = ["-p", "tests.nbval_rerun", "--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={TIMEOUT_S}"]
    if workers:  # as make test runs: pytest-xdist, a notebook's cells on one worker
        args += ["-n", str(workers), "--dist", "loadscope"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_notebook_that_timed_out_is_rerun_once_and_the_output_says_so(tmp_path):
    notebook = write_notebook(tmp_path / "stalls_once.ipynb", STALLS_ONCE, "print('after')")
    run = run_pytest(notebook, workers=1)
    assert f"Timeout of {TIMEOUT_S} seconds exceeded" in run.stdout
    assert f"nbval_rerun: a cell timed out in {notebook}" in run.stdout
    assert "rerunning once" in run.stdout
    assert f"nbval_rerun: the rerun of {notebook} passed" in run.stdout
    assert run.stdout.count("rerunning once") == 1
    assert run.returncode == 0, run.stdout


def test_no_rerun_when_something_else_failed(tmp_path):
    stalls = write_notebook(tmp_path / "stalls_once.ipynb", STALLS_ONCE)
    broken = write_notebook(tmp_path / "broken.ipynb", "1 / 0")
    run = run_pytest(stalls, broken)
    assert f"nbval_rerun: a cell timed out in {stalls}, but other tests failed too: no rerun" in run.stdout
    assert "rerunning once" not in run.stdout
    assert run.returncode == 1, run.stdout


def test_the_rerun_keeps_the_options_and_replaces_the_paths():
    args = [
        "tests",
        "chapters",
        "-m",
        "not browser",
        "--nbval-lax",
        "-p",
        "tests.nbval_rerun",
        "-p",
        "no:cacheprovider",
    ]
    assert rerun_arguments(args, ["chapters/08_x.ipynb"]) == [
        "-m",
        "not browser",
        "--nbval-lax",
        "-p",
        "no:cacheprovider",
        "chapters/08_x.ipynb",
    ]

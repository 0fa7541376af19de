"""lib.grading_process: each kernel gets its share of the cores, the process that runs a notebook
starts without torch, and an interrupted batch leaves no grading process or kernel behind."""

import os
import subprocess
import sys

from _notebooks import ROOT, SOLVED, sandboxed_processes, write_notebook

from lib import grading_process
from lib.batch_grading import grade_notebooks
from lib.grading_process import kernel_threads


def test_each_kernel_gets_its_share_of_the_cores():
    assert [kernel_threads(jobs, cores=2) for jobs in (1, 2, 3)] == [2, 1, 1]
    assert [kernel_threads(jobs, cores=16) for jobs in (1, 3, 16, 40)] == [16, 5, 1, 1]


def test_the_process_that_runs_a_notebook_does_not_load_torch():
    code = "import sys, lib.grading_process; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"


def _wait_for(condition, what: str, limit_s: float = 300.0) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.2)


def test_an_interrupted_batch_leaves_no_grading_process_or_kernel_behind(
    tmp_path, monkeypatch, sandbox_owner, needs_sandbox
):
    """What Ctrl-C does (grade_notebooks calls stop_grading on any interrupt): the grading
    processes sit in sessions of their own, so the terminal's signal would not reach them.
    Without a sandbox the kernel's process group is stopped; with one, the sandbox ends and
    everything in it with it."""
    import tempfile
    import threading

    monkeypatch.setattr(tempfile, "tempdir", str(sandbox_owner))  # the grader's folders, so its sandboxes are known
    for sandboxed in (True, False):
        path = write_notebook(tmp_path / str(sandboxed) / "ch.ipynb", SOLVED[0], "while True:\n    pass")
        reports = []
        batch = threading.Thread(
            target=lambda path=path, sandboxed=sandboxed, reports=reports: reports.extend(
                grade_notebooks([path], 600, jobs=1, sandboxed=sandboxed)
            )
        )
        batch.start()

        def looping() -> list[dict]:
            running = list(grading_process._RUNNING.values())
            events = grading_process._read_events(running[0][0]) if running else []
            return events if any(event.get("start") == 3 for event in events) else []

        _wait_for(looping, "the loop's cell start")
        kernel = next(event for event in looping() if "kernel" in event)
        inside = sandboxed_processes(sandbox_owner)
        assert bool(inside) == sandboxed
        grading_process.stop_grading()
        batch.join()
        assert reports[0].problems == ["grading process killed by SIGKILL in cell 4"]
        assert reports[0].exercises == {"1.equal-scores": "correct"}

        def gone(pgid: int) -> bool:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return True
            return False

        if sandboxed:
            _wait_for(lambda: not sandboxed_processes(sandbox_owner), "the sandbox's processes end")
        else:
            _wait_for(lambda kernel=kernel: gone(kernel["pgid"]), "the kernel's process group end")
        assert (
            grading_process._RUNNING == {} and not grading_process._STOPPING.is_set()
        )  # the next batch grades as usual


def test_events_left_as_a_fifo_or_a_link_do_not_stall_the_grader(tmp_path):
    import os

    from lib.grading_process import _read_events

    os.mkfifo(tmp_path / "events.jsonl")  # a notebook replaced its events file with a FIFO
    assert _read_events(tmp_path / "events.jsonl") == []
    (tmp_path / "elsewhere.jsonl").write_text('{"finished": true}\n')
    (tmp_path / "linked.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    assert _read_events(tmp_path / "linked.jsonl") == []
    assert _read_events(tmp_path / "elsewhere.jsonl") == [{"finished": True}]

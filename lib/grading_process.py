"""The grading process: one notebook run in a kernel of its own, sandboxed and supervised (for ``lib.batch_grading``).

Nothing a notebook does may stop the batch it is graded in, or reach beyond its own run: an
endless loop, a kernel that dies, ``exit()``, a cell that kills its parent process, one that
deletes a classmate's hand-in. So each notebook runs in a process of its own (``run_cells``),
in a bubblewrap sandbox (``lib.sandbox``) on a private copy of its folder, which writes what
happens to an events file as it happens, one JSON object a line: the kernel's process, each
cell as it starts and its outputs once it ran, why the run stopped. The supervisor
(``supervise``) waits for it (the time limit plus a margin at most), reads how far it got even
when the process was killed, names what went wrong ("grading process killed by SIGKILL in cell
5"), and takes the answers ``check()`` recorded (``lib.answer_records``) as data. When the
sandbox ends, everything it started ends with it. The kernel is the grader's own Python,
whatever kernelspec the notebook names, and imports this checkout's ``lib`` first.
``stop_grading`` ends every grading process running now (what Ctrl-C does).

This module imports neither torch nor ``lib.checks``, so the process starts in a second less.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from lib import sandbox
from lib.answer_records import KINDS_FILE, RECORD_ENV, read_plain, read_records

__all__ = ["DEFAULT_TIME_LIMIT_S", "OUTPUT_LIMIT", "run_cells", "supervise", "stop_grading", "allow_grading"]
__all__ += ["kernel_threads", "available_cores"]

DEFAULT_TIME_LIMIT_S = 180.0  # per notebook: a chapter runs in well under a minute
# Bytes of a notebook's outputs kept (all cells together, as JSON): a cell whose outputs would
# pass them is written to the events without its outputs, marked "cut", inside the sandbox, so
# that a 50 MB print never reaches the grader's memory, the feedback folder or the events file.
OUTPUT_LIMIT = 10 * 1024**2
# The grading process gets this long beyond the time limit (to start, then to stop, its
# kernel on a busy machine) before its supervisor stops it.
_SUPERVISOR_MARGIN_S = 60.0
_GRADER_KERNEL = "lib-student-grader"
# The process that runs one notebook imports this module alone, without lib.checks (and torch
# with it): it starts in about a second less, once per notebook.
_WORKER = "import sys; from lib.grading_process import run_cells; raise SystemExit(run_cells(*sys.argv[1:]))"
_LIBRARY_ROOT = sandbox.LIBRARY_ROOT


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def kernel_threads(jobs: int, cores: int | None = None) -> int:
    """Threads for each kernel when ``jobs`` run at once: the cores shared out, at least one,
    so that two kernels on two cores do not each start two threads and wait on each other."""
    return max(1, (cores or available_cores()) // jobs)


def run_cells(notebook_path: str, events_path: str, workdir: str, time_limit: str, kernel_name: str, spec_dir: str):
    """Run a notebook's code cells in order in a fresh kernel, in ``workdir``, and write what
    happens to ``events_path`` as it happens, one JSON object a line: the kernel's process
    ({"kernel": pid, "pgid": ...}), each cell as it starts ({"start": index}) and its outputs
    once it ran ({"ran": index, ...}), why the run stopped ({"problem": ...}), and
    {"finished": true}. The supervisor reads how far it got even if the notebook kills this
    process. Runs in its own process (``supervise`` starts it); returns the exit status."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    limit = float(time_limit)
    notebook = nbformat.read(notebook_path, as_version=4)
    exited: list[int] = []  # cells that called exit(): IPython then shuts the kernel down, a moment later
    requests: dict[int, str] = {}  # cell index -> the id of the request that ran it (check() signs it)

    def on_cell_executed(cell, cell_index: int, execute_reply: dict) -> None:
        requests[cell_index] = str((execute_reply or {}).get("parent_header", {}).get("msg_id", ""))
        payloads = (execute_reply or {}).get("content", {}).get("payload", [])
        if any(p.get("source") == "ask_exit" and not p.get("keepkernel") for p in payloads):
            exited.append(cell_index)

    options = {
        "timeout": max(1, int(limit)),
        "allow_errors": True,
        "interrupt_on_timeout": False,
        "record_timing": False,
        "shutdown_kernel": "immediate",
        "on_cell_executed": on_cell_executed,
        "resources": {"metadata": {"path": workdir}},
    }
    if kernel_name:
        client = NotebookClient(notebook, kernel_name=kernel_name, **options)
    else:  # the grader's own Python, whatever kernel the notebook was saved with
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager

        specs = KernelSpecManager(kernel_dirs=[spec_dir], ensure_native_kernel=False)
        client = NotebookClient(
            notebook, km=AsyncKernelManager(kernel_name=_GRADER_KERNEL, kernel_spec_manager=specs), **options
        )
    with open(events_path, "a", encoding="utf-8") as events:

        def emit(**event) -> None:
            events.write(json.dumps(event) + "\n")
            events.flush()

        def timed_out(number: int) -> None:
            emit(problem=f"timed out in cell {number} ({limit:g} s for the notebook)")

        try:
            with client.setup_kernel():
                provisioner = getattr(client.km, "provisioner", None)
                emit(kernel=getattr(provisioner, "pid", None), pgid=getattr(provisioner, "pgid", None))
                start = time.monotonic()  # the limit is the cells' time: a slow kernel start costs the learner nothing
                kept = 0  # bytes of outputs written so far (OUTPUT_LIMIT)
                for index, cell in enumerate(notebook.cells):
                    if cell.cell_type != "code":
                        continue
                    number = index + 1
                    remaining = limit - (time.monotonic() - start)
                    if remaining <= 0:
                        timed_out(number)
                        break
                    client.timeout = max(1, int(remaining + 0.999))
                    emit(start=index)
                    stop = None
                    try:
                        client.execute_cell(cell, index)
                    except CellTimeoutError:
                        stop = f"timed out in cell {number} ({limit:g} s for the notebook)"
                    except DeadKernelError:
                        stop = f"kernel died in cell {number}"
                    if exited and stop is None:  # stop here, as Jupyter would: what ran after it depended on timing
                        stop = f"kernel stopped by exit() in cell {number}"
                    outputs = cell.get("outputs", [])
                    size = len(json.dumps(outputs))
                    cut = kept + size > OUTPUT_LIMIT
                    kept += 0 if cut else size
                    emit(
                        ran=index,
                        request=requests.get(index, ""),
                        execution_count=cell.get("execution_count"),
                        outputs=[] if cut else outputs,
                        **({"cut": size} if cut else {}),
                    )
                    cell.outputs = []  # written: this process need not hold a large output any longer
                    if stop:
                        emit(problem=stop)
                        break
        except DeadKernelError:
            emit(problem="kernel died")
        except Exception as error:  # e.g. the kernel would not start: that notebook's line says why
            emit(problem=f"could not run the notebook ({type(error).__name__}: {error})"[:200])
        emit(finished=True)
    return 0


def _write_grader_kernel(spec_dir: Path) -> None:
    """A kernelspec for the grader's own Python. Its kernel imports this checkout's lib first
    (so a notebook's folder cannot bring another), and lib.checks with it, which takes the
    run's key from the environment before the first cell runs."""
    setup = f"import sys; sys.path.insert(0, {str(_LIBRARY_ROOT)!r}); import lib.checks"
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", f"--IPKernelApp.exec_lines={setup}"]
    folder = spec_dir / _GRADER_KERNEL
    folder.mkdir(parents=True)
    spec = {"argv": argv, "display_name": "Python (lib.student grader)", "language": "python"}
    (folder / "kernel.json").write_text(json.dumps(spec))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# The grading processes running now (pid -> its events file), so that an interrupted batch
# (Ctrl-C) stops them and their kernels, which sit in sessions of their own and do not get it.
_RUNNING: dict[int, tuple[Path, bool]] = {}  # pid -> (its events file, whether it is sandboxed)
_RUNNING_LOCK = threading.Lock()
_STOPPING = threading.Event()


def _read_events(path: Path) -> list[dict]:
    events = []
    try:  # the sandbox may have put a link or a FIFO there: neither is followed or waited on
        lines = read_plain(path, 256 * 1024**2, whole=False).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:  # a line cut off when the process was killed
            continue
    return events


def allow_grading() -> None:
    """Let grading processes start again once an interrupted batch has ended."""
    _STOPPING.clear()


def stop_grading() -> None:
    """Stop every grading process that is running, and its kernel, and start no more
    until the batch running now has ended (``grade_notebooks`` calls this when it is
    interrupted)."""
    with _RUNNING_LOCK:
        _STOPPING.set()
        running = dict(_RUNNING)
    for pid, (events_path, sandboxed) in running.items():
        _kill_group(pid)  # a sandbox ends with its bwrap, and all it started with it
        if not sandboxed:  # a process number read from a sandbox's events means nothing outside it
            for event in _read_events(events_path):
                if "kernel" in event:
                    _kill_group(event.get("pgid"))


def _kill_group(pgid: int | None) -> None:
    if pgid and hasattr(os, "killpg"):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _command(argv: list[str], shared: Path, env: dict[str, str], sandboxed: bool, limits: sandbox.Limits):
    """(command, environment): ``argv`` run in a sandbox that sees ``shared`` as ``sandbox.INSIDE``,
    or, when not ``sandboxed``, as it is."""
    if not sandboxed:
        return argv, {**sandbox.no_sandbox_environment(), **env}
    from lib.trained import CACHE_DIR  # trained models, built before grading, shown read-only

    inside = [arg.replace(str(shared), str(sandbox.INSIDE)) for arg in argv]
    env = {name: value.replace(str(shared), str(sandbox.INSIDE)) for name, value in env.items()}
    env |= {"BOOK_CACHE_DIR": str(CACHE_DIR)} if "BOOK_CACHE_DIR" in os.environ else {}
    command = sandbox.command(inside, shared, env=env, cwd=sandbox.INSIDE / "handin", limits=limits, trained=CACHE_DIR)
    return command, dict(sandbox.OUTSIDE_ENV)


def supervise(
    notebook: nbformat.NotebookNode,
    notebook_path: Path,
    time_limit: float,
    kernel_name: str | None,
    threads: int | None,
    kinds: dict[str, str],
    *,
    sandboxed: bool = True,
    limits: sandbox.Limits | None = None,
) -> tuple[list[dict], list[str], list[dict]]:
    """Run the notebook in a grading process of its own, in a sandbox unless ``sandboxed`` is
    False, on a private copy of its folder (``sandbox.copy_hand_in``), and wait for it (the time
    limit plus a margin at most). ``kinds`` (each exercise's id and kind) tells check() what to
    record. Returns the events, what went wrong with the process itself, and the answers
    check() recorded (``lib.answer_records.read_records``: data, nothing of it run)."""
    limits = limits or sandbox.Limits()
    with tempfile.TemporaryDirectory(prefix="lib-student-") as tmp:
        shared = Path(tmp) / "shared"
        problems = [
            f"not copied for grading: {item}" for item in sandbox.copy_hand_in(notebook_path, shared / "handin")
        ]
        (shared / "answers").mkdir()
        (shared / "answers" / KINDS_FILE).write_text(json.dumps(kinds))
        source, events_path, log_path = shared / "notebook.ipynb", shared / "events.jsonl", Path(tmp) / "log.txt"
        nbformat.write(notebook, source)
        events_path.touch()
        _write_grader_kernel(shared / "kernels")
        argv = [sys.executable, "-c", _WORKER, str(source), str(events_path), str(shared / "handin")]
        argv += [repr(float(time_limit)), kernel_name or "", str(shared / "kernels")]
        env = {RECORD_ENV: str(shared / "answers"), **sandbox.environment_for_threads(threads)}
        command, env = _command(argv, shared, env, sandboxed, limits)
        overran = False
        with open(log_path, "wb") as log, _RUNNING_LOCK:
            if _STOPPING.is_set():
                raise RuntimeError("grading was interrupted")
            worker = subprocess.Popen(
                command, cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            _RUNNING[worker.pid] = (events_path, sandboxed)
        try:
            status = worker.wait(timeout=time_limit + _SUPERVISOR_MARGIN_S)
        except subprocess.TimeoutExpired:  # stopped, or stuck: the notebook had its time
            _kill_group(worker.pid)
            status, overran = worker.wait(), True
        finally:
            with _RUNNING_LOCK:
                _RUNNING.pop(worker.pid, None)
        if sandboxed and status > 128:  # bwrap exits 128 + N when its command was killed by signal N
            status = 128 - status
        events = _read_events(events_path)
        if not sandboxed:  # the kernel, and whatever the notebook started, is gone when grading is
            _kill_group(worker.pid)  # (in a sandbox, all of it ended with the sandbox)
            _kill_group(next((event for event in events if "kernel" in event), {}).get("pgid"))
        records = read_records(shared / "answers")
        log_tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
    if not any(event.get("finished") for event in events):
        started = [event["start"] for event in events if isinstance(event.get("start"), int)]
        where = f" in cell {started[-1] + 1}" if started else ""
        if overran:
            problems.append(f"timed out{where} (grading stopped after {time_limit + _SUPERVISOR_MARGIN_S:g} s)")
        elif status < 0:
            problems.append(f"grading process killed by {_signal_name(-status)}{where}")
        else:
            detail = f": {log_tail[0]}" if log_tail else ""
            problems.append(f"grading process failed{where} (exit status {status}){detail}"[:200])
    return events, problems, records

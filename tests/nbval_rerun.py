"""A pytest plugin for `make test`: a notebook in which a cell timed out is run once more.

A notebook run was seen to stall: the kernel idle, the client waiting for a message that
never came (ipykernel 7 has lost shell messages before: ipykernel#1529, #1554). A stall is
not the notebook's fault, so when nbval reports a timeout in a notebook, and nothing else
failed, that notebook is run once more in a fresh pytest and kernel, after the first run's
summary, and the output says so. The rerun's result is final: a second timeout fails. Any
other failure fails at once, with no rerun.

    python -m pytest -p tests.nbval_rerun tests chapters --nbval-lax --nbval-cell-timeout=300 ...

Under pytest-xdist (``-n 2``, as ``make test`` runs) the workers report to the controller,
and only the controller reruns.

The rerun keeps every argument that is not a path and replaces the paths by the notebooks
that timed out.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

TIMEOUT_MARK = "Timeout of"  # how each of nbval's timeout errors begins (nbval/plugin.py)
PLUGIN_NAMES = ("tests.nbval_rerun", "nbval_rerun")  # how -p names this module

timed_out: list[str] = []  # the notebooks with a cell that timed out, relative to the rootdir
other_failures: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.failed:
        return
    path = report.nodeid.partition("::")[0]
    if path.endswith(".ipynb") and TIMEOUT_MARK in str(report.longrepr):
        if path not in timed_out:
            timed_out.append(path)
    else:
        other_failures.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        other_failures.append(report.nodeid)


def rerun_arguments(args: list[str], notebooks: list[str]) -> list[str]:
    """The first run's arguments less its paths and this plugin, then the notebooks."""
    kept, words = [], iter(args)
    for arg in words:
        if arg == "-p":
            name = next(words, "")
            if name not in PLUGIN_NAMES:
                kept += ["-p", name]
        elif arg.removeprefix("-p") not in PLUGIN_NAMES and not Path(arg.partition("::")[0]).exists():
            kept.append(arg)
    return kept + notebooks


def _from_here(path: Path) -> str:
    """A node id's path (relative to pytest's rootdir) as the working directory reaches it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None]:
    result = yield  # the first run's summary is printed by now
    if exitstatus == 0 or not timed_out or hasattr(session.config, "workerinput"):
        return result  # under pytest-xdist only the controller, which sees every report, reruns
    notebooks = [_from_here(session.config.rootpath / path) for path in timed_out]
    names = ", ".join(notebooks)
    if other_failures:
        print(f"\nnbval_rerun: a cell timed out in {names}, but other tests failed too: no rerun", flush=True)
        return result
    print(f"\nnbval_rerun: a cell timed out in {names} (a stalled kernel?); rerunning once, in a new kernel")
    sys.stdout.flush()
    args = rerun_arguments(list(session.config.invocation_params.args), notebooks)
    rerun = subprocess.run([sys.executable, "-m", "pytest", *args], check=False)
    print(f"nbval_rerun: the rerun of {names} {'passed' if rerun.returncode == 0 else 'failed again'}", flush=True)
    session.exitstatus = rerun.returncode
    return result

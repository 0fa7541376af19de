"""The sandbox each graded notebook runs in: bubblewrap on Linux (used by ``lib.grading_process``).

A notebook a student hands in is code, and the grader runs it. Under ``bwrap`` (the sandbox
Flatpak uses; Debian's package ``bubblewrap``) it sees this::

    /usr, the Python and its environment      read-only (the interpreter, torch, Jupyter)
    <project>/lib                             read-only, with lib/exercises emptied to its
                                              __init__.py and base.py: no answer key inside
    <project>/chapters/results, .cache/trained read-only, when they exist (measured tables,
                                              trained models the chapters load)
    /tmp                                      private and small (a tmpfs)
    /tmp/grading                              the one folder shared with the grader: the
                                              hand-in's private copy, the events, the answers

and nothing else: no other hand-in, no teacher file, no network (a loopback of its own), its
own process numbers (``/proc`` shows the sandbox's processes only: no parent to kill, no
classmate's kernel, no environment to read), an empty environment but for what ``command``
sets. ``--die-with-parent`` and the PID namespace end everything it started when it ends,
``setsid`` children included. Limits (``Limits``) are set on the process before ``bwrap``
starts: memory as a data-segment limit (an address-space limit breaks importing torch's CUDA
build), the size of any file written, processes (which the kernel does not enforce for root:
there the PID namespace and the time limit are what stop a fork bomb), and no core dumps.

``available()`` says whether ``bwrap`` runs here, and if not, why; ``command`` builds the
command line. Graded with ``--no-sandbox``, a notebook runs as the teacher, exposed to all of
the above (README: the threat model).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "available", "command", "INSIDE", "LIBRARY_ROOT", "UNAVAILABLE_HELP", "OUTSIDE_ENV"]

LIBRARY_ROOT = Path(__file__).resolve().parent.parent  # the folder that holds `lib`
INSIDE = Path("/tmp/grading")  # where the shared folder is seen inside the sandbox
UNAVAILABLE_HELP = (
    "grading runs each notebook in a bubblewrap sandbox (Debian/Ubuntu: apt-get install bubblewrap), "
    "and {why}; --no-sandbox grades anyway, with every notebook running as you, able to read and "
    "change your files, other hand-ins and its own grade (README: the threat model)"
)
# The environment bwrap itself starts with: the sandbox's first process keeps bwrap's initial
# environment in /proc/1/environ, readable inside, so the grader's own never reaches it.
OUTSIDE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# What the sandbox may keep of the exercises package: the registry and the shapes of an
# exercise, none of the chapters' modules (expected values, known mistakes, hidden cases).
_EXERCISES_KEPT = ("__init__.py", "base.py")


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use: memory (bytes of data segment a process), the size of any
    one file it writes, processes, and the size of its private /tmp."""

    memory_bytes: int = 2 * 1024**3
    file_bytes: int = 64 * 1024**2
    processes: int = 1024  # threads count too (torch starts one a core), and, outside root, the user's others
    tmp_bytes: int = 256 * 1024**2
    shm_bytes: int = 64 * 1024**2


@functools.cache
def available() -> tuple[bool, str]:
    """(True, "") when ``bwrap`` can start a sandbox here; else (False, why not)."""
    if not sys.platform.startswith("linux"):
        return False, f"bubblewrap runs on Linux only, and this is {sys.platform}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False, "no `bwrap` on the PATH"
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"`bwrap` would not start ({type(error).__name__}: {error})"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return False, f"`bwrap` cannot make a sandbox here ({reason}; are user namespaces disabled?)"
    return True, ""


def _python_roots() -> list[Path]:
    """The interpreter's folders: the environment and, for a venv, the Python it links to."""
    roots = []
    for prefix in (sys.prefix, sys.base_prefix):
        path = Path(prefix).resolve()
        if not any(path == root or root in path.parents for root in [Path("/usr"), *roots]):
            roots.append(path)
    return roots


def _read_only(*paths: Path) -> list[str]:
    return [arg for path in paths if path.exists() for arg in ("--ro-bind", str(path), str(path))]


def command(
    argv: Sequence[str],
    shared: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path = INSIDE,
    limits: Limits = Limits(),
    trained: Path | None = None,
) -> list[str]:
    """The command line that runs ``argv`` in a sandbox: ``shared`` (the grader's folder for
    this notebook) is the one writable place, seen as ``INSIDE``; ``env`` is the whole
    environment (PATH, PYTHONPATH and HOME are set here); ``trained`` is a cache of trained
    models to show read-only. The limits are set by a small Python step before ``bwrap``."""
    lib = LIBRARY_ROOT / "lib"
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if Path(f"/{name}").is_symlink():
            args += ["--symlink", f"usr/{name}", f"/{name}"]
        elif Path(f"/{name}").is_dir():
            args += ["--ro-bind", f"/{name}", f"/{name}"]
    args += _read_only(Path("/etc/ld.so.cache"), Path("/etc/localtime"))
    args += ["--dev", "/dev", "--proc", "/proc", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    args += ["--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"]  # --dev's own /dev/shm has no size
    args += _read_only(*_python_roots(), lib)
    args += ["--tmpfs", str(lib / "exercises")]  # the answer key stays outside ...
    args += _read_only(*(lib / "exercises" / name for name in _EXERCISES_KEPT))  # ... its shapes come in
    args += ["--remount-ro", str(lib / "exercises")]
    args += _read_only(LIBRARY_ROOT / "chapters" / "results")
    if trained is not None:
        args += _read_only(trained)
    args += ["--dir", "/tmp/home", "--bind", str(shared), str(INSIDE), "--remount-ro", "/"]
    args += ["--unshare-all", "--die-with-parent", "--new-session", "--chdir", str(cwd), "--clearenv"]
    environment = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/tmp/home"}
    environment |= {"PYTHONPATH": str(LIBRARY_ROOT), "JUPYTER_RUNTIME_DIR": "/tmp/home/runtime"}
    environment |= {"MPLCONFIGDIR": "/tmp/home/matplotlib", "PYTHONDONTWRITEBYTECODE": "1"}
    for name, value in {**environment, **(env or {})}.items():
        args += ["--setenv", name, value]
    bwrap = shutil.which("bwrap") or "bwrap"
    return [sys.executable, "-S", "-c", _LIMITED, *map(str, _limit_values(limits)), bwrap, *args, "--", *argv]


# Set the limits, then become bwrap: the limits hold for everything the sandbox starts.
_LIMITED = (
    "import os, resource as r, sys\n"
    "data, size, procs = map(int, sys.argv[1:4])\n"
    "for limit, value in zip((r.RLIMIT_DATA, r.RLIMIT_FSIZE, r.RLIMIT_NPROC, r.RLIMIT_CORE), (data, size, procs, 0)):\n"
    "    r.setrlimit(limit, (value, value))\n"
    "os.execv(sys.argv[4], sys.argv[4:])\n"
)


def _limit_values(limits: Limits) -> tuple[int, int, int]:
    return limits.memory_bytes, limits.file_bytes, limits.processes


def copy_hand_in(notebook_path: Path, folder: Path, max_bytes: int = 100 * 1024**2) -> list[str]:
    """Copy the notebook and the regular files beside it (its data; not other notebooks, which
    may be classmates' in a class handed in as one folder, nor subfolders or links) into
    ``folder``, up to ``max_bytes`` in all; returns what was left out and why."""
    left_out = []
    total = 0
    folder.mkdir(parents=True, exist_ok=True)
    notebook_path = Path(notebook_path)
    for path in sorted(notebook_path.parent.iterdir()):
        if path.is_symlink() or not path.is_file() or (path.suffix == ".ipynb" and path.name != notebook_path.name):
            continue
        size = path.stat().st_size
        if total + size > max_bytes and path.name != notebook_path.name:
            left_out.append(f"{path.name} (the folder's files pass {max_bytes // 1024**2} MB)")
            continue
        shutil.copyfile(path, folder / path.name, follow_symlinks=False)
        total += size
    return left_out


def environment_for_threads(threads: int | None) -> dict[str, str]:
    """The thread counts a kernel is given (OpenMP, MKL, OpenBLAS), when ``threads`` says."""
    if not threads:
        return {}
    return dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), str(threads))


def no_sandbox_environment() -> dict[str, str]:
    """Without a sandbox: the grader's own environment, with this checkout's lib first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(LIBRARY_ROOT), os.environ.get("PYTHONPATH")]))
    return env

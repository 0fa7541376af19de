"""What a learner's function runs, watched while it runs: the routes a reading of its code cannot see.

This is ``check()``'s watch, in the learner's own kernel: feedback, which a student who reads this can
switch off (a fourth hostile batch did). The teacher's grader does not rely on it: it runs each function
in a child process sealed before the function is loaded (``lib.sealed_run``, ``lib.hidden_runs``).

``lib.code_policy`` reads a function exercise's answer before it runs, and ``lib.safe_call.forbid_calls``
swaps the forbidden callables for refusing ones at the places they live. A hostile batch (issue 30)
reached them another way: torch's softmax under another of its names (``torch._C._VariableFunctions``,
``TensorBase``'s own descriptor, an operator handle built at run time, ``torch._C._nn``), the library's
code run afresh (``exec`` of its source, ``importlib.reload``, ``types.FunctionType`` over a code object
held as a default argument), all written with names built from strings. ``watch_calls`` sees what runs:

* torch: a function mode refuses a call to a forbidden torch callable whatever it is reached by (the
  object itself, compared by identity, or an operator's name, ``aten::_softmax``), from the learner's
  code or from torch's own Python (``F.multi_head_attention_forward`` calling softmax). A dispatch mode
  would also see the kernels torch's C++ composites call, but its first use imports some 900 modules
  (2 s of each grading process): the exercises forbid those composites by name instead;
* Python: a profile hook refuses running the code of a forbidden library function (its own code object,
  or code with its fingerprint: its source compiled again), the learner's calls that would switch the
  watch off (``sys.setprofile``, torch's mode stacks; torch's own use of them is its business), and any
  call in a thread the learner started;
* an audit hook refuses, while a watch is on, ``exec``, ``compile`` and building code or functions from
  bytes when the learner's code asks for them, re-running a library module that is loaded already,
  writing any file (a hostile function wrote another function's results), reaching the grader's frames
  (``sys._getframe``, a traceback's ``tb_frame``), and starting processes or loading native code.

Each refusal raises ``ForbiddenCall`` and is recorded in the ``fired`` list, which a learner's
``except`` cannot unrecord. The audit hook stays installed for the process (Python cannot remove one) and
does nothing while no watch is on.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from lib.code_policy import fingerprint, library_file
from lib.safe_call import ForbiddenCall, GradingTimeout

__all__ = ["watch_calls", "Watch"]

# Calls that would switch the watch off: torch's mode stacks, and Python's own hooks.
_SWITCHES = {
    "_pop_torch_function_stack", "_push_on_torch_function_stack", "_set_torch_function_mode",
    "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode",
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch", "_disable_current_modes",
    "_pop_mode", "_pop_mode_temporarily", "setprofile", "settrace", "_DisablePythonDispatcher",
}  # fmt: skip
# Audit events refused whenever a watch is on: the learner's code may not start processes or load C.
_ALWAYS = ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen",
           "ctypes.", "sys.setprofile", "sys.settrace", "sys.addaudithook", "gc.get_")  # fmt: skip
# Audit events refused when the learner's own code asks for them: running or building code.
_FROM_LEARNER = ("exec", "compile", "code.__new__", "marshal.loads", "marshal.load", "function.__new__")


# Audit events that reach the frames of the grader below the learner's call (its results, its record).
_FRAMES = ("sys._getframe", "sys._current_frames", "object.__getattr__")
_FRAME_LINKS = {"tb_frame", "f_back", "gi_frame", "cr_frame", "ag_frame", "f_locals", "f_globals"}


def _writes(args: tuple) -> bool:
    """Whether an "open" audit event's (path, mode, flags) asks to write."""
    mode, flags = (args + (None, None))[1:3]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND))


def _never_names() -> dict[int, str]:
    """Callables no function exercise needs, refused whatever the exercise: writing files by routes that
    raise no "open" audit event (a hostile function forged another's results through torch.from_file's
    shared mapping), starting threads or processes (they get none of the watch), and leaving code to run
    after the watch (atexit, signal handlers)."""
    import _posixsubprocess
    import _thread
    import atexit
    import mmap
    import signal

    import numpy

    found = {}
    for owner, names in (
        (os, ("write", "pwrite", "writev", "rename", "replace", "symlink", "link", "remove", "unlink", "truncate",
              "ftruncate", "mkfifo", "mknod", "posix_fallocate", "sendfile", "dup2", "fork", "kill", "killpg")),
        (_thread, ("start_new_thread", "start_new", "start_joinable_thread")),
        (_posixsubprocess, ("fork_exec",)),  # a child process, under no watch (a third hostile batch)
        (os, ("posix_spawn", "posix_spawnp", "execv", "execve", "system")),
        (atexit, ("register",)),  # code that would run after the last watch
        (signal, ("signal", "set_wakeup_fd", "setitimer")),
        (mmap, ("mmap",)),
        (torch, ("from_file", "save")),
        (torch.UntypedStorage, ("from_file",)),
        (numpy, ("save", "savez", "savetxt", "memmap", "fromfile", "tofile")),
    ):  # fmt: skip
        for name in names:
            value = getattr(owner, name, None)
            if value is not None:
                found[id(value)] = f"{getattr(owner, '__name__', owner)}.{name}"
    return found


_NEVER: dict[int, str] = {}


class Watch:
    """The forbidden callables of one exercise, read once: build it before ``forbid_calls`` swaps them."""

    def __init__(self, forbidden: Sequence[tuple[Any, str]]):
        self.objects: dict[int, tuple[Any, str]] = {}  # id -> (object, dotted name)
        self.ops: dict[str, str] = {}  # "aten::_softmax" -> dotted name
        self.codes: dict[int, tuple[types.CodeType, str]] = {}
        self.prints: dict[tuple, str] = {}
        for obj, name in forbidden:
            self.objects[id(obj)] = (obj, name)
            op = _op_name(obj)
            if op:
                self.ops[op] = name
            for code in _codes_of(obj):
                self.codes[id(code)] = (code, name)
                self.prints.setdefault(fingerprint(code), name)

    def name_of(self, func: Any) -> str | None:
        entry = self.objects.get(id(func))
        if entry is not None and entry[0] is func:
            return entry[1]
        op = _op_name(func)
        return self.ops.get(op) if op else None


def _op_name(obj: Any) -> str | None:
    """'aten::_softmax' for torch.ops.aten._softmax (the packet or any of its overloads)."""
    if isinstance(obj, torch._ops.OpOverloadPacket):
        return obj._qualified_op_name
    if isinstance(obj, torch._ops.OpOverload):
        return obj._schema.name
    return None


def _codes_of(obj: Any) -> list[types.CodeType]:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        return [obj.__code__]
    if isinstance(obj, type):  # a forbidden class: every function defined in it
        return [v.__code__ for v in vars(obj).values() if isinstance(v, types.FunctionType)]
    return []


_ACTIVE: list[tuple[Watch, list[str], int]] = []  # the watch on now, its record and its thread
_HOOKED = [False]
_LEARNER_FILES: dict[str, bool] = {}


def _learner_file(filename: str) -> bool:
    """Code written in the notebook (not the library's, the standard library's or a package's)."""
    known = _LEARNER_FILES.get(filename)
    if known is None:
        known = _LEARNER_FILES[filename] = library_file(filename) is None
    return known


def _refuse(fired: Any, what: str) -> None:
    """Record the refusal (in the list, or through its append) and raise it."""
    _REFUSALS[0] += 1
    (fired if callable(fired) else fired.append)(what)
    raise ForbiddenCall(what)


_REFUSALS = [0]  # every refusal counted: a record found emptier than this count was emptied


def _audit(event: str, args: tuple) -> None:
    if not _ACTIVE or _IN_AUDIT[0]:  # (the hook's own sys._getframe raises an event too)
        return
    _IN_AUDIT[0] = True
    try:
        _judge_event(event, args, _ACTIVE[-1][1])
    finally:
        _IN_AUDIT[0] = False


_IN_AUDIT = [False]


def _judge_event(event: str, args: tuple, fired: list[str]) -> None:
    if event.startswith(_ALWAYS):
        _refuse(fired, f"{event} (the watch on your function's calls)")
    if event == "open" and _writes(args):
        _refuse(fired, f"writing {args[0]!r} (a function answers by what it returns)")
    if event in _FRAMES and (event != "object.__getattr__" or args[1] in _FRAME_LINKS):
        callers = (sys._getframe(1), sys._getframe(2))
        if any(frame is not None and _learner_file(frame.f_code.co_filename) for frame in callers):
            _refuse(fired, f"{event} (reading the grader's frames)")
    if event in _FROM_LEARNER:
        caller = sys._getframe(1)
        if _learner_file(caller.f_code.co_filename):
            _refuse(fired, f"{event} (running code your function does not show)")
        if event == "exec" and args and isinstance(args[0], types.CodeType):
            filename = args[0].co_filename
            shown = library_file(filename) or ""
            loaded = any(getattr(m, "__file__", None) == filename for m in list(sys.modules.values()))
            if shown.startswith("lib/") and loaded:
                _refuse(fired, f"{shown} run again (a reloaded library module)")


class _TorchCalls(TorchFunctionMode):
    def __init__(self, watch: Watch, fired: list[str]):
        super().__init__()
        self.watch, self.fired = watch, fired
        self.intact = None  # set once the profile is on: the two check each other

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        name = self.watch.name_of(func) or _NEVER.get(id(func))
        if name is not None:
            _refuse(self.fired, name)
        if self.intact is not None and not self.intact():
            _refuse(self.fired, _TAMPERED)
        return func(*args, **(kwargs or {}))


def _profiler(watch: Watch, fired: list[str], thread: int, on: list[bool], intact):
    seen: dict[int, str | None] = {}

    def profile(frame, event, arg):
        if not on[0]:
            return
        if event == "c_call" and not intact():
            _refuse(fired, _TAMPERED)
        if threading.get_ident() != thread:
            _refuse(fired, "a thread your function started")
        if event == "c_call":
            name = watch.name_of(arg) or _NEVER.get(id(arg))
            if name is not None:
                _refuse(fired, name)
            if getattr(arg, "__name__", None) in _SWITCHES and _learner_file(frame.f_code.co_filename):
                _refuse(fired, f"{arg.__name__} (it would switch off the watch on your function's calls)")
        elif event == "call":
            code = frame.f_code
            caller = frame.f_back
            if code.co_name in _SWITCHES and caller is not None and _learner_file(caller.f_code.co_filename):
                _refuse(fired, f"{code.co_name} (it would switch off the watch on your function's calls)")
            key = id(code)
            if key not in seen:
                entry = watch.codes.get(key)
                name = entry[1] if entry is not None and entry[0] is code else None
                if name is None and (_learner_file(code.co_filename) or code.co_filename.startswith("<")):
                    name = watch.prints.get(fingerprint(code))
                shown = library_file(code.co_filename) or ""
                if name is None and shown.startswith("lib/"):  # the library's file, compiled again
                    name = next((n for c, n in watch.codes.values() if _same_place(c, code)), None)
                seen[key] = name
            if seen[key] is not None:
                _refuse(fired, f"{seen[key]} (its code, run by another route)")

    return profile


def _same_place(a: types.CodeType, b: types.CodeType) -> bool:
    return (a.co_filename, a.co_firstlineno, a.co_name) == (b.co_filename, b.co_firstlineno, b.co_name)


_TAMPERED = "the grader's watch, changed while your function ran"


@contextlib.contextmanager
def watch_calls(watch: Watch, fired: list[str]) -> Iterator[None]:
    """While the block runs (in this thread), refuse what ``watch`` forbids by any route; see the module.

    Learner code runs in this interpreter and can reach the watch's parts (a hostile batch emptied its
    tables and switched its profile off): the profile hook, the torch mode and the end of the block
    each check that the others are as they were set, and refuse the function if not."""
    if not _HOOKED[0]:
        _NEVER.update(_never_names())
        sys.addaudithook(_audit)
        _HOOKED[0] = True
    thread = threading.get_ident()
    on = [False]  # on once everything is in place
    mode = _TorchCalls(watch, fired)
    tables, counted = _contents(watch), _REFUSALS[0]

    def intact(when_off: bool = False) -> bool:
        # (not the torch mode stack: torch takes the mode off it around each call it hands the mode;
        # a learner's own pop is refused by name)
        return (
            on == [not when_off] and sys.getprofile() is profile and mode.watch is watch and mode.fired is fired
            and bool(_ACTIVE) and _ACTIVE[-1] is entry and _contents(watch) == tables
        )  # fmt: skip

    profile = _profiler(watch, fired, thread, on, intact)
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    entry = (watch, fired.append, thread)  # the audit hook records through it
    with mode:
        threading.setprofile(profile)
        sys.setprofile(profile)
        _ACTIVE.append(entry)
        mode.intact = intact
        on[0] = True
        try:
            yield
        finally:
            # The time limit's alarm may interrupt this more than once (lib.safe_call.call_with_timeout
            # repeats it until the call returns): each step is retried until it is done, then the
            # interruption goes on up.
            verdict: list[bool] = []

            def switch_off() -> None:  # first, and with no call in it: the hooks stop judging
                on[0] = False

            def judge() -> None:
                if not verdict:
                    verdict.append(intact(when_off=True) and len(fired) >= _REFUSALS[0] - counted)
                if not verdict[0] and _TAMPERED not in fired:
                    fired.append(_TAMPERED)

            _undo_all([
                switch_off,
                judge,
                lambda: setattr(mode, "intact", None),
                lambda: entry in _ACTIVE and _ACTIVE.remove(entry),
                lambda: sys.setprofile(previous),
                lambda: threading.setprofile(previous_threads),
            ])  # fmt: skip


def _contents(watch: Watch) -> tuple:
    return (
        tuple(watch.objects), tuple(watch.ops.items()), tuple(watch.codes), tuple(watch.prints.values()),
        tuple(_NEVER),
    )  # fmt: skip


def _undo_all(steps: list) -> None:
    interrupted: BaseException | None = None
    for step in steps:
        while True:
            try:
                step()
                break
            except GradingTimeout as error:  # the alarm again: do the step again
                interrupted = error
    if interrupted is not None:
        raise interrupted

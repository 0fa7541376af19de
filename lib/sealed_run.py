"""One learner function's hidden cases, run in a process sealed before the function is loaded.

``lib.call_watch`` watches a function from inside the learner's interpreter, where a student who
reads it can switch it off for one call and put it back (a fourth hostile batch, issue 30). The
grader (``lib.hidden_runs``) runs each function's cases in a child forked before the function is
loaded, and seals that child first:

* **torch's operators**: each forbidden torch callable's operator (``torch.softmax`` ->
  ``aten::softmax``) gets, at every dispatch key with a kernel (CPU, sparse, nested, mkldnn,
  autograd, composite...), a kernel that ends the process: every route (a private name, an operator
  handle, TorchScript, a redispatch, vmap) reaches it; the handle holding them is unreachable;
* **Python code**: a profile hook, with no closure and only immutable defaults, ends the process when
  a forbidden function's code runs: the code object, code from its file and line (its module run
  again), or code with its instructions (its source compiled again, under any name);
* **an audit hook** (no flag, no reachable state) ends it when the learner's code would change the
  profile, search the heap (``gc.get_objects``), load native code, start a process or write a file;
* **the kernel** (seccomp, Linux x86-64): no file opened for writing, no process or thread, no
  signal to another process, no tracing. The only way out is the pipe to the parent.

A refusal writes ``SEALED <what>`` to the pipe and ends the process (status ``REFUSED``): the parent
gives no credit to a run that did either, whatever else it wrote. What a process cannot guard
against itself: a hand-in that writes its memory (numpy's array interface takes any address) can
undo any of this; the static reading (``lib.code_policy``), done before anything of it runs, holds.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import types
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from lib.code_policy import library_file

__all__ = ["REFUSED", "seal", "forbidden_ops", "seccomp_available"]

REFUSED = 86  # the exit status of a sealed process that refused a call
# Dispatch keys whose kernels are replaced, where the operator has one (registering at a key an
# operator has no kernel for would make its composite lowering ambiguous).
_KEYS = (
    "CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutograd",
    "CompositeImplicitAutogradNestedTensor", "QuantizedCPU", "SparseCPU", "SparseCsrCPU", "NestedTensorCPU",
    "MkldnnCPU", "Autograd", "AutogradCPU", "AutogradNestedTensor", "AutogradOther", "FuncTorchBatched",
)  # fmt: skip


def _aten_names(forbidden: Iterable[tuple[Any, str]]) -> list[str]:
    """The aten operators the forbidden torch callables are: an operator handle's own name, or a
    torch function's name where aten has an operator of that name (torch.softmax, F.conv2d)."""
    names = []
    for obj, dotted in forbidden:
        if isinstance(obj, torch._ops.OpOverloadPacket):
            names.append(obj._qualified_op_name.removeprefix("aten::"))
        elif isinstance(obj, torch._ops.OpOverload):
            names.append(obj._schema.name.removeprefix("aten::"))
        elif dotted.startswith("torch.") and not isinstance(obj, type):
            name = getattr(obj, "__name__", "")
            if name and isinstance(getattr(torch.ops.aten, name, None), torch._ops.OpOverloadPacket):
                names.append(name)
    return list(dict.fromkeys(names))


def forbidden_ops(forbidden: Iterable[tuple[Any, str]]) -> list[tuple[str, str]]:
    """(overload name, dispatch key) for every kernel ``seal`` replaces: each overload of each
    forbidden operator, at each key of ``_KEYS`` where it has a kernel."""
    found = []
    for name in _aten_names(forbidden):
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            full = name if overload == "default" else f"{name}.{overload}"
            for key in _KEYS:
                try:
                    if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{full}", key):
                        found.append((full, key))
                except RuntimeError:  # a key this build of torch does not know
                    continue
    return found


def _python_twins(names: Iterable[str]) -> list[Any]:
    """torch's Python implementations of the forbidden operators (torch._refs, the decompositions):
    each computes the operator with elementwise operations, outside the dispatcher's kernel."""
    import torch._refs
    import torch._refs.nn.functional
    import torch._refs.special
    from torch._decomp import decomposition_table

    twins = []
    for name in names:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            twin = decomposition_table.get(getattr(packet, overload))
            if twin is not None:
                twins.append(twin)
        for home in (torch._refs, torch._refs.special, torch._refs.nn.functional):
            twin = getattr(home, name.lstrip("_"), None)
            if callable(twin):
                twins.append(twin)
    return twins


def _codes(objects: Iterable[Any]) -> list[types.CodeType]:
    """Every code object of these functions, classes and methods, nested ones included."""
    found: list[types.CodeType] = []
    stack = []
    for obj in objects:
        while isinstance(obj, (staticmethod, classmethod, types.MethodType)) or hasattr(obj, "__wrapped__"):
            obj = getattr(obj, "__func__", None) or obj.__wrapped__
        if isinstance(obj, types.FunctionType):
            stack.append(obj.__code__)
        elif isinstance(obj, type):
            for value in vars(obj).values():
                value = getattr(value, "__func__", value)
                if isinstance(value, types.FunctionType):
                    stack.append(value.__code__)
                elif isinstance(value, property):
                    stack += [f.__code__ for f in (value.fget, value.fset) if isinstance(f, types.FunctionType)]
    while stack:
        code = stack.pop()
        found.append(code)
        stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def _builtin_never() -> list[Any]:
    """Callables no exercise needs whose C code would act outside the profile's sight: a thread, a child
    process, code left to run later (the kernel's filter refuses the threads and processes too)."""
    import _posixsubprocess
    import _thread
    import atexit
    import signal

    found = [_thread.start_new_thread, _posixsubprocess.fork_exec, atexit.register, signal.signal]
    found += [getattr(torch._C, "fork", None), getattr(torch.jit, "fork", None), getattr(torch.jit, "_fork", None)]
    return [obj for obj in found if obj is not None]


# ---- the kernel's part: seccomp ----------------------------------------------------------------------------

_AUDIT_ARCH_X86_64 = 0xC000003E
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EPERM, _ENOSYS = 1, 38
_DENIED = {  # x86-64 system call numbers, refused with EPERM
    "creat": 85, "fork": 57, "vfork": 58, "clone": 56, "execve": 59, "execveat": 322, "kill": 62, "tkill": 200,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "unlink": 87, "unlinkat": 263, "rename": 82, "renameat": 264,
    "renameat2": 316, "mkdir": 83, "mkdirat": 258, "rmdir": 84, "link": 86, "linkat": 265, "symlink": 88,
    "symlinkat": 266, "chmod": 90, "fchmod": 91, "fchmodat": 268, "chown": 92, "fchown": 93, "lchown": 94,
    "fchownat": 260, "truncate": 76, "ftruncate": 77, "mknod": 133, "mknodat": 259, "utime": 132, "utimes": 235,
    "utimensat": 280, "futimesat": 261, "fallocate": 285, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
    "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "socket": 41, "connect": 42, "bind": 49,
    "personality": 135, "userfaultfd": 323, "bpf": 321, "perf_event_open": 298, "pidfd_open": 434,
    "pidfd_send_signal": 424, "pidfd_getfd": 438, "mount": 165, "umount2": 166, "pivot_root": 155,
    "chroot": 161, "setns": 308, "unshare": 272, "seccomp": 317, "memfd_secret": 447,
}  # fmt: skip
_NO_SUCH = {"clone3": 435, "openat2": 437}  # ENOSYS: the C library falls back to clone / openat
_OPEN, _OPENAT = 2, 257


def _filter() -> bytes:
    """The seccomp program (classic BPF) as bytes: sock_filter entries of (code, jt, jf, k)."""
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill = 0x7FFF0000, 0x80000000
    program: list[tuple] = [(ld, 0, 0, 4), (jeq, 1, 0, _AUDIT_ARCH_X86_64), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    program.append((jge, "eperm", 0, 0x40000000))  # the x32 ABI's numbers
    program.append((jeq, "open", 0, _OPEN))
    program.append((jeq, "openat", 0, _OPENAT))
    program += [(jeq, "eperm", 0, number) for number in _DENIED.values()]
    program += [(jeq, "enosys", 0, number) for number in _NO_SUCH.values()]
    program.append((ret, 0, 0, allow))
    labels = {}
    for label, argument in (("open", 1), ("openat", 2)):  # flags: the low word of that argument
        labels[label] = len(program)
        program += [(ld, 0, 0, 16 + 8 * argument), (jset, "eperm", 0, _WRITE_FLAGS), (ret, 0, 0, allow)]
    labels["eperm"] = len(program)
    program.append((ret, 0, 0, 0x00050000 | _EPERM))
    labels["enosys"] = len(program)
    program.append((ret, 0, 0, 0x00050000 | _ENOSYS))
    packed = b""
    for index, (code, jt, jf, k) in enumerate(program):
        jt = labels[jt] - index - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - index - 1 if isinstance(jf, str) else jf
        packed += struct.pack("<HBBI", code, jt, jf, k)
    return packed


def seccomp_available() -> str:
    """'' when this process can load the filter (Linux on x86-64), else why not."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return f"the filter is written for Linux on x86-64 ({sys.platform}, {os.uname().machine})"
    return ""


def _load_filter() -> None:
    program = _filter()
    buffer = ctypes.create_string_buffer(program)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Program(len(program) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


# ---- the interpreter's part ----------------------------------------------------------------------------------


def _refuser(fd: int):
    """A function that writes ``SEALED <what>`` to ``fd`` and ends the process: builtins only."""

    def refuse(what, _write=os.write, _exit=os._exit, _fd=fd, _str=str, _status=REFUSED):
        try:
            _write(_fd, b"\nSEALED " + _str(what).encode("utf-8", "replace")[:300] + b"\n")
        finally:
            _exit(_status)

    return refuse


def _instructions() -> tuple[bytes, bytes]:
    """``bytes.translate`` arguments that read a code object's opcodes (``co_code[::2]``) as two
    compilers of the same source agree on them: LOAD_METHOD as LOAD_ATTR; no caches, NULL pushes,
    PRECALL, NOP, RESUME or EXTENDED_ARG (lib.code_policy.fingerprint's rule, without dis at run time)."""
    import dis

    table = bytearray(range(256))
    if "LOAD_METHOD" in dis.opmap:
        table[dis.opmap["LOAD_METHOD"]] = dis.opmap["LOAD_ATTR"]
    from lib.code_policy import _NOT_COMPARED  # the instructions fingerprint() leaves out, one list for both

    return bytes(table), bytes(dis.opmap[name] for name in sorted(_NOT_COMPARED) if name in dis.opmap)


_TABLE, _DROPPED = _instructions()


def _print(code: types.CodeType) -> bytes:
    return code.co_code[::2].translate(_TABLE, _DROPPED)


MIN_PRINT = 24  # instructions a copy must share to be one (shorter bodies are alike by chance)


def _profile(codes, places, prints, builtins_, names, refuse):
    """The profile hook: ends the process when forbidden code runs or a forbidden builtin is called.
    Everything it reads is an immutable default (frozensets, tuples), bound when it is made; it hashes
    only plain strings and bytes (a str subclass's __hash__ would run learner code unprofiled)."""

    code_ids, builtin_ids = frozenset(id(code) for code in codes), frozenset(id(obj) for obj in builtins_)

    def profile(
        frame, event, arg, _ids=code_ids, _places=places, _prints=prints,
        _builtins=builtin_ids, _names=names, _keep=(tuple(codes), tuple(builtins_)),
        _id=id, _type=type, _str=str, _refuse=refuse, _table=_TABLE, _dropped=_DROPPED,
    ):  # fmt: skip
        try:
            if event == "call":
                code = frame.f_code
                key, file, name = _id(code), code.co_filename, code.co_name
                if _type(file) is not _str or _type(name) is not _str:
                    _refuse("code whose file or name is not a plain string")
                ops = code.co_code[::2].translate(_table, _dropped)
                if key in _ids or (file, code.co_firstlineno, name) in _places or ops in _prints:
                    found = [known for ident, known in _names if ident == key or ident == ops]
                    _refuse((found[0] if found else name) + " (its code, run by your function)")
            elif event == "c_call" and _id(arg) in _builtins:
                found = [known for ident, known in _names if ident == _id(arg)]
                _refuse(found[0] if found else "a call no exercise needs")
        except BaseException:
            _refuse("the grader's watch could not read a call")

    return profile


def _hook(refuse, codes, places, prints, keep, blocked, protected):
    """The audit hook; ``keep`` (the dispatcher's registrations) lives only in its closure; ``protected``:
    the functions whose code and defaults may not change (the profile's and the refusal's)."""
    from os import O_APPEND, O_CREAT, O_RDWR, O_WRONLY

    always = ("sys.setprofile", "sys.settrace", "gc.get_", "ctypes.", "os.system", "os.exec", "os.posix_spawn",
              "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen", "sys._current_frames", "sys.addaudithook",
              "cpython.remote_debugger", "sys.remote_exec")  # fmt: skip
    ids, guarded = frozenset(map(id, codes)), frozenset(map(id, protected))
    code_type, table, dropped = types.CodeType, _TABLE, _DROPPED
    write_flags = O_WRONLY | O_RDWR | O_CREAT | O_APPEND

    def forbidden_code(code) -> bool:
        stack = [code]
        while stack:
            code = stack.pop()
            if type(code) is not code_type:
                continue
            if type(code.co_filename) is not str or type(code.co_name) is not str:
                return True
            if (
                id(code) in ids
                or (code.co_filename, code.co_firstlineno, code.co_name) in places
                or code.co_code[::2].translate(table, dropped) in prints
            ):
                return True
            stack += code.co_consts
        return False

    def hook(event, args):
        if keep is None:  # (never: the registrations are kept alive by this reference)
            return
        if event.startswith(always):
            refuse(f"{event} (the sealed grader's rules)")
        if event == "import" and args and type(args[0]) is str and args[0].split(".")[0] in blocked:
            refuse(f"importing {args[0]}, whose functions this exercise forbids")
        if event == "open" and len(args) > 2:
            mode, flags = args[1], args[2]
            if (type(mode) is str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)) or (
                type(flags) is int and flags & write_flags
            ):
                refuse(f"writing {args[0]!r} (a function answers by what it returns)")
        if event in ("object.__setattr__", "object.__delattr__") and id(args[0]) in guarded:
            refuse(f"changing the grader's {args[1]} (the sealed grader's rules)")
        if event in ("exec", "function.__new__") and args and forbidden_code(args[0]):
            refuse(f"{event} of a forbidden function's code")
        if event == "code.__new__" and args and type(args[0]) is bytes:
            if args[0][::2].translate(table, dropped) in prints:
                refuse("code.__new__ with a forbidden function's instructions")

    return hook


def seal(forbidden: Sequence[tuple[Any, str]], fd: int, blocked: Iterable[str] = ()) -> None:
    """Seal this process (see the module): after this, a forbidden callable, reached by any route,
    writes ``SEALED <name>`` to ``fd`` and ends the process with status ``REFUSED``. For a process
    that runs nothing but one learner function's cases: nothing undoes it. ``blocked``: packages it may
    not import (forbidden names of theirs that were not read because they were not loaded)."""
    refuse = _refuser(fd)
    torch.set_num_threads(1)  # no thread pool is started after the filter forbids threads
    twins = _python_twins(_aten_names(forbidden))
    codes = _codes([obj for obj, _ in forbidden] + twins)
    c_types = (types.BuiltinFunctionType, types.MethodDescriptorType)
    builtins_ = [obj for obj, _ in forbidden if isinstance(obj, c_types)]
    builtins_ += _builtin_never()
    names = [(id(code), name) for obj, name in forbidden for code in _codes([obj])]
    names += [(_print(code), f"a copy of {name}") for obj, name in forbidden for code in _codes([obj])]
    names += [(id(code), f"torch's {code.co_name} in {library_file(code.co_filename)}") for code in _codes(twins)]
    names += [(id(obj), name) for obj, name in forbidden]
    names += [(id(obj), f"{getattr(obj, '__module__', None) or '?'}.{obj.__name__}") for obj in _builtin_never()]
    places = frozenset((c.co_filename, c.co_firstlineno, c.co_name) for c in codes)
    prints = frozenset(ops for ops in map(_print, codes) if len(ops) >= MIN_PRINT)

    if not seccomp_available():  # elsewhere (macOS) the interpreter's parts seal it without the kernel's
        _load_filter()
    registrations = torch._C._dispatch_library("IMPL", "aten", "", "lib/sealed_run.py", 0)
    with warnings.catch_warnings():  # torch warns that each kernel overrides one
        warnings.simplefilter("ignore")
        for full, key in forbidden_ops(forbidden):

            def kernel(*args, _what=f"torch's aten::{full}", _refuse=refuse, **kwargs):
                _refuse(_what)

            registrations.impl(full, key, kernel, False)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(registrations))  # no reference dropped ever frees them
    repr(torch.zeros(2, 2)), repr(torch.tensor(1.0))  # printing's lazy imports (namedtuples) done before
    profile = _profile(codes, places, prints, builtins_, tuple(names), refuse)
    sys.setprofile(profile)
    sys.addaudithook(_hook(refuse, codes, places, prints, registrations, frozenset(blocked), (profile, refuse)))

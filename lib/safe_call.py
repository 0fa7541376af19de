"""Reading and running what a learner typed, without letting it hurt the grader (lib.grading, lib.checks).

An answer may be text, a ragged list, a tensor that needs grad, bfloat16 or complex: ``as_numbers``
reads it as a float array of the expected shape, or says in one line what is wrong with it.

A function a learner writes may loop forever, raise anything (even ``SystemExit``), or call
``exit()``, which in a notebook kernel does not raise but shuts the kernel down after the
cell. ``call_with_timeout`` stops the first, ``exit_raises`` turns the last into an exception
that grading catches, and ``describe_error`` gives one readable line for any of them (even
for an exception whose own ``__str__`` raises). ``forbid_calls`` stops a function from calling
the library functions an exercise asks the learner to write, and ``handed_in`` notices one of
them handed in as the answer itself.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import math
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "as_numbers",
    "read_numbers",
    "plain_numbers",
    "GradingTimeout",
    "call_with_timeout",
    "exit_raises",
    "describe_error",
    "ForbiddenCall",
    "forbid_calls",
    "resolve_dotted",
    "handed_in",
]


class GradingTimeout(BaseException):
    """Raised inside a learner's function that runs too long (BaseException, so that a bare
    ``except Exception`` in their code does not swallow it)."""


def call_with_timeout(function: Callable, args: Sequence, seconds: float) -> Any:
    """``function(*args)``, stopped with GradingTimeout after ``seconds``.

    In the main thread (a notebook kernel, pytest, a script) a SIGALRM timer interrupts the
    call, and keeps interrupting it every 50 ms until it returns: numpy swallows an exception
    raised inside a learner's ``__len__`` and asks again, so one interruption may not be enough.
    Elsewhere it runs in a daemon thread that is abandoned if it overruns.
    """
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        active = [True]

        def on_alarm(signum, frame):
            if active[0]:
                raise GradingTimeout

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
        try:
            return function(*args)
        finally:
            while active[0]:  # an alarm may land here once more: retry until disarmed
                try:
                    active[0] = False
                except GradingTimeout:
                    pass
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    outcome: dict[str, Any] = {}

    def target():
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # handed back to the caller below
            outcome["error"] = error

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise GradingTimeout
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def exit_raises():
    """In IPython, ``exit()`` does not raise: it asks the kernel to shut down after the cell.
    While a learner's function runs, make it raise SystemExit instead, which grading catches."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is None or not hasattr(shell, "ask_exit"):
        yield
        return

    def refuse_exit(*args, **kwargs):
        raise SystemExit("exit() inside the function")

    shell.ask_exit = refuse_exit  # an instance attribute shadows the method
    try:
        yield
    finally:
        del shell.ask_exit


def describe_error(error: BaseException) -> str:
    """One line: the exception's type and the first line of its message. An exception whose
    ``__str__`` raises (or returns something other than text) is still described, by its type."""
    name = type(error).__name__
    try:
        text = str(error)
    except (Exception, SystemExit, GeneratorExit):  # the learner's exception class may raise anything
        return f"{name} (its message could not be read)"
    first = text.splitlines()[0] if text else ""
    return f"{name}: {first[:200]}" if first else name


class ForbiddenCall(BaseException):
    """Raised when a learner's function calls a library function the exercise asks them to
    write (BaseException, so that a bare ``except Exception`` in their code does not swallow it)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _guard(name: str, fired: list[str]) -> Callable:
    def refused(*args, **kwargs):
        fired.append(name)
        raise ForbiddenCall(name)

    return refused


_NOT_SEARCHED = {"", "torch", "builtins", "numpy", "importlib", "inspect", "runpy"}
_REFUSE = "__lib_safe_call_refuse__"  # the global a refusing code object calls


def _refusing_code(name: str) -> types.CodeType:
    """A code object that, run as the body of a forbidden function, calls the refusal that
    ``forbid_calls`` puts in that function's globals under ``_REFUSE``."""
    namespace: dict[str, Any] = {}
    exec(f"def refused(*args, **kwargs):\n    return {_REFUSE}({name!r})\n", namespace)
    return namespace["refused"].__code__


def _reached_functions(function: Any, limit: int = 64) -> list[types.FunctionType]:
    """The Python functions ``function`` may call without a lookup by name: itself, what it
    wraps (a bound method's function, a partial's, a callable object's ``__call__``), and the
    functions held in its closure cells and default arguments, recursively."""
    start = function
    if type(start) is types.MethodType:
        start = start.__func__
    elif type(start) is functools.partial:
        start = start.func
    elif type(start) is not types.FunctionType:  # an object with a __call__ method
        start = next((vars(k)["__call__"] for k in type(start).__mro__ if "__call__" in vars(k)), None)
    found: list[types.FunctionType] = []
    queue = [start]
    while queue and len(found) < limit:
        item = queue.pop()
        if type(item) is types.MethodType:
            item = item.__func__
        if not isinstance(item, types.FunctionType) or any(item is f for f in found):
            continue
        found.append(item)
        for cell in item.__closure__ or ():
            with contextlib.suppress(ValueError):  # an empty cell
                queue.append(cell.cell_contents)
        queue += list(item.__defaults__ or ()) + list((item.__kwdefaults__ or {}).values())
    return found


def _reached_modules(namespaces: Sequence[dict], roots: set[str]) -> list[types.ModuleType]:
    """The modules of the packages ``roots`` that a function's globals reach: modules held in
    them (``import lib.attention as A``, ``import lib``) and those modules' submodules."""
    found: dict[str, types.ModuleType] = {}
    queue = [value for namespace in namespaces for value in list(namespace.values())]
    while queue:
        value = queue.pop()
        if not isinstance(value, types.ModuleType):
            continue
        name = getattr(value, "__name__", "")
        if not isinstance(name, str) or name.split(".")[0] not in roots or name in found:
            continue
        found[name] = value
        queue += [v for v in list(vars(value).values()) if isinstance(v, types.ModuleType)]
    return list(found.values())


@contextlib.contextmanager
def forbid_calls(
    function: Any, forbidden: Sequence[tuple[Any, str]], homes: Sequence[tuple[Any, str]] = ()
) -> Iterator[list[str]]:
    """While the block runs, a call from ``function`` into one of the ``forbidden`` (object,
    name) pairs raises ForbiddenCall(name); the list the block receives records each such call
    (a learner's bare ``except`` may swallow the exception, but not the record).

    A forbidden plain function (one without a closure) gets a refusing body: its ``__code__``
    is swapped, so a call reaches the guard by any route, a name, an attribute
    (``lib.attention.softmax``), a dataclass field, a method (``MultiHeadAttention.merge_heads``).
    Any other forbidden object is replaced wherever ``function`` would find it: in its globals,
    closure cells and default arguments (and those of the functions it holds), in the modules of
    the forbidden objects' packages that its globals reach, and at each ``homes`` (owner,
    attribute) pair, the module or class that defines it. Everything is put back when the block
    ends, however it ends.
    """
    fired: list[str] = []
    names = {id(obj): (obj, name) for obj, name in forbidden}

    def match(value: Any) -> str | None:
        entry = names.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        if isinstance(value, (staticmethod, classmethod)):
            return match(value.__func__)
        return None

    undo: list[Callable[[], None]] = []
    try:
        for obj, name in forbidden:
            if type(obj) is types.FunctionType and not obj.__closure__ and obj.__code__.co_name != "refused":
                home, code = obj.__globals__, obj.__code__
                if _REFUSE not in home:

                    def refuse(which: str) -> None:
                        fired.append(which)
                        raise ForbiddenCall(which)

                    home[_REFUSE] = refuse
                    undo.append(lambda home=home: home.pop(_REFUSE, None))
                obj.__code__ = _refusing_code(name)
                undo.append(lambda obj=obj, code=code: setattr(obj, "__code__", code))
        functions = _reached_functions(function)
        namespaces = [f.__globals__ for f in functions]
        # The packages whose modules a function's globals reach are searched for forbidden objects;
        # torch and the standard library are not (hundreds of modules): their homes are named instead.
        roots = {str(getattr(obj, "__module__", "") or "").split(".")[0] for obj, _ in forbidden} - _NOT_SEARCHED
        namespaces += [vars(module) for module in _reached_modules(namespaces, roots)]
        for owner, attribute in homes:
            if isinstance(owner, types.ModuleType):
                namespaces.append(vars(owner))
                continue
            own = attribute in vars(owner)
            original = vars(owner)[attribute] if own else inspect.getattr_static(owner, attribute, None)
            name = match(original)
            if name is not None:  # an inherited method (Tensor.softmax, from TensorBase) is shadowed, then removed
                guard = _guard(name, fired)
                setattr(owner, attribute, staticmethod(guard) if isinstance(original, staticmethod) else guard)
                undo.append(
                    lambda owner=owner, attribute=attribute, original=original, own=own: (
                        setattr(owner, attribute, original) if own else delattr(owner, attribute)
                    )
                )
        seen: set[int] = set()
        for namespace in namespaces:
            if id(namespace) in seen:
                continue
            seen.add(id(namespace))
            for key, value in list(namespace.items()):
                name = match(value)
                if name is not None:
                    namespace[key] = _guard(name, fired)
                    undo.append(lambda namespace=namespace, key=key, value=value: namespace.__setitem__(key, value))
        for f in functions:
            for cell in f.__closure__ or ():
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                name = match(value)
                if name is not None:
                    cell.cell_contents = _guard(name, fired)
                    undo.append(lambda cell=cell, value=value: setattr(cell, "cell_contents", value))
            defaults = f.__defaults__
            if defaults and any(match(d) for d in defaults):
                f.__defaults__ = tuple(_guard(match(d), fired) if match(d) else d for d in defaults)
                undo.append(lambda f=f, defaults=defaults: setattr(f, "__defaults__", defaults))
            kwdefaults = f.__kwdefaults__
            if kwdefaults and any(match(d) for d in kwdefaults.values()):
                f.__kwdefaults__ = {k: _guard(match(d), fired) if match(d) else d for k, d in kwdefaults.items()}
                undo.append(lambda f=f, kwdefaults=kwdefaults: setattr(f, "__kwdefaults__", kwdefaults))
        yield fired
    finally:
        for restore in reversed(undo):
            restore()


@functools.cache
def resolve_dotted(dotted: str) -> tuple[Any, Any, str]:
    """(the object, the module or class that defines it, its attribute there) for a dotted name
    such as "lib.attention.softmax" or "lib.attention.MultiHeadAttention.merge_heads"."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:-1]:
            owner = getattr(owner, attribute)
        return getattr(owner, parts[-1]), owner, parts[-1]
    raise ImportError(f"stands_for names {dotted!r}, which is not an importable module's attribute")


LOADED_ONLY = ("scipy", "sklearn")  # slow to import (sklearn 2.5 s): their forbidden names are read once loaded


def unloaded(forbids: Sequence[str]) -> frozenset[str]:
    """LOADED_ONLY's packages ``forbids`` names that are not loaded (lib.sealed_run refuses importing them)."""
    return frozenset(d.split(".")[0] for d in forbids if d.split(".")[0] in LOADED_ONLY) - set(sys.modules)


def handed_in(answer: Any, forbidden: list[tuple[Any, str]]) -> str | None:
    """The short name when ``answer`` is one of the forbidden functions itself (or a bound
    method or partial of one), else None."""
    inner = answer
    if type(inner) is types.MethodType:
        inner = inner.__func__
    elif type(inner) is functools.partial:
        inner = inner.func
    for obj, name in forbidden:
        if answer is obj or inner is obj:
            return name
    return None


def plain_numbers(answer: Any) -> Any:
    """Tensors (anywhere in a list or tuple) as numpy arrays numpy can read: detached, on the
    CPU, and bfloat16 widened to float32 (numpy has no bfloat16)."""
    if isinstance(answer, torch.Tensor):
        tensor = answer.detach().cpu().resolve_conj()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        return tensor.numpy()
    if isinstance(answer, (list, tuple)) and len(answer) <= 100_000:
        return [plain_numbers(item) for item in answer]
    return answer


def read_numbers(answer: Any) -> tuple[np.ndarray | None, str]:
    """The answer as a numeric array, any shape (complex kept), or None and what is wrong with it.
    This is the part of reading an answer that runs the learner's code (``__array__``, ``__len__``):
    in a grading run it runs in the sandbox, and only the array leaves it."""
    if isinstance(answer, (str, bytes)):
        return None, f"expected numbers but got the text {answer!r}"[:200] + "; write e.g. [0.5, 0.5] without quotes"
    if isinstance(answer, (bool, dict, set)) or callable(answer):
        return None, f"expected numbers but got a {type(answer).__name__}"
    try:
        answer = plain_numbers(answer)
        raw = np.asarray(answer)
        if raw.dtype == object:  # e.g. a list mixing numbers and tensors: read each element
            raw = np.asarray(answer, dtype=np.complex128)
    except (Exception, SystemExit, GeneratorExit) as error:  # a learner's __array__ may raise anything
        return None, f"could not read the answer as numbers ({describe_error(error)})"
    if raw.dtype.kind in "OSUVMm":
        return None, f"could not read the answer as numbers (an array of {raw.dtype})"
    return np.array(raw), ""  # a plain array of our own, whatever the learner's object was


def as_numbers(answer: Any, expected_shape: tuple[int, ...]) -> tuple[np.ndarray | None, str]:
    """The answer as a float array of the expected shape, or None and what is wrong with it."""
    raw, problem = read_numbers(answer)
    if raw is None:
        return None, problem
    if np.iscomplexobj(raw):
        if np.any(raw.imag != 0):
            return None, "the answer is complex, with a non-zero imaginary part; attention's numbers are real"
        raw = raw.real
    numbers = raw.astype(np.float64)
    if numbers.shape != expected_shape:
        if len(expected_shape) > 1 and numbers.ndim == 1 and numbers.size == math.prod(expected_shape):
            numbers = numbers.reshape(expected_shape)  # a grid typed as one flat list, row after row
        elif numbers.size == math.prod(expected_shape) and numbers.squeeze().shape == tuple(
            d for d in expected_shape if d != 1
        ):
            numbers = numbers.reshape(expected_shape)  # [[1, 2]] for [1, 2]: same numbers, extra brackets
        else:
            want = (
                "one number" if expected_shape == () else f"{math.prod(expected_shape)} numbers, shape {expected_shape}"
            )
            return None, f"expected {want}, got shape {numbers.shape}"
    if not np.all(np.isfinite(numbers)):
        return None, "the answer contains NaN or inf (exp overflowing, or -inf - (-inf), on the way?)"
    return numbers, ""

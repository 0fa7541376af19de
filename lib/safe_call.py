"""Reading and running what a learner typed, without letting it hurt the grader (used by ``lib.checks``).

An answer may be text, a ragged list, a tensor that needs grad, bfloat16 or complex: ``as_numbers``
reads it as a float array of the expected shape, or says in one line what is wrong with it.

A function a learner writes may loop forever, raise anything (even ``SystemExit``), or call
``exit()``, which in a notebook kernel does not raise but shuts the kernel down after the
cell. ``call_with_timeout`` stops the first, ``exit_raises`` turns the last into an exception
that grading catches, and ``describe_error`` gives one readable line for any of them.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["as_numbers", "plain_numbers", "GradingTimeout", "call_with_timeout", "exit_raises", "describe_error"]


class GradingTimeout(BaseException):
    """Raised inside a learner's function that runs too long (BaseException, so that a bare
    ``except Exception`` in their code does not swallow it)."""


def call_with_timeout(function: Callable, args: Sequence, seconds: float) -> Any:
    """``function(*args)``, stopped with GradingTimeout after ``seconds``.

    In the main thread (a notebook kernel, pytest, a script) a SIGALRM timer interrupts the
    call. Elsewhere it runs in a daemon thread that is abandoned if it overruns.
    """
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum, frame):
            raise GradingTimeout

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return function(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    outcome: dict[str, Any] = {}

    def target():
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # noqa: BLE001 - handed back to the caller below
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
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__


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


def as_numbers(answer: Any, expected_shape: tuple[int, ...]) -> tuple[np.ndarray | None, str]:
    """The answer as a float array of the expected shape, or None and what is wrong with it."""
    if isinstance(answer, (str, bytes)):
        return None, f"expected numbers but got the text {answer!r}; write e.g. [0.5, 0.5] without quotes"
    if isinstance(answer, (bool, dict, set)) or callable(answer):
        return None, f"expected numbers but got a {type(answer).__name__}"
    try:
        answer = plain_numbers(answer)
        raw = np.asarray(answer)
        if raw.dtype == object:  # e.g. a list mixing numbers and tensors: read each element
            raw = np.asarray(answer, dtype=np.complex128)
    except (Exception, SystemExit, GeneratorExit) as error:  # noqa: BLE001 - a learner's __array__ may raise anything
        return None, f"could not read the answer as numbers ({describe_error(error)})"
    if raw.dtype.kind in "OSUVMm":
        return None, f"could not read the answer as numbers (an array of {raw.dtype})"
    if np.iscomplexobj(raw):
        if np.any(raw.imag != 0):
            return None, "the answer is complex, with a non-zero imaginary part; attention's numbers are real"
        raw = raw.real
    numbers = raw.astype(np.float64)
    if numbers.shape != expected_shape:
        if numbers.size == math.prod(expected_shape) and numbers.squeeze().shape == tuple(
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
